"""``KhoraVectorStore``: a LlamaIndex vector store over one Khora namespace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.filters import RecallFilter
from khora_core.models import SYSTEM_DATE_KEYS, SYSTEM_STRING_KEYS, Document
from khora_integrations._bridge import (
    KhoraRef,
    best_documents,
    documents_by_ids,
    forget_ids,
    namespace_hint,
    store_texts,
)
from khora_integrations.llama_index.filters import to_recall_filter
from khora_integrations.llama_index.retriever import DEFAULT_NAMESPACE

__all__ = ["KhoraVectorStore"]

_PAGE = 500  # documents read per page when a call must look at the whole namespace


def _record(doc: Document) -> dict[str, Any]:
    """What ``RecallFilter.matches`` reads for a document: system keys and ``metadata``."""
    record: dict[str, Any] = {
        key: getattr(doc, key, None) for key in (*SYSTEM_DATE_KEYS, *SYSTEM_STRING_KEYS)
    }
    record["metadata"] = doc.metadata
    return record


class KhoraVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store backed by one Khora namespace.

    Use it where any LlamaIndex vector store goes::

        store = KhoraVectorStore()  # the embedded store, namespace "llama_index"
        index = VectorStoreIndex.from_documents(
            docs, storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=KhoraEmbedding.from_khora(kb),
        )
        index.as_retriever(filters=MetadataFilters(...)).retrieve("...")
        index.delete_ref_doc(doc_id)

    Each node is one Khora document keyed by the node id (``remember(..., dedup=False,
    external_id=node.node_id)``): adding a node id again replaces it, and identical texts
    under two ids are two documents. The document's metadata is the node's metadata plus
    LlamaIndex's usual bookkeeping (``_node_content``, ``_node_type``, ``ref_doc_id``,
    ``doc_id``, ``document_id``), so a query returns the node as it was added (its
    metadata, relationships and ``ref_doc_id``) and ``delete(ref_doc_id)`` finds all its
    nodes. The same namespace is read by Khora's ``recall`` and ``KhoraRetriever``.

    Embeddings: Khora embeds every text itself with its own embedder, so
    ``stores_text`` is True and the embeddings LlamaIndex computes for nodes are not
    stored. A query is searched with Khora's embedding of ``query_str`` when the query has
    text (an embedding from another ``embed_model`` would point into another vector space);
    a ``query_embedding`` without text is searched as given, and must come from Khora's
    embedder (its length is checked). Pass ``KhoraEmbedding.from_khora(kb)`` as the index's
    ``embed_model`` to embed once, with one model. Similarities are raw cosines (higher is
    closer); a node split into several Khora chunks ranks by its best chunk.

    Filters are LlamaIndex ``MetadataFilters`` with the semantics of LlamaIndex's own
    ``SimpleVectorStore`` (``docs/integrations.md`` has the table): every key is the node's
    own top-level metadata key, taken literally. ``text_match``,
    ``text_match_insensitive``, ``contains``, ``any`` and ``all`` raise
    ``RecallFilterUnsupportedError``; they are never dropped.

    Only ``VectorStoreQueryMode.DEFAULT`` is served; other modes raise
    ``InvalidInputError`` (use ``KhoraRetriever`` for Khora's fused hybrid recall).
    ``delete``, ``delete_nodes`` and ``get_nodes`` with filters read the namespace's
    documents page by page.

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted the store builds (and owns) one from
            ``config`` (or the environment): the embedded store by default.
        namespace: the namespace id; when omitted, ``"llama_index"`` (shared with
            ``KhoraRetriever`` and ``KhoraPropertyGraphStore``). Created on first write
            when missing; a namespace's name given instead of its id raises
            ``NamespaceNotFoundError`` showing the id.
        config: the ``KhoraConfig`` for a Khora the store owns.
        preset: the read-path preset of a Khora the store owns (``"memory"``, ...).

    Raises:
        ConfigError: ``kb`` combined with ``config``/``preset``.
    """

    stores_text: bool = True
    flat_metadata: bool = False
    namespace: str = DEFAULT_NAMESPACE

    _ref: KhoraRef = PrivateAttr()
    _namespace_exists: bool = PrivateAttr(default=False)

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        namespace: str | None = None,
        config: KhoraConfig | None = None,
        preset: str | None = None,
    ) -> None:
        # ``namespace`` is this subclass's pydantic field; mypy checks against the base's fields only.
        super().__init__(namespace=DEFAULT_NAMESPACE if namespace is None else namespace)  # type: ignore[call-arg]
        self._ref = KhoraRef(kb, config=config, preset=preset)

    @classmethod
    def class_name(cls) -> str:
        return "KhoraVectorStore"

    @property
    def client(self) -> Khora:
        """The async ``Khora`` behind the store."""
        return self._ref.aio

    def close(self) -> None:
        """Close the Khora this store built; a Khora you passed in stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._ref.aclose()

    # -- plumbing ------------------------------------------------------------------------
    async def _ensure_namespace(self, kb: Khora, *, create: bool) -> bool:
        if self._namespace_exists:
            return True
        try:
            await kb.get_namespace(self.namespace)
        except NamespaceNotFoundError as exc:
            hinted = await namespace_hint(kb, self.namespace, exc)
            if hinted is not exc:  # a namespace's name, not its id: say which id to pass
                raise hinted from exc
            if not create:
                return False
            await kb.create_namespace(self.namespace, namespace=self.namespace)
        self._namespace_exists = True
        return True

    @staticmethod
    def _to_node(doc: Document) -> BaseNode:
        if "_node_content" in doc.metadata:
            return metadata_dict_to_node(doc.metadata, text=doc.content)
        # A document written into the namespace by other means (``Khora.remember``).
        return TextNode(id_=doc.external_id or doc.id, text=doc.content, metadata=dict(doc.metadata))

    async def _scan(self, kb: Khora, filter: RecallFilter | None) -> list[Document]:
        """Every document of the namespace the filter selects (all when ``None``)."""
        store = kb.engine.stack.documents
        out: list[Document] = []
        offset = 0
        while True:
            page = await store.list_documents(self.namespace, offset=offset, limit=_PAGE)
            out.extend(d for d in page if filter is None or filter.matches(_record(d)))
            if len(page) < _PAGE:
                return out
            offset += len(page)

    async def _select(
        self, kb: Khora, node_ids: Sequence[str] | None, filters: MetadataFilters | None
    ) -> list[Document]:
        parsed = to_recall_filter(filters, node_metadata=True)
        if not await self._ensure_namespace(kb, create=False):
            return []
        if node_ids is None:
            return await self._scan(kb, parsed)
        docs = await documents_by_ids(kb, self.namespace, [str(i) for i in node_ids])
        return [d for d in docs if parsed is None or parsed.matches(_record(d))]

    # -- write ---------------------------------------------------------------------------
    async def _add(self, kb: Khora, nodes: Sequence[BaseNode]) -> list[str]:
        texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes]
        metadatas = [
            node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata) for node in nodes
        ]
        await self._ensure_namespace(kb, create=True)
        return await store_texts(kb, self.namespace, texts, metadatas, [node.node_id for node in nodes])

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Remember each node as one document keyed by its node id; returns the node ids.

        Every node is checked before anything is written: bad input (an empty text,
        metadata that is not JSON) raises ``InvalidInputError`` and stores nothing; a store
        failing part-way raises ``PartialWriteError`` listing the ids stored and not.
        """
        items = list(nodes)
        return self._ref.call(lambda kb: self._add(kb, items))

    async def async_add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """See ``add``."""
        items = list(nodes)
        return await self._ref.acall(lambda kb: self._add(kb, items))

    async def _delete_ref(self, kb: Khora, ref_doc_id: str) -> None:
        if not await self._ensure_namespace(kb, create=False):
            return
        docs = [d for d in await self._scan(kb, None) if d.metadata.get("ref_doc_id") == ref_doc_id]
        await forget_ids(kb, self.namespace, [d.external_id or d.id for d in docs])

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Forget every node whose ``ref_doc_id`` (source document) is ``ref_doc_id``."""
        self._ref.call(lambda kb: self._delete_ref(kb, ref_doc_id))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """See ``delete``."""
        await self._ref.acall(lambda kb: self._delete_ref(kb, ref_doc_id))

    async def _delete_nodes(
        self, kb: Khora, node_ids: Sequence[str] | None, filters: MetadataFilters | None
    ) -> None:
        if node_ids is None and filters is None:
            raise InvalidInputError(
                "delete_nodes needs node_ids or filters; use clear() to delete everything"
            )
        docs = await self._select(kb, node_ids, filters)
        await forget_ids(kb, self.namespace, [d.external_id or d.id for d in docs])

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Forget the nodes with these ids that the filters select (either may be omitted,
        not both); unknown ids are ignored."""
        self._ref.call(lambda kb: self._delete_nodes(kb, node_ids, filters))

    async def adelete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """See ``delete_nodes``."""
        await self._ref.acall(lambda kb: self._delete_nodes(kb, node_ids, filters))

    async def _clear(self, kb: Khora) -> None:
        if await self._ensure_namespace(kb, create=False):
            await kb.delete_namespace(self.namespace)
        self._namespace_exists = False

    def clear(self) -> None:
        """Delete the namespace and everything in it (recreated by the next ``add``)."""
        self._ref.call(self._clear)

    async def aclear(self) -> None:
        """See ``clear``."""
        await self._ref.acall(self._clear)

    # -- read ----------------------------------------------------------------------------
    async def _get_nodes(
        self, kb: Khora, node_ids: Sequence[str] | None, filters: MetadataFilters | None
    ) -> list[BaseNode]:
        return [self._to_node(d) for d in await self._select(kb, node_ids, filters)]

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """The nodes with these ids (in the order given, unknown ids skipped) that the
        filters select; every node of the namespace the filters select when ``node_ids`` is
        ``None``."""
        return self._ref.call(lambda kb: self._get_nodes(kb, node_ids, filters))

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """See ``get_nodes``."""
        return await self._ref.acall(lambda kb: self._get_nodes(kb, node_ids, filters))

    @staticmethod
    def _query_filter(query: VectorStoreQuery) -> RecallFilter | None:
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise InvalidInputError(
                f"KhoraVectorStore serves VectorStoreQueryMode.DEFAULT only, got {query.mode!r}; "
                "use KhoraRetriever for Khora's hybrid (vector + graph + BM25) recall"
            )
        if query.similarity_top_k < 1:
            raise InvalidInputError(f"similarity_top_k must be >= 1, got {query.similarity_top_k}")
        parts: list[dict[str, Any]] = []
        parsed = to_recall_filter(query.filters, node_metadata=True)
        if parsed is not None:
            parts.append(parsed.to_dict())
        # An empty list is no restriction, as in LlamaIndex's other stores: VectorStoreIndex
        # passes its (empty, for a store that keeps the text) node list on every query.
        if query.node_ids:
            parts.append({"external_id": {"$in": [str(i) for i in query.node_ids]}})
        if query.doc_ids:
            parts.append({"metadata.ref_doc_id": {"$in": [str(i) for i in query.doc_ids]}})
        if not parts:
            return None
        return RecallFilter.parse(parts[0] if len(parts) == 1 else {"$and": parts})

    async def _query(self, kb: Khora, query: VectorStoreQuery) -> VectorStoreQueryResult:
        parsed = self._query_filter(query)
        embedder = kb.engine.embedder
        if query.query_str and query.query_str.strip():
            vector: Sequence[float] = await embedder.embed_query(query.query_str)
        elif query.query_embedding is not None:
            vector = list(query.query_embedding)
            expected = embedder.dimension
            if len(vector) != expected:
                raise InvalidInputError(
                    f"query_embedding has {len(vector)} dimensions but Khora's embedder makes "
                    f"{expected}: embed the query with Khora's embedder (KhoraEmbedding.from_khora) "
                    "or pass query_str"
                )
            if not np.isfinite(np.asarray(vector, dtype=float)).all():
                raise InvalidInputError("query_embedding holds a NaN or an infinite value")
        else:
            raise InvalidInputError("KhoraVectorStore.query needs a query_str or a query_embedding")
        if not await self._ensure_namespace(kb, create=False):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        hits = await best_documents(kb, self.namespace, vector, query.similarity_top_k, parsed)
        nodes = [self._to_node(doc) for doc, _ in hits]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[float(hit.score) for _, hit in hits],
            ids=[node.node_id for node in nodes],
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes nearest to the query that its filters, ``node_ids``
        and ``doc_ids`` (ref doc ids) select, best first, with raw cosine similarities. An
        empty ``node_ids`` or ``doc_ids`` list restricts nothing (LlamaIndex's convention).

        Raises:
            InvalidInputError: a mode other than DEFAULT, neither text nor embedding, or an
                embedding of another length than Khora's embedder's.
            RecallFilterUnsupportedError: an operator Khora cannot evaluate.
            RecallFilterValidationError: a malformed filter.
        """
        return self._ref.call(lambda kb: self._query(kb, query))

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """See ``query``."""
        return await self._ref.acall(lambda kb: self._query(kb, query))
