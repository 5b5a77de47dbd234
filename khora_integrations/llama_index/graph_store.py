"""``KhoraPropertyGraphStore``: Khora's graph as a LlamaIndex ``PropertyGraphStore``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from llama_index.core.graph_stores.types import ChunkNode, LabelledNode, PropertyGraphStore, Relation, Triplet
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import ConfigError
from khora_integrations._bridge import KhoraRef
from khora_integrations.llama_index import _graph_query as query_ops
from khora_integrations.llama_index import _graph_read as read_ops
from khora_integrations.llama_index import _graph_write as write_ops
from khora_integrations.llama_index._graph_convert import llama_node
from khora_integrations.llama_index._graph_query import ReadOnlyQueryError
from khora_integrations.llama_index._graph_write import UnsupportedGraphOperationError
from khora_integrations.llama_index.retriever import DEFAULT_NAMESPACE

__all__ = ["KhoraPropertyGraphStore", "ReadOnlyQueryError", "UnsupportedGraphOperationError"]

T = TypeVar("T")


class KhoraPropertyGraphStore(PropertyGraphStore):
    """One Khora namespace as a LlamaIndex property graph, shared with ``Khora.recall``.

    What LlamaIndex writes here Khora recalls, and what ``Khora.remember`` learned LlamaIndex
    retrievers find, in the same namespace:

    * ``EntityNode`` <-> Khora entity. The node id is the name; the Khora id is
      ``khora_core.ingest.resolve.entity_id(namespace, name)``, so one name is one node
      whoever wrote it. ``label`` is the entity type (LlamaIndex's default ``"entity"`` is
      Khora's ``"CONCEPT"``); the ``description`` and ``aliases`` properties are Khora's
      fields, every other property is kept in the entity's ``properties`` (JSON values;
      datetimes become ISO-8601 strings; anything else non-JSON raises
      ``InvalidInputError``). Writing a node again updates its properties key by key. The
      entity vector is Khora's embedding of the name (what ``remember`` stores), or the
      node's own embedding with ``use_node_embeddings=True``.
    * ``ChunkNode`` <-> Khora document, remembered with ``external_id`` = node id and the
      node's properties as metadata (so chunked, embedded by Khora and recalled like any
      document; entity-extracted by Khora only with ``khora_extraction=True``). A document's node id is its ``external_id``, else its
      Khora id; a Khora chunk id given to ``get`` returns that chunk alone.
    * ``Relation`` between entities <-> Khora relationship, learned from the document of its
      ``triplet_source_id``; ``weight`` and ``description`` are Khora's fields, the other
      properties are kept as the relationship's ``properties`` (updated key by key when the
      relation is written again; ``weight``, ``description`` and ``triplet_source_id`` left
      out then keep their stored values). Relations with a text chunk at an end are not stored
      (Khora links chunks to entities only through mentions).

    Read-only properties the store adds on read, laid over the stored ones (and never
    stored from a node written back): ``khora_id``, ``khora_document_id``,
    ``khora_chunk_id``, ``mention_count``, and ``triplet_source_id`` on entities (the first
    document mentioning them; the stored value when Khora knows none) and on triplets (the
    edge's document). ``get``, ``get_triplets``, ``delete`` and ``vector_query`` filter on
    all of these properties, stored and read-only alike.

    Every call is scoped to ``namespace``. The async methods are the implementation; the
    sync ones run them through ``khora_core.sync.run_sync`` (see ``KhoraRef`` for which
    loop a Khora lives on: a ``KhoraSync`` serves both).

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted one is built from ``config`` (or the
            environment) and opened on first use.
        namespace: the namespace id; when omitted, ``"llama_index"`` (the LlamaIndex
            ``KhoraRetriever`` default), created on first use.
        config: the ``KhoraConfig`` for a Khora the store owns.
        preset: the read-path preset of a Khora the store owns (``"memory"``, ...).
        create_namespace: create the namespace on the first write when missing.
        use_node_embeddings: store an ``EntityNode``'s own embedding (it must come from
            Khora's embedder, e.g. ``KhoraEmbedding``) instead of embedding its name.
        max_triplets: the most relationships ``get_triplets`` reads.
        khora_extraction: run Khora's entity extractor on the chunk nodes written here too.
            Off by default: ``PropertyGraphIndex`` runs its own ``kg_extractors`` and writes
            what they found, so Khora extracting the same text would store each relation
            twice. Turn it on when the index extracts nothing itself (``kg_extractors`` of
            ``ImplicitPathExtractor`` only) and the graph should still be built.
        allow_cypher_writes: let ``structured_query`` run Cypher that writes (Neo4j). Off by
            default: the Cypher runs in a read transaction and a write is refused with
            ``ReadOnlyQueryError``. Cypher is never namespace-scoped by the store (see
            ``structured_query``), so a write can change any namespace of the database.
    """

    supports_vector_queries: bool = True

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        namespace: str | None = None,
        config: KhoraConfig | None = None,
        preset: str | None = None,
        create_namespace: bool = True,
        use_node_embeddings: bool = False,
        max_triplets: int = 1000,
        allow_cypher_writes: bool = False,
        khora_extraction: bool = False,
    ) -> None:
        self._ref = KhoraRef(kb, config=config, preset=preset)
        self.namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        self.create_namespace = create_namespace
        self._ensure_default = namespace is None
        self.use_node_embeddings = use_node_embeddings
        self.max_triplets = max_triplets
        self.allow_cypher_writes = allow_cypher_writes
        self.khora_extraction = khora_extraction
        self._aliases: dict[str, str] = {}
        self._schema: dict[str, Any] | None = None

    # -- plumbing ---------------------------------------------------------------------------
    def _run(self, work: Callable[[read_ops.GraphContext], Awaitable[T]]) -> T:
        return self._ref.call(lambda kb: self._work(kb, work))

    async def _arun(self, work: Callable[[read_ops.GraphContext], Awaitable[T]]) -> T:
        return await self._ref.acall(lambda kb: self._work(kb, work))

    async def _work(self, kb: Khora, work: Callable[[read_ops.GraphContext], Awaitable[T]]) -> T:
        if self._ensure_default:  # the default namespace: created on first use
            await kb.create_namespace(self.namespace, namespace=self.namespace)
            self._ensure_default = False
        return await work(read_ops.GraphContext(kb, self.namespace, self._aliases))

    @property
    def client(self) -> Khora:
        """The async ``Khora`` behind the store."""
        return self._ref.aio

    @property
    def supports_structured_queries(self) -> bool:  # type: ignore[override]
        """True on the PostgreSQL + Neo4j stack (Cypher runs there); False on the embedded one."""
        kb = self._ref.aio
        try:
            return query_ops.neo4j_handle(kb.engine.stack.graph) is not None
        except ConfigError:  # not open yet
            pass
        if self._ref.on_bridge:  # opening is safe from here: the Khora lives on the bridge
            return self._run(lambda ctx: _has_neo4j(ctx))
        # An unopened async Khora stays closed (it must open on its own loop): read its config.
        url = (
            getattr(kb, "_url", None)
            or (getattr(kb, "_config_arg", None) or KhoraConfig()).storage.database_url
        )
        return bool(url)

    def close(self) -> None:
        """Close the Khora this store opened; a Khora you passed in stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        await self._ref.aclose()

    # -- reads ------------------------------------------------------------------------------
    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """See ``aget``."""
        return self._run(lambda ctx: read_ops.get_nodes(ctx, properties, ids))

    async def aget(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """Nodes by id (entity names or Khora ids, chunk node ids, Khora chunk ids), by
        ``properties`` (every pair must be equal), both, or all nodes when neither is given
        (``ids=[]`` names no node: ``[]``)."""
        return await self._arun(lambda ctx: read_ops.get_nodes(ctx, properties, ids))

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """See ``aget_triplets``."""
        return self._run(
            lambda ctx: read_ops.get_triplets(
                ctx, entity_names, relation_names, properties, ids, self.max_triplets
            )
        )

    async def aget_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Entity triplets touching ``entity_names`` / ``ids``, of types ``relation_names``,
        whose relation or ends have ``properties``; every given criterion must hold, and
        nothing given returns ``[]`` (as LlamaIndex's in-memory store does)."""
        return await self._arun(
            lambda ctx: read_ops.get_triplets(
                ctx, entity_names, relation_names, properties, ids, self.max_triplets
            )
        )

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """See ``aget_rel_map``."""
        return self._run(lambda ctx: read_ops.rel_map(ctx, graph_nodes, depth, limit, ignore_rels))

    async def aget_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets within ``depth`` hops (either direction, at most 4) of the entity nodes,
        nearest first, then heaviest, without relations labelled ``ignore_rels``."""
        return await self._arun(lambda ctx: read_ops.rel_map(ctx, graph_nodes, depth, limit, ignore_rels))

    def get_llama_nodes(self, node_ids: list[str]) -> list[BaseNode]:
        """See ``aget_llama_nodes``."""
        return self._run(lambda ctx: _llama_nodes(ctx, node_ids))

    async def aget_llama_nodes(self, node_ids: list[str]) -> list[BaseNode]:
        """The LlamaIndex nodes behind text-chunk node ids: exactly as written for nodes
        LlamaIndex stored, a ``TextNode`` of the document (or chunk) otherwise."""
        return await self._arun(lambda ctx: _llama_nodes(ctx, node_ids))

    # -- writes -----------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """See ``aupsert_nodes``."""
        self._run(lambda ctx: self._upsert_nodes(ctx, nodes))

    async def aupsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Write entity nodes to the graph and remember chunk nodes as documents.

        Raises:
            InvalidInputError: a node that is neither an ``EntityNode`` nor a ``ChunkNode``,
                or (with ``use_node_embeddings``) an embedding of the wrong dimension.
        """
        await self._arun(lambda ctx: self._upsert_nodes(ctx, nodes))

    async def _upsert_nodes(self, ctx: read_ops.GraphContext, nodes: Sequence[LabelledNode]) -> None:
        await write_ops.upsert_nodes(
            ctx,
            nodes,
            create_namespace=self.create_namespace,
            use_node_embeddings=self.use_node_embeddings,
            khora_extraction=self.khora_extraction,
        )

    def upsert_relations(self, relations: list[Relation]) -> None:
        """See ``aupsert_relations``."""
        self._run(
            lambda ctx: write_ops.upsert_relations(ctx, relations, create_namespace=self.create_namespace)
        )

    async def aupsert_relations(self, relations: list[Relation]) -> None:
        """Write relations between entities as Khora relationships (a missing entity end is
        created from its name); relations with a text-chunk end are logged and skipped."""
        await self._arun(
            lambda ctx: write_ops.upsert_relations(ctx, relations, create_namespace=self.create_namespace)
        )

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """See ``adelete``."""
        self._run(lambda ctx: write_ops.delete(ctx, entity_names, relation_names, properties, ids))

    async def adelete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """Delete relations by label, entities (with their edges) and the documents behind
        chunk nodes; each given criterion deletes what it names (as LlamaIndex's Neo4j store
        does): ``relation_names`` every relation of those labels in the namespace, leaving
        their entities; ``entity_names`` those entities; ``ids`` those entities or chunk
        nodes' documents; ``properties`` the nodes whose properties match.

        Raises:
            InvalidInputError: a Khora chunk id (Khora deletes whole documents).
        """
        await self._arun(lambda ctx: write_ops.delete(ctx, entity_names, relation_names, properties, ids))

    def delete_llama_nodes(
        self, node_ids: list[str] | None = None, ref_doc_ids: list[str] | None = None
    ) -> None:
        """See ``adelete_llama_nodes``."""
        self._run(lambda ctx: write_ops.delete_llama_nodes(ctx, node_ids or [], ref_doc_ids or []))

    async def adelete_llama_nodes(
        self, node_ids: list[str] | None = None, ref_doc_ids: list[str] | None = None
    ) -> None:
        """Forget the documents of these nodes and of every node of these source documents;
        Khora removes the entities and edges only they supported."""
        await self._arun(lambda ctx: write_ops.delete_llama_nodes(ctx, node_ids or [], ref_doc_ids or []))

    # -- queries ----------------------------------------------------------------------------
    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """See ``astructured_query``."""
        return self._run(
            lambda ctx: query_ops.structured_query(
                ctx, query, param_map, allow_writes=self.allow_cypher_writes
            )
        )

    async def astructured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """Run your Cypher on the Neo4j stack, as written, in a read transaction, with
        ``$namespace_id`` bound to this store's namespace.

        The Cypher is **not namespace-scoped**: the store cannot rewrite it, so a ``MATCH``
        without ``{namespace_id: $namespace_id}`` reads every namespace of the database.
        Scope every ``MATCH`` with it (``get_schema_str`` shows the model), and do not run
        LLM-written Cypher here for users who may not see each other's namespaces. Writes are
        refused unless the store was built with ``allow_cypher_writes=True``.

        Returns:
            The records as a list of dicts.

        Raises:
            UnsupportedGraphOperationError: the embedded store (no Cypher engine).
            ReadOnlyQueryError: the statement writes and ``allow_cypher_writes`` is False;
                nothing was changed.
            InvalidInputError: Neo4j rejected the statement, or ``param_map`` names another
                namespace.
        """
        return await self._arun(
            lambda ctx: query_ops.structured_query(
                ctx, query, param_map, allow_writes=self.allow_cypher_writes
            )
        )

    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        """See ``avector_query``."""
        return self._run(lambda ctx: query_ops.vector_query(ctx, query))  # type: ignore[return-value]

    async def avector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        """Entity nodes nearest to ``query.query_embedding`` (or ``query_str``, embedded by
        Khora) with their cosine scores, best first. ``filters`` (``MetadataFilters``) apply
        to the nodes' properties plus ``name`` and ``label``; ``node_ids`` keep only those."""
        return await self._arun(lambda ctx: query_ops.vector_query(ctx, query))  # type: ignore[arg-type, return-value]

    def get_schema(self, refresh: bool = False) -> Any:
        """See ``aget_schema``."""
        if self._schema is None or refresh:
            self._schema = self._run(query_ops.schema)
        return self._schema

    async def aget_schema(self, refresh: bool = False) -> Any:
        """Entity labels, relation labels and triplet patterns in the namespace, plus Khora's
        Cypher model on Neo4j (cached until ``refresh``)."""
        if self._schema is None or refresh:
            self._schema = await self._arun(query_ops.schema)
        return self._schema

    def get_schema_str(self, refresh: bool = False) -> str:
        """See ``aget_schema_str``."""
        return query_ops.schema_text(self.get_schema(refresh=refresh))

    async def aget_schema_str(self, refresh: bool = False) -> str:
        """The schema as text for an LLM prompt (text-to-Cypher on Neo4j)."""
        return query_ops.schema_text(await self.aget_schema(refresh=refresh))


async def _has_neo4j(ctx: read_ops.GraphContext) -> bool:
    return query_ops.neo4j_handle(ctx.graph) is not None


async def _llama_nodes(ctx: read_ops.GraphContext, node_ids: Sequence[str]) -> list[BaseNode]:
    nodes: list[ChunkNode] = await read_ops.chunk_nodes_by_id(ctx, [i for i in node_ids if i])
    return [llama_node(n) for n in nodes]
