"""``KhoraRetriever``: Khora's fused ``recall`` as a LangChain retriever."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import RecallResult, SearchMode
from khora_integrations._bridge import KhoraRef, apply_abstention_policy, chunk_metadata, namespace_hint
from khora_integrations.langchain.filters import pgvector_to_recall_filter

__all__ = ["ABSTENTION_EVENT", "DEFAULT_NAMESPACE", "KhoraRetriever"]

#: The namespace a ``KhoraRetriever`` built without one recalls from (``KhoraVectorStore``'s
#: default too); it is created on first use.
DEFAULT_NAMESPACE = "langchain"

#: Name of the custom callback event a retriever dispatches when recall says it should abstain.
ABSTENTION_EVENT = "khora_abstention"
_OVERRIDES = ("k", "filter", "mode", "min_similarity", "abstain")


class KhoraRetriever(BaseRetriever):
    """Retrieve from a Khora namespace with ``recall`` (vector + graph (+ BM25) fused by RRF).

    Each ``Document`` is one recalled chunk: ``id`` is the Khora chunk id, ``page_content``
    the chunk text, and ``metadata`` holds the document's system fields, your metadata,
    the scores (``score`` normalised within the result, ``channel_scores`` raw per channel,
    ``vector_similarity`` raw cosine), the ``channels`` that found it and the ``entities``
    it mentions (see ``khora_integrations._bridge.chunk_metadata``), plus
    ``should_abstain`` and ``abstention_signals``.

    Abstention (``abstain``) decides what happens when recall says memory does not cover
    the question (``RecallResult.should_abstain``):

    * ``"flag"`` (default): keep the documents; ``should_abstain`` is True in every
      document's metadata. Nothing is lost and the chain decides;
    * ``"empty"``: return no documents;
    * ``"raise"``: raise ``khora_core.errors.KhoraAbstention`` carrying the signals.

    With every policy, an abstaining run also dispatches the custom callback event
    ``"khora_abstention"`` (``on_custom_event`` handlers, ``astream_events``) with
    ``{"query", "namespace", "policy", "signals"}``.

    ``k``, ``filter``, ``mode``, ``min_similarity`` and ``abstain`` can be overridden per
    call: ``retriever.invoke("question", k=3)``.

    Which loop the Khora lives on: pass a ``KhoraSync`` (or ``config=`` to let the retriever
    open its own) and both ``invoke`` and ``ainvoke`` work anywhere. An async ``Khora``
    serves ``ainvoke`` on its own loop; for ``invoke`` it must have been opened through
    ``khora_core.sync.run_sync`` (the one sync bridge), or use a ``KhoraSync`` and its
    ``.aio``.

    Attributes:
        kb: a ``Khora`` or ``KhoraSync``; when omitted one is built from ``config`` (or
            the environment) and opened on first use.
        config: the ``KhoraConfig`` for a Khora the retriever owns.
        preset: the read-path preset of a Khora the retriever owns (``"memory"`` for chat
            and agent memory; see ``khora_core.retrieval.presets``).
        namespace: the namespace id to recall from; when omitted, ``"langchain"`` (where
            ``KhoraVectorStore`` writes by default), created on first use. A namespace you
            name must exist (``NamespaceNotFoundError`` otherwise).
        k: how many chunks to return (``recall(limit=k)``). ``k=10`` is ``recall``'s
            default limit, which lets Khora adapt the count to the question (3 to 15 chunks,
            ``QueryConfig.adaptive_limit``); any other ``k`` is honoured exactly.
        mode: the ``SearchMode`` (``"hybrid"`` by default).
        filter: a ``RecallFilter``, its dict, or a PGVector-style dict (see
            ``khora_integrations.langchain.filters``).
        min_similarity: raw cosine cutoff on the vector channel.
        abstain: ``"flag"``, ``"empty"`` or ``"raise"``.
    """

    kb: Khora | KhoraSync | None = None
    config: KhoraConfig | None = None
    preset: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    k: int = Field(default=4, ge=1)
    mode: SearchMode = SearchMode.HYBRID
    filter: Any = None
    min_similarity: float = 0.0
    abstain: Literal["flag", "empty", "raise"] = "flag"

    _ref: KhoraRef = PrivateAttr()
    _create_namespace: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        self._ref = KhoraRef(self.kb, config=self.config, preset=self.preset)
        self._create_namespace = "namespace" not in self.model_fields_set

    def close(self) -> None:
        """Close the Khora this retriever opened; a Khora you passed in stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._ref.aclose()

    # -- one implementation ---------------------------------------------------------------
    def _options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(_OVERRIDES))
        if unknown:
            raise InvalidInputError(
                f"KhoraRetriever got unknown arguments {unknown}; it takes {list(_OVERRIDES)}"
            )
        opts = {name: overrides.get(name, getattr(self, name)) for name in _OVERRIDES}
        if not isinstance(opts["k"], int) or opts["k"] < 1:
            raise InvalidInputError(f"k must be a positive integer, got {opts['k']!r}")
        opts["filter"] = pgvector_to_recall_filter(opts["filter"])
        return opts

    async def _recall(self, kb: Khora, query: str, opts: dict[str, Any]) -> RecallResult:
        if self._create_namespace:  # the default namespace: created on first use
            await kb.create_namespace(self.namespace, namespace=self.namespace)
            self._create_namespace = False
        try:
            return await kb.recall(
                query,
                namespace=self.namespace,
                limit=opts["k"],
                mode=opts["mode"],
                min_similarity=opts["min_similarity"],
                filter=opts["filter"],
            )
        except NamespaceNotFoundError as exc:  # the namespace's name given: show its id
            raise await namespace_hint(kb, self.namespace, exc) from exc

    def _event(self, result: RecallResult, opts: dict[str, Any]) -> dict[str, Any] | None:
        if not result.should_abstain:
            return None
        return {
            "query": result.query,
            "namespace": self.namespace,
            "policy": opts["abstain"],
            "signals": dict(result.engine_info.get("abstention_signals") or {}),
        }

    def _documents(self, result: RecallResult, opts: dict[str, Any]) -> list[Document]:
        keep, signals = apply_abstention_policy(result, opts["abstain"])
        if not keep:
            return []
        docs = []
        for chunk in result.chunks[: opts["k"]]:
            metadata = chunk_metadata(result, chunk)
            metadata["should_abstain"] = signals["should_abstain"]
            metadata["abstention_signals"] = signals
            docs.append(Document(id=chunk.id, page_content=chunk.content, metadata=metadata))
        return docs

    # -- LangChain entry points ------------------------------------------------------------
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        opts = self._options(kwargs)
        result = self._ref.call(lambda kb: self._recall(kb, query, opts))
        event = self._event(result, opts)
        if event is not None:
            CallbackManager(
                handlers=run_manager.handlers,
                parent_run_id=run_manager.parent_run_id,
                tags=run_manager.tags,
                metadata=run_manager.metadata,
            ).on_custom_event(ABSTENTION_EVENT, event, run_id=run_manager.run_id)
        return self._documents(result, opts)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        opts = self._options(kwargs)
        result = await self._ref.acall(lambda kb: self._recall(kb, query, opts))
        event = self._event(result, opts)
        if event is not None:
            await AsyncCallbackManager(
                handlers=run_manager.handlers,
                parent_run_id=run_manager.parent_run_id,
                tags=run_manager.tags,
                metadata=run_manager.metadata,
            ).on_custom_event(ABSTENTION_EVENT, event, run_id=run_manager.run_id)
        return self._documents(result, opts)
