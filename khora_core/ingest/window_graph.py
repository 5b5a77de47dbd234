"""The graph stage of a ``remember_batch`` window: the stored entities its items may name,
then each item's resolved graph with its entity name vectors.

Items are resolved in input order, each against the stored entities and those the batch
built before it (:class:`~khora_core.ingest.names.BatchEntities`), so one batch builds the
same graph however it is cut into windows. A failing step settles the items it concerns
with their error and leaves the others going.
"""

from __future__ import annotations

from typing import Any

from khora_core.ingest.graph_build import (
    assemble_graph,
    attach_embeddings,
    extracted_mentions,
    names_to_embed,
    resolve_names,
)
from khora_core.ingest.items import WorkItem, as_khora_error
from khora_core.ingest.names import BatchEntities, NameVectors
from khora_core.ingest.resolve import EntityResolver
from khora_core.models import Entity
from khora_core.storage.protocols import StorageStack, fold

__all__ = ["build_graphs", "find_stored"]

#: Most names in one ``find_entities_by_name`` call (a window's candidate names).
_LOOKUP_SLICE = 10_000


async def find_stored(stack: StorageStack, works: list[WorkItem], namespace_id: str, settle: Any) -> None:
    """The stored entities each item may name: one lookup for the window's candidate
    names (after the previous window's write landed), shared out by the same
    case-insensitive key the store matches on, in the store's order."""
    wanted = [{fold(n) for n in w.candidates if n.strip()} for w in works]
    keys = sorted(set().union(*wanted))
    found: list[Entity] = []
    try:
        for lo in range(0, len(keys), _LOOKUP_SLICE):
            found += await stack.graph.find_entities_by_name(namespace_id, keys[lo : lo + _LOOKUP_SLICE])
    except Exception as exc:
        for w in works:
            settle(w, as_khora_error(exc, w.index))
        return
    # Slices may find the same entity twice; the store orders by mention count, then id.
    found = sorted({e.id: e for e in found}.values(), key=lambda e: (-e.mention_count, e.id))
    by_key: dict[str, list[int]] = {}
    for i, ent in enumerate(found):
        for key in {fold(ent.name), *(fold(a) for a in ent.aliases)}:
            by_key.setdefault(key, []).append(i)
    for w, item_keys in zip(works, wanted, strict=True):
        hits = {i for key in item_keys for i in by_key.get(key, ())}
        w.stored = [found[i] for i in sorted(hits)]


async def build_graphs(
    works: list[WorkItem],
    namespace_id: str,
    *,
    resolver: EntityResolver,
    names: NameVectors,
    built: BatchEntities,
    entity_vectors: Any,
    settle: Any,
) -> None:
    """Resolve and assemble each item's graph, in input order (an item resolves against
    the entities of the items before it), then embed the window's new entity names in
    one call.

    The names whose vectors decide a merge are embedded in one call up front, planned
    against what is known before the window; an item that the earlier items of the
    window bring a new close pair costs one more, small call.
    """
    for work in works:
        names.seed(work.stored)
    try:
        await names.ensure(
            n
            for w in works
            for n in resolver.plan(
                extracted_mentions(w.extractions), existing=[*w.stored, *built.find(w.candidates)]
            ).wanted
        )
    except Exception as exc:
        for w in works:
            settle(w, as_khora_error(exc, w.index))
        return
    for work in works:
        try:
            # Entities built earlier in the batch count as stored (they may not be yet).
            existing = {e.id: e for e in work.stored}
            existing.update((e.id, e) for e in built.find(work.candidates))
            work.graph = assemble_graph(
                namespace_id=namespace_id,
                document_id=work.document_id,
                chunk_ids=work.chunk_ids,
                chunk_texts=[s.text for s in work.spans],
                extractions=work.extractions,
                existing=list(existing.values()),
                resolution=await resolve_names(resolver, work.extractions, list(existing.values()), names),
                entity_vectors=entity_vectors,
            )
            built.add(work.graph.entities)
        except Exception as exc:
            settle(work, as_khora_error(exc, work.index))
        # The stored entities (384 floats each) live on in the graph and the name cache;
        # the window's items may wait a while for their write.
        work.stored, work.candidates = [], []
    ready = [w for w in works if w.outcome is None and w.graph is not None]
    try:
        await names.ensure(n for w in ready if w.graph is not None for n in names_to_embed(w.graph))
    except Exception as exc:
        for w in ready:
            settle(w, as_khora_error(exc, w.index))
        return
    for w in ready:
        if w.graph is not None:
            attach_embeddings(w.graph, names)
