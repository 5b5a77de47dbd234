"""How the PostgreSQL + Neo4j stack cuts a large write into Neo4j transactions."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

from khora_core.models import Chunk, Document, Entity, WriteBatch
from khora_core.storage.postgres.stack import graph_slices

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _batch(doc: str, chunks: int, entities: int) -> WriteBatch:
    return WriteBatch(
        document=Document(id=doc, namespace_id="ns", content="x", content_hash=doc, created_at=NOW),
        chunks=[
            Chunk(
                id=f"{doc}-c{i}",
                namespace_id="ns",
                document_id=doc,
                index=i,
                content="x",
                start_char=0,
                end_char=1,
                created_at=NOW,
            )
            for i in range(chunks)
        ],
        entities=[
            Entity(id=f"{doc}-e{i}", namespace_id="ns", name=f"E{i}", type="THING") for i in range(entities)
        ],
    )


def test_slices_keep_order_and_stay_within_the_row_budget() -> None:
    batches = [_batch(f"d{i}", chunks=1 + i % 3, entities=2 * (i % 5)) for i in range(40)]
    slices = list(graph_slices(batches, max_rows=25))
    assert [b.document.id for part in slices for b in part] == [b.document.id for b in batches]
    sizes = [sum(len(b.chunks) + len(b.entities) for b in part) for part in slices]
    assert max(sizes) <= 25
    # greedy: a slice ends only where the next document would pass the budget
    for part, nxt in itertools.pairwise(slices):
        first = nxt[0]
        assert (
            sum(len(b.chunks) + len(b.entities) for b in part) + len(first.chunks) + len(first.entities) > 25
        )


def test_a_document_larger_than_the_budget_lands_alone() -> None:
    batches = [_batch("small", 1, 1), _batch("huge", 30, 10), _batch("after", 1, 0)]
    assert [[b.document.id for b in part] for part in graph_slices(batches, max_rows=25)] == [
        ["small"],
        ["huge"],
        ["after"],
    ]
    assert list(graph_slices([], max_rows=25)) == []
