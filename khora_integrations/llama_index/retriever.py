"""``KhoraRetriever``: Khora's fused ``recall`` as a LlamaIndex retriever."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import RecallResult, SearchMode
from khora_integrations._bridge import (
    ABSTAIN_POLICIES,
    KhoraRef,
    apply_abstention_policy,
    chunk_metadata,
    namespace_hint,
)
from khora_integrations.llama_index.events import KhoraAbstentionEvent, dispatcher
from khora_integrations.llama_index.filters import to_recall_filter

__all__ = ["BOOKKEEPING_KEYS", "DEFAULT_NAMESPACE", "KhoraRetriever"]

#: The namespace the LlamaIndex adapters use when built without one (``KhoraRetriever``,
#: ``KhoraPropertyGraphStore``); it is created on first use.
DEFAULT_NAMESPACE = "llama_index"

#: Metadata keys Khora adds for programs, hidden from the LLM prompt and from embeddings
#: (``excluded_llm_metadata_keys`` / ``excluded_embed_metadata_keys``).
BOOKKEEPING_KEYS = (
    "namespace_id",
    "document_id",
    "chunk_id",
    "chunk_index",
    "start_char",
    "end_char",
    "score",
    "channel_scores",
    "channel_ranks",
    "vector_similarity",
    "rerank_score",
    "channels",
    "entity_ids",
    "should_abstain",
    "abstention_signals",
    "external_id",
    "content_type",
    "created_at",
)
_LLAMA_KEYS = frozenset({"doc_id", "ref_doc_id"})


class KhoraRetriever(BaseRetriever):
    """Retrieve from a Khora namespace with ``recall`` (vector + graph (+ BM25) fused by RRF).

    Each result is a ``NodeWithScore`` over a ``TextNode`` whose ``id_`` is the Khora chunk
    id, ``text`` the chunk text and ``score`` the normalised fused rank within the result
    (top hit ~1.0, not a confidence). ``relationships[NodeRelationship.SOURCE]`` points at
    the Khora document id (so ``node.ref_doc_id`` is the document). ``metadata`` holds the
    document's system fields, your metadata, the scores (``channel_scores`` raw per
    channel, ``vector_similarity`` raw cosine), the ``channels`` that found it, the
    ``entities`` it mentions, ``should_abstain`` and ``abstention_signals`` (see
    ``khora_integrations._bridge.chunk_metadata``); the bookkeeping keys
    (``BOOKKEEPING_KEYS``) are excluded from what the LLM and embedders see.

    Abstention (``abstain``) decides what happens when recall says memory does not cover
    the question (``RecallResult.should_abstain``):

    * ``"flag"`` (default): keep the nodes; ``should_abstain`` is True in their metadata;
    * ``"empty"``: return no nodes;
    * ``"raise"``: raise ``khora_core.errors.KhoraAbstention`` carrying the signals.

    With every policy, an abstaining retrieval also dispatches a ``KhoraAbstentionEvent``
    through LlamaIndex instrumentation (see ``khora_integrations.llama_index.events``).

    Which loop the Khora lives on: pass a ``KhoraSync`` (or ``config=`` to let the retriever
    open its own) and both ``retrieve`` and ``aretrieve`` work anywhere. An async ``Khora``
    serves ``aretrieve`` on its own loop; for ``retrieve`` it must have been opened through
    ``khora_core.sync.run_sync`` (the one sync bridge), or use a ``KhoraSync``.

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted one is built from ``config`` (or the
            environment) and opened on first use.
        namespace: the namespace id to recall from; when omitted, ``"llama_index"`` (the
            ``KhoraPropertyGraphStore`` default), created on first use. A namespace you name
            must exist (``NamespaceNotFoundError`` otherwise).
        similarity_top_k: how many chunks to return (``recall(limit=...)``).
        mode: the ``SearchMode`` (``"hybrid"`` by default).
        filters: LlamaIndex ``MetadataFilters``, a ``RecallFilter`` or its dict.
            ``MetadataFilters`` are read as ``KhoraVectorStore`` reads them (LlamaIndex's
            dialect): every key is a top-level key of your metadata, taken literally, even
            one named like a system field (``created_at``, ``source``, ``title``...) or
            holding a dot; system fields are filtered with a ``RecallFilter`` (dict), e.g.
            ``{"source": "wiki"}``.
        min_similarity: raw cosine cutoff on the vector channel.
        abstain: ``"flag"``, ``"empty"`` or ``"raise"``.
        config: the ``KhoraConfig`` for a Khora the retriever owns.
        preset: the read-path preset of a Khora the retriever owns (``"memory"``, ...).
        callback_manager: LlamaIndex callback manager.
        verbose: LlamaIndex verbose flag.

    Raises:
        InvalidInputError: a bad ``similarity_top_k``, ``mode`` or ``abstain``.
        RecallFilterValidationError, RecallFilterUnsupportedError: a filter that cannot be
            used (raised here, not at the first query).
    """

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        namespace: str | None = None,
        similarity_top_k: int = 4,
        mode: SearchMode | str = SearchMode.HYBRID,
        filters: Any = None,
        min_similarity: float = 0.0,
        abstain: str = "flag",
        config: KhoraConfig | None = None,
        preset: str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if (
            not isinstance(similarity_top_k, int)
            or isinstance(similarity_top_k, bool)
            or similarity_top_k < 1
        ):
            raise InvalidInputError(f"similarity_top_k must be a positive integer, got {similarity_top_k!r}")
        if abstain not in ABSTAIN_POLICIES:
            raise InvalidInputError(f"abstain must be one of {list(ABSTAIN_POLICIES)}, got {abstain!r}")
        try:
            self.mode = SearchMode(mode)
        except ValueError as exc:
            raise InvalidInputError(
                f"Unknown mode {mode!r}; use one of {[m.value for m in SearchMode]}"
            ) from exc
        self.namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        self._create_namespace = namespace is None
        self.similarity_top_k = similarity_top_k
        self.filters = to_recall_filter(filters, node_metadata=True)
        self.min_similarity = float(min_similarity)
        self.abstain = abstain
        self._ref = KhoraRef(kb, config=config, preset=preset)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def close(self) -> None:
        """Close the Khora this retriever opened; a Khora you passed in stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._ref.aclose()

    # -- one implementation ---------------------------------------------------------------
    async def _recall(self, kb: Khora, query: str) -> RecallResult:
        if self._create_namespace:  # the default namespace: created on first use
            await kb.create_namespace(self.namespace, namespace=self.namespace)
            self._create_namespace = False
        try:
            return await kb.recall(
                query,
                namespace=self.namespace,
                limit=self.similarity_top_k,
                mode=self.mode,
                min_similarity=self.min_similarity,
                filter=self.filters,
            )
        except NamespaceNotFoundError as exc:  # the namespace's name given: show its id
            raise await namespace_hint(kb, self.namespace, exc) from exc

    def _event(self, result: RecallResult) -> KhoraAbstentionEvent | None:
        if not result.should_abstain:
            return None
        return KhoraAbstentionEvent(
            query=result.query,
            namespace=self.namespace,
            policy=self.abstain,
            signals=dict(result.engine_info.get("abstention_signals") or {}),
        )

    def _nodes(self, result: RecallResult) -> list[NodeWithScore]:
        keep, signals = apply_abstention_policy(result, self.abstain)
        if not keep:
            return []
        nodes = []
        for chunk in result.chunks[: self.similarity_top_k]:
            metadata = chunk_metadata(result, chunk)
            metadata["should_abstain"] = signals["should_abstain"]
            metadata["abstention_signals"] = signals
            # LlamaIndex's own bookkeeping (``_node_content``, ``ref_doc_id``...) when it wrote the node.
            hidden = [k for k in metadata if k in BOOKKEEPING_KEYS or k.startswith("_") or k in _LLAMA_KEYS]
            node = TextNode(
                id_=chunk.id,
                text=chunk.content,
                metadata=metadata,
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=chunk.document_id)},
                excluded_llm_metadata_keys=hidden,
                excluded_embed_metadata_keys=hidden,
                start_char_idx=chunk.start_char,
                end_char_idx=chunk.end_char,
            )
            nodes.append(NodeWithScore(node=node, score=chunk.score))
        return nodes

    @staticmethod
    def _query(query_bundle: QueryBundle) -> str:
        if not query_bundle.query_str or not query_bundle.query_str.strip():
            raise InvalidInputError("KhoraRetriever needs a non-empty query string")
        return query_bundle.query_str

    # -- LlamaIndex entry points -------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        result = self._ref.call(lambda kb: self._recall(kb, query))
        event = self._event(result)
        if event is not None:
            dispatcher.event(event)
        return self._nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        result = await self._ref.acall(lambda kb: self._recall(kb, query))
        event = self._event(result)
        if event is not None:
            await dispatcher.aevent(event)
        return self._nodes(result)
