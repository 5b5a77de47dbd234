"""The batch-scoped name-vector cache and the batch's entity registry."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from khora_core.errors import KhoraError
from khora_core.ingest.names import BatchEntities, NameVectors
from khora_core.models import Entity


class Recording:
    """A deterministic embedder that records every call."""

    name = "recording"
    dimension = 4

    def __init__(self, *, short_by: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.short_by = short_by

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        out = [[float(len(t)), float(sum(map(ord, t)) % 97), 1.0, 0.5] for t in texts]
        return out[: len(out) - self.short_by]

    async def embed_query(self, text: str) -> list[float]:
        return (await self.embed_documents([text]))[0]


async def test_each_name_is_embedded_once_in_one_call_per_request() -> None:
    emb = Recording()
    names = NameVectors(emb)
    await names.ensure(["Acme", "Maya Chen", "Acme", ""])
    await names.ensure(["Maya Chen", "Lisbon"])
    await names.ensure(["Acme"])
    assert emb.calls == [["Acme", "Maya Chen"], ["Lisbon"]]
    assert names.embedded == 3 and names.calls == 2 and len(names) == 3
    assert names.as_list("Lisbon") == [6.0, float(sum(map(ord, "Lisbon")) % 97), 1.0, 0.5]
    assert names.get("lisbon") is None  # exact strings only


async def test_seeded_names_are_not_embedded_and_never_override() -> None:
    emb = Recording()
    names = NameVectors(emb)
    await names.ensure(["Acme"])
    stored = Entity(
        id="e1", namespace_id="ns", name="Acme Corp", aliases=["Acme", "ACME"], embedding=[9.0, 9.0, 9.0, 9.0]
    )
    names.seed([stored, Entity(id="e2", namespace_id="ns", name="No Vector")])
    await names.ensure(["Acme Corp", "ACME", "Acme", "No Vector"])
    assert emb.calls == [["Acme"], ["No Vector"]]
    assert names.as_list("ACME") == [9.0, 9.0, 9.0, 9.0]
    assert names.as_list("Acme") != [9.0, 9.0, 9.0, 9.0]  # its own embedding wins
    assert isinstance(names.get("Acme Corp"), np.ndarray) and names.mapping(["Acme Corp", "x"]).keys() == {
        "Acme Corp"
    }


async def test_a_short_answer_from_the_embedder_is_an_error() -> None:
    names = NameVectors(Recording(short_by=1))
    with pytest.raises(KhoraError, match="returned 1 vectors for 2 names"):
        await names.ensure(["a", "b"])
    assert len(names) == 0


def test_batch_entities_find_by_name_or_alias_case_insensitively() -> None:
    built = BatchEntities()
    built.add(
        [
            Entity(
                id="n",
                namespace_id="ns",
                name="National Aeronautics and Space Administration",
                aliases=["NASA"],
            ),
            Entity(id="m", namespace_id="ns", name="Maya Chen", embedding=[1.0], mention_count=3),
        ]
    )
    assert [e.id for e in built.find(["nasa "])] == ["n"]
    assert [e.id for e in built.find(["MAYA CHEN", "nobody", "NASA"])] == ["m", "n"]
    kept = built.find(["maya chen"])[0]
    assert kept.embedding is None and kept.mention_count == 0  # kept light
    # A later version of the same entity adds aliases and keeps the earlier ones.
    built.add([Entity(id="m", namespace_id="ns", name="Maya Chen", aliases=["Dr. Maya Chen"])])
    assert built.find(["dr. maya chen"])[0].aliases == ["Dr. Maya Chen"]
    built.add([Entity(id="m", namespace_id="ns", name="Maya Chen", aliases=["M. Chen"])])
    assert built.find(["m. chen"])[0].aliases == ["M. Chen", "Dr. Maya Chen"] and len(built) == 2
