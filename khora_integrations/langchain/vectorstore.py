"""``KhoraVectorStore``: a LangChain ``VectorStore`` over one Khora namespace."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import InvalidInputError, NamespaceNotFoundError
from khora_core.models import ChunkHit
from khora_core.models import Document as KhoraDocument
from khora_integrations._bridge import (
    KhoraRef,
    best_documents,
    documents_by_ids,
    forget_ids,
    namespace_hint,
    store_texts,
)
from khora_integrations.langchain.embeddings import KhoraEmbeddings
from khora_integrations.langchain.filters import pgvector_to_recall_filter

__all__ = ["KhoraVectorStore"]


def _relevance(cosine: float) -> float:
    # Anti-correlated vectors read as 0 relevance; the order was already fixed by raw cosine.
    return min(1.0, max(0.0, float(cosine)))


class KhoraVectorStore(VectorStore):
    """A LangChain vector store backed by one Khora namespace.

    Each LangChain document is one Khora document: ``add_texts``/``add_documents`` call
    ``remember`` with ``external_id`` set to the document's id (the id you give, or a new
    UUID), so adding an id again replaces that document. Searches run Khora's vector index
    directly (not the fused ``recall``, see ``KhoraRetriever`` for that) and return one
    ``Document`` per stored document, with its full text, your metadata and its id. When a
    document has several chunks, its best chunk decides its rank and score.

    Scores from ``similarity_search_with_score`` (and the ``*_with_score_by_vector``
    methods) are cosine **similarities** clamped to ``[0, 1]``: higher is more similar, and
    they are also the relevance scores. This differs from langchain-postgres ``PGVector``,
    whose scores are cosine **distances** (lower is more similar); for a document with a
    non-negative cosine, PGVector's distance is ``1 - score``.

    Filters take the PGVector dialect (``{"tier": {"$in": ["gold"]}}``) and select what
    langchain-postgres ``PGVector`` selects: keys are your own metadata keys, taken
    literally (see ``khora_integrations.langchain.filters`` and ``docs/integrations.md``).
    Pass a ``RecallFilter`` for Khora's own grammar (system fields, nested paths).

    Sync and async methods both work with a ``Khora`` or a ``KhoraSync``, from any thread
    or loop (see ``khora_integrations._bridge.KhoraRef``: an async Khora whose loop has
    finished or is blocked by a sync call gets a second set of connections, closed by
    ``close``).

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted the store builds (and owns) one from
            ``url``/``config``/``data_dir`` with ``embedding`` as its embedder.
        namespace: the namespace id; created on first write when missing. A namespace's
            name is not its id: when ``namespace`` is only the name of a namespace, reads
            and writes raise ``NamespaceNotFoundError`` showing the id to pass.
        embedding: any LangChain ``Embeddings`` for a store that builds its own Khora; the
            configured sentence-transformers model when omitted.
        url: see ``Khora``.
        config: see ``Khora``.
        preset: the read-path preset of a Khora the store owns (``"memory"``, ...).
        data_dir: see ``Khora``.

    Raises:
        ConfigError: ``kb`` combined with ``embedding``/``url``/``config``/``data_dir``
            (build the Khora with ``Khora(embedder=...)`` instead).
    """

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        namespace: str = "langchain",
        embedding: Embeddings | None = None,
        url: str | None = None,
        config: KhoraConfig | None = None,
        data_dir: str | None = None,
        preset: str | None = None,
    ) -> None:
        self._ref = KhoraRef(kb, config=config, url=url, data_dir=data_dir, embedder=embedding, preset=preset)
        self.namespace = namespace
        self._embedding = embedding
        self._namespace_exists = False

    # -- plumbing ------------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings:
        """The LangChain ``Embeddings`` given, or a LangChain view of Khora's own embedder."""
        if self._embedding is not None:
            return self._embedding
        return KhoraEmbeddings(self._ref)

    def _select_relevance_score_fn(self) -> Any:
        return _relevance  # scores are already cosine similarities in [0, 1]

    def close(self) -> None:
        """Close the Khora this store built; a Khora you passed in stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._ref.aclose()

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

    def _to_langchain(self, doc: KhoraDocument) -> Document:
        return Document(id=doc.external_id or doc.id, page_content=doc.content, metadata=dict(doc.metadata))

    # -- write ---------------------------------------------------------------------------
    async def _add(
        self,
        kb: Khora,
        texts: list[str],
        metadatas: list[dict[str, Any]] | None,
        ids: Sequence[str | None] | None,
    ) -> list[str]:
        await self._ensure_namespace(kb, create=True)
        return await store_texts(kb, self.namespace, texts, metadatas, ids)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Remember each text as one document; returns the ids (external ids).

        Args:
            texts: the texts.
            metadatas: one metadata dict per text (JSON values; datetimes become ISO
                strings). String ``source``, ``source_type``, ``source_name``,
                ``source_url`` and ``title`` are also set as Khora's system fields.
            ids: one id per text (``None`` entries get a UUID); an existing id is replaced.

        One entry per id, as in PGVector: identical texts under different ids are separate
        documents (``Khora.remember``'s content dedup does not apply here), and an id given
        twice keeps its last text and metadata. Every item is checked before anything is
        written: bad input raises ``InvalidInputError`` and stores nothing; a store failing
        part-way raises ``PartialWriteError``, which lists the ids stored and the ones not.
        """
        items = list(texts)
        return self._ref.call(lambda kb: self._add(kb, items, metadatas, ids))

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """See ``add_texts``."""
        items = list(texts)
        return await self._ref.acall(lambda kb: self._add(kb, items, metadatas, ids))

    async def _delete(self, kb: Khora, ids: list[str] | None) -> bool:
        if not await self._ensure_namespace(kb, create=False):
            return True
        if ids is None:
            await kb.delete_namespace(self.namespace)
            self._namespace_exists = False
            return True
        await forget_ids(kb, self.namespace, [str(i) for i in ids])
        return True

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Forget the documents with these ids (missing ids are fine).

        ``ids=None`` deletes the whole namespace. Returns True.
        """
        return self._ref.call(lambda kb: self._delete(kb, ids))

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """See ``delete``."""
        return await self._ref.acall(lambda kb: self._delete(kb, ids))

    # -- read ----------------------------------------------------------------------------
    async def _get(self, kb: Khora, ids: Sequence[str]) -> list[Document]:
        if not await self._ensure_namespace(kb, create=False):
            return []
        docs = await documents_by_ids(kb, self.namespace, [str(i) for i in ids])
        return [self._to_langchain(d) for d in docs]

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in the order given; missing ids are skipped."""
        return self._ref.call(lambda kb: self._get(kb, ids))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """See ``get_by_ids``."""
        return await self._ref.acall(lambda kb: self._get(kb, ids))

    async def _vector_hits(
        self, kb: Khora, vector: Sequence[float], k: int, filter: Any
    ) -> list[tuple[KhoraDocument, ChunkHit]]:
        """The ``k`` best documents for ``vector``, each with its best chunk hit."""
        from khora_core.filters import RecallFilter

        if k < 1:
            raise InvalidInputError(f"k must be >= 1, got {k}")
        translated = pgvector_to_recall_filter(filter)
        parsed = RecallFilter.parse(translated) if translated is not None else None
        if not await self._ensure_namespace(kb, create=False):
            return []
        return await best_documents(kb, self.namespace, vector, k, parsed)

    async def _search(
        self, kb: Khora, query: str | None, vector: Sequence[float] | None, k: int, filter: Any
    ) -> list[tuple[Document, float]]:
        if vector is None:
            vector = await kb.engine.embedder.embed_query(str(query))
        hits = await self._vector_hits(kb, vector, k, filter)
        return [(self._to_langchain(doc), _relevance(hit.score)) for doc, hit in hits]

    def similarity_search(self, query: str, k: int = 4, filter: Any = None, **kwargs: Any) -> list[Document]:
        """The ``k`` documents most similar to ``query`` (no score threshold)."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter)]

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[Document]:
        """See ``similarity_search``."""
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Like ``similarity_search``, with each document's cosine similarity in [0, 1]."""
        return self._ref.call(lambda kb: self._search(kb, query, None, k, filter))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """See ``similarity_search_with_score``."""
        return await self._ref.acall(lambda kb: self._search(kb, query, None, k, filter))

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents most similar to a query vector of the store's dimension."""
        pairs = self._ref.call(lambda kb: self._search(kb, None, embedding, k, filter))
        return [doc for doc, _ in pairs]

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[Document]:
        """See ``similarity_search_by_vector``."""
        pairs = await self._ref.acall(lambda kb: self._search(kb, None, embedding, k, filter))
        return [doc for doc, _ in pairs]

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents most similar to a query vector, each with its cosine
        similarity in [0, 1] (not a distance, see the class docstring). The vector searches
        Khora's vector index as given; it must come from the store's embedder."""
        return self._ref.call(lambda kb: self._search(kb, None, embedding, k, filter))

    async def asimilarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """See ``similarity_search_with_score_by_vector``."""
        return await self._ref.acall(lambda kb: self._search(kb, None, embedding, k, filter))

    async def _mmr(
        self,
        kb: Khora,
        query: str | None,
        vector: Sequence[float] | None,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: Any,
    ) -> list[tuple[Document, float]]:
        if vector is None:
            vector = await kb.engine.embedder.embed_query(str(query))
        hits = await self._vector_hits(kb, vector, max(k, fetch_k), filter)
        if not hits:
            return []
        missing = [i for i, (_, hit) in enumerate(hits) if not hit.chunk.embedding]
        # Some stacks return chunks without their vectors: embed those chunks' text again.
        fresh = (
            await kb.engine.embedder.embed_documents([hits[i][1].chunk.content for i in missing])
            if missing
            else []
        )
        vectors = [list(hit.chunk.embedding or []) for _, hit in hits]
        for i, vec in zip(missing, fresh, strict=True):
            vectors[i] = list(vec)
        chosen = maximal_marginal_relevance(
            np.asarray(vector, dtype=float), vectors, lambda_mult=lambda_mult, k=k
        )
        return [(self._to_langchain(hits[i][0]), _relevance(hits[i][1].score)) for i in chosen]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents picked from the ``fetch_k`` most similar for relevance and diversity.

        Each document is represented by its best chunk's vector; ``lambda_mult`` of 1 is
        pure relevance, 0 maximum diversity.
        """
        pairs = self._ref.call(lambda kb: self._mmr(kb, query, None, k, fetch_k, lambda_mult, filter))
        return [doc for doc, _ in pairs]

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        """See ``max_marginal_relevance_search``."""
        pairs = await self._ref.acall(lambda kb: self._mmr(kb, query, None, k, fetch_k, lambda_mult, filter))
        return [doc for doc, _ in pairs]

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        """See ``max_marginal_relevance_search``; starts from a query vector."""
        pairs = self._ref.call(lambda kb: self._mmr(kb, None, embedding, k, fetch_k, lambda_mult, filter))
        return [doc for doc, _ in pairs]

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        """See ``max_marginal_relevance_search``; starts from a query vector."""
        pairs = await self._ref.acall(
            lambda kb: self._mmr(kb, None, embedding, k, fetch_k, lambda_mult, filter)
        )
        return [doc for doc, _ in pairs]

    def max_marginal_relevance_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """``max_marginal_relevance_search_by_vector`` with each picked document's cosine
        similarity to the query vector in [0, 1] (not a distance), in the order MMR picked them."""
        return self._ref.call(lambda kb: self._mmr(kb, None, embedding, k, fetch_k, lambda_mult, filter))

    async def amax_marginal_relevance_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """See ``max_marginal_relevance_search_with_score_by_vector``."""
        return await self._ref.acall(
            lambda kb: self._mmr(kb, None, embedding, k, fetch_k, lambda_mult, filter)
        )

    # -- constructors --------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        kb: Khora | KhoraSync | None = None,
        namespace: str = "langchain",
        **kwargs: Any,
    ) -> KhoraVectorStore:
        """Build a store (see the class arguments; ``url``/``config``/``data_dir`` go in
        ``kwargs``) and add ``texts`` to it."""
        store = cls(kb, namespace=namespace, embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        kb: Khora | KhoraSync | None = None,
        namespace: str = "langchain",
        **kwargs: Any,
    ) -> KhoraVectorStore:
        """See ``from_texts``."""
        store = cls(kb, namespace=namespace, embedding=embedding, **kwargs)
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store
