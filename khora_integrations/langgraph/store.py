"""``KhoraStore``: Khora as LangGraph's long-term memory store (``BaseStore``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    ensure_embeddings,
)

from khora_core import Khora, KhoraSync
from khora_core.config import KhoraConfig
from khora_core.errors import ConfigError, InvalidInputError
from khora_core.filters import RecallFilter
from khora_core.ingest.dedup import content_hash
from khora_core.models import Document, DocumentProjection, SearchMode
from khora_integrations._bridge import ABSTAIN_POLICIES, KhoraRef, apply_abstention_policy, jsonable
from khora_integrations.langgraph._items import (
    ALL_FIELDS,
    check_key,
    check_namespace,
    check_page,
    content_for,
    decode_namespace,
    encode_namespace,
    filter_record,
    item_parts,
    matches_condition,
    merge_by_score,
    stored_json,
    to_recall_filter,
)

__all__ = ["DEFAULT_PREFIX", "KhoraSearchItem", "KhoraStore"]

#: The start of every Khora namespace id a ``KhoraStore`` uses (``"langgraph/<label>/..."``).
DEFAULT_PREFIX = "langgraph"
_PAGE = 500


class KhoraSearchItem(SearchItem):
    """A ``SearchItem`` with Khora's abstention verdict for the query that found it.

    Attributes:
        should_abstain: recall judged that memory does not cover the query (the item is
            kept under the ``"flag"`` policy; let the agent decide).
        abstention_signals: the signals behind the verdict (``{}`` without a query).
    """

    __slots__ = ("abstention_signals", "should_abstain")

    def __init__(
        self, *, should_abstain: bool = False, abstention_signals: dict[str, Any] | None = None, **item: Any
    ) -> None:
        super().__init__(**item)
        self.should_abstain = should_abstain
        self.abstention_signals = dict(abstention_signals or {})

    def dict(self) -> dict[str, Any]:
        out = super().dict()
        out["should_abstain"] = self.should_abstain
        out["abstention_signals"] = self.abstention_signals
        return out


class KhoraStore(BaseStore):
    """LangGraph's ``BaseStore`` over Khora: agent memory that recalls by meaning.

    Each LangGraph namespace tuple is its own Khora namespace (``"langgraph/users/42"``),
    created on the first ``put``, so one user's memories never reach another's search. An
    item is a Khora document: its key is the ``external_id``, its value is kept whole in
    the metadata, and the text of the fields named by ``index["fields"]`` (LangGraph's
    paths; ``"$"``, the whole value as JSON, by default; ``put(..., index=[...])`` or
    ``index=False`` per item) is what Khora chunks, embeds, links into its graph and
    recalls.

    ``search(prefix, query=...)`` runs ``Khora.recall`` (``mode``, hybrid by default) in
    every namespace under ``prefix``, with ``filter`` pushed down, and returns each item
    once, in Khora's fused order within a namespace; several namespaces' lists are merged
    by ``score``, the raw cosine similarity of the item's best chunk (LangGraph's own
    convention; ``None`` when only the keyword or graph channel found it). Items stored with no indexed text come last,
    without a score, as in LangGraph's ``InMemoryStore``. Without a query, items come newest
    update first. Each result is a ``KhoraSearchItem`` carrying ``should_abstain``; the
    ``abstain`` policy (``"flag"``, ``"empty"``, ``"raise"``) works as in the retrievers.

    Operations in a ``batch`` run in order. ``created_at`` survives updates; values are
    stored as JSON (datetimes become ISO-8601 strings). TTLs are not supported.

    Args:
        kb: a ``Khora`` or ``KhoraSync``; when omitted the store builds (and owns) one on
            the embedded default (or ``url``/``config``/``data_dir``), opened on first use.
        index: LangGraph's ``IndexConfig``: ``fields`` as above; ``embed`` (LangChain
            ``Embeddings`` or an embedding function) becomes the embedder of a Khora the
            store builds; ``dims`` is not needed (Khora's embedder knows its dimension).
        prefix: the Khora namespace id prefix (no ``/``); two stores with different
            prefixes never see each other's items.
        mode: the ``SearchMode`` of query searches.
        abstain: ``"flag"``, ``"empty"`` or ``"raise"``.
        config: see ``Khora``.
        url: see ``Khora``.
        data_dir: see ``Khora``.
        preset: the read-path preset of a Khora the store owns (``"memory"`` suits agent
            memory; see ``khora_core.retrieval.presets``).

    Raises:
        ConfigError: a bad ``index``, ``prefix``, or ``kb`` combined with arguments to
            build one.
        InvalidInputError: a bad ``mode`` or ``abstain``.
    """

    supports_ttl = False

    def __init__(
        self,
        kb: Khora | KhoraSync | None = None,
        *,
        index: Mapping[str, Any] | None = None,
        prefix: str = DEFAULT_PREFIX,
        mode: SearchMode | str = SearchMode.HYBRID,
        abstain: str = "flag",
        config: KhoraConfig | None = None,
        url: str | None = None,
        data_dir: str | None = None,
        preset: str | None = None,
    ) -> None:
        if index is not None and not isinstance(index, Mapping):
            raise ConfigError(f"index must be a dict (LangGraph's IndexConfig), got {type(index).__name__}")
        fields = list((index or {}).get("fields") or [ALL_FIELDS])
        if not all(isinstance(f, str) and f for f in fields):
            raise ConfigError(f"index['fields'] must be non-empty strings, got {fields!r}", setting="index")
        embed = (index or {}).get("embed")
        if not isinstance(prefix, str) or not prefix or "/" in prefix:
            raise ConfigError(
                f"prefix must be a non-empty string without '/', got {prefix!r}", setting="prefix"
            )
        if abstain not in ABSTAIN_POLICIES:
            raise InvalidInputError(f"abstain must be one of {list(ABSTAIN_POLICIES)}, got {abstain!r}")
        try:
            self.mode = SearchMode(mode)
        except ValueError as exc:
            raise InvalidInputError(
                f"Unknown mode {mode!r}; use one of {[m.value for m in SearchMode]}"
            ) from exc
        self._ref = KhoraRef(
            kb,
            config=config,
            url=url,
            data_dir=data_dir,
            embedder=ensure_embeddings(embed) if embed is not None else None,
            preset=preset,
        )
        self.index_config = {**dict(index or {}), "fields": fields}
        self.fields = fields
        self.prefix = prefix
        self.abstain = abstain

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

    # -- LangGraph entry points -------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; see ``abatch``."""
        todo = list(ops)
        return self._ref.call(lambda kb: self._run(kb, todo))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``GetOp``/``PutOp``/``SearchOp``/``ListNamespacesOp`` in order; one result each.

        Raises:
            StoreNamespaceError: a malformed namespace (also LangGraph's ``InvalidNamespaceError``).
            InvalidInputError: a bad key, value, filter, limit, offset or operation.
            KhoraAbstention: ``abstain="raise"`` and recall abstained on a query.
        """
        todo = list(ops)
        return await self._ref.acall(lambda kb: self._run(kb, todo))

    # -- one implementation --------------------------------------------------------------------
    async def _run(self, kb: Khora, ops: list[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(kb, op))
            elif isinstance(op, PutOp):
                await self._put(kb, op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(kb, op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(kb, op))
            else:
                raise InvalidInputError(f"Unknown store operation {type(op).__name__}")
        return results

    async def _exists(self, kb: Khora, namespace_id: str) -> bool:
        return await kb.engine.stack.documents.get_namespace(namespace_id) is not None

    async def _current(self, kb: Khora, namespace_id: str, key: str) -> Document | None:
        found = await kb.engine.stack.documents.find_documents_by_external_id(namespace_id, key)
        return found[0] if found else None

    async def _get(self, kb: Khora, op: GetOp) -> Item | None:
        namespace = check_namespace(op.namespace)
        key = check_key(op.key)
        nsid = encode_namespace(self.prefix, namespace)
        if not await self._exists(kb, nsid):
            return None
        doc = await self._current(kb, nsid, key)
        return Item(**item_parts(namespace, doc)) if doc is not None else None

    async def _put(self, kb: Khora, op: PutOp) -> None:
        namespace = check_namespace(op.namespace)
        key = check_key(op.key)
        nsid = encode_namespace(self.prefix, namespace)
        if op.value is None:
            if await self._exists(kb, nsid):
                await kb.forget(namespace=nsid, external_id=key)
            return
        if not isinstance(op.value, Mapping):
            raise InvalidInputError(f"An item value must be a dict, got {type(op.value).__name__}")
        value = jsonable(dict(op.value))
        index = getattr(op, "index", None)
        if index is False:
            fields: list[str] = []
        elif index is None:
            fields = self.fields
        elif isinstance(index, (list, tuple)) and all(isinstance(f, str) and f for f in index):
            fields = list(index)
        else:
            raise InvalidInputError(f"index must be None, False or a list of field paths, got {index!r}")
        text = content_for(value, fields) if fields else ""
        await kb.create_namespace("/".join(namespace), namespace=nsid)
        previous = await self._current(kb, nsid, key)
        now = datetime.now(timezone.utc).isoformat()
        metadata = {
            "value": value,
            "indexed": bool(text),
            "created_at": previous.metadata.get("created_at", now) if previous is not None else now,
            "updated_at": now,
        }
        content = await self._free_content(kb, nsid, key, text or stored_json(value))
        await kb.remember(content, namespace=nsid, external_id=key, metadata=metadata)

    async def _free_content(self, kb: Khora, nsid: str, key: str, content: str) -> str:
        """Content ``remember`` will store for ``key``: Khora keeps identical text once per
        namespace, so an item whose text another key holds gets its key appended, and this
        key's own identical copy is forgotten (a repeat would keep the old metadata)."""
        docs = kb.engine.stack.documents
        for candidate in (content, f"{content}\n\n[{key}]"):
            same = await docs.find_document_by_hash(nsid, content_hash(candidate))
            if same is None:
                return candidate
            if same.external_id == key:
                await kb.forget(same.id, namespace=nsid)
                return candidate
        raise InvalidInputError(
            f"The text of item {key!r} is already stored under other keys in this namespace"
        )

    async def _namespaces(self, kb: Khora) -> list[tuple[tuple[str, ...], str]]:
        """This store's namespaces, with their Khora ids, sorted."""
        found = []
        for ns in await kb.list_namespaces():
            decoded = decode_namespace(self.prefix, ns.namespace_id)
            if decoded is not None:
                found.append((decoded, ns.namespace_id))
        return sorted(found)

    async def _all_documents(self, kb: Khora, nsid: str) -> list[Document]:
        docs: list[Document] = []
        while True:
            page = await kb.engine.stack.documents.list_documents(nsid, offset=len(docs), limit=_PAGE)
            docs.extend(page)
            if len(page) < _PAGE:
                return docs

    async def _list_namespaces(self, kb: Khora, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = check_page(op.limit, op.offset)
        if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
            raise InvalidInputError(f"max_depth must be a positive integer, got {op.max_depth!r}")
        names = []
        for namespace, nsid in await self._namespaces(kb):
            if not all(matches_condition(namespace, c.match_type, c.path) for c in op.match_conditions or ()):
                continue
            if (await kb.engine.stack.stats(nsid)).documents:  # a namespace lives while it holds items
                names.append(namespace)
        if op.max_depth is not None:
            names = sorted({ns[: op.max_depth] for ns in names})
        return names[offset : offset + limit]

    async def _search(self, kb: Khora, op: SearchOp) -> list[SearchItem]:
        prefix = check_namespace(op.namespace_prefix, allow_empty=True)
        limit, offset = check_page(op.limit, op.offset)
        user_filter = to_recall_filter(op.filter)
        parsed = RecallFilter.parse(user_filter) if user_filter is not None else None  # fails before any read
        query = getattr(op, "query", None)
        if query is not None and not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        targets = [(ns, nsid) for ns, nsid in await self._namespaces(kb) if ns[: len(prefix)] == prefix]
        if limit == 0 or not targets:
            return []
        if not query or not query.strip():
            listed = await self._listed(kb, targets, parsed)
            return [KhoraSearchItem(**item_parts(ns, doc)) for ns, doc in listed[offset : offset + limit]]
        found = await self._recalled(kb, targets, query, user_filter, offset + limit)
        items = found[offset : offset + limit]
        if len(items) < limit:  # items with no indexed text, unscored, as InMemoryStore does
            unindexed = [
                (ns, doc)
                for ns, doc in await self._listed(kb, targets, parsed)
                if doc.metadata.get("indexed") is False
            ]
            items += [KhoraSearchItem(**item_parts(ns, doc)) for ns, doc in unindexed[: limit - len(items)]]
        return items

    async def _listed(
        self, kb: Khora, targets: list[tuple[tuple[str, ...], str]], parsed: RecallFilter | None
    ) -> list[tuple[tuple[str, ...], Document]]:
        """Every item under the targets that passes the filter, newest update first."""
        rows = []
        for namespace, nsid in targets:
            for doc in await self._all_documents(kb, nsid):
                if parsed is None or parsed.matches(filter_record(doc)):
                    rows.append((namespace, doc))
        rows.sort(key=lambda row: item_parts(row[0], row[1])["updated_at"], reverse=True)
        return rows

    async def _recalled(
        self,
        kb: Khora,
        targets: list[tuple[tuple[str, ...], str]],
        query: str,
        user_filter: dict[str, Any] | None,
        wanted: int,
    ) -> list[SearchItem]:
        """The best chunk's document per item for ``query``, best first across namespaces."""
        indexed: dict[str, Any] = {"metadata.indexed": True}
        flt = {"$and": [user_filter, indexed]} if user_filter is not None else indexed
        # Several chunks can come from one item; 10 would let recall adapt its count.
        fetch = max(3 * wanted, 20)
        ranked: list[list[SearchItem]] = []
        for namespace, nsid in targets:
            result = await kb.recall(query, namespace=nsid, limit=fetch, mode=self.mode, filter=flt)
            keep, signals = apply_abstention_policy(result, self.abstain)
            if not keep:
                continue
            docs: dict[str, Document | DocumentProjection] = {d.id: d for d in result.documents}
            missing = [c.document_id for c in result.chunks if c.document_id not in docs]
            if missing:
                docs.update({d.id: d for d in await kb.engine.stack.documents.get_documents(nsid, missing)})
            items: list[SearchItem] = []
            seen: set[str] = set()
            for chunk in result.chunks:
                doc = docs.get(chunk.document_id)
                if doc is None or doc.id in seen:
                    continue
                seen.add(doc.id)
                items.append(
                    KhoraSearchItem(
                        **item_parts(namespace, doc),
                        score=chunk.vector_similarity,
                        should_abstain=signals["should_abstain"],
                        abstention_signals=signals,
                    )
                )
            ranked.append(items)
        return merge_by_score(ranked)
