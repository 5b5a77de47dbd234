"""``remember(..., dedup=False)``: documents keyed by ``external_id`` instead of content.

On every stack: identical text under two external ids is two documents, the same input
again is a duplicate, a changed input replaces the stored version of its id, and content
dedup (the default) still holds for ``remember`` without the option.
"""

from __future__ import annotations

import pytest

from khora_core import Khora
from khora_core.errors import InvalidInputError
from khora_core.models import RememberResult

TEXT = "Harbour seals eat fish and squid."


async def _docs(kb: Khora, namespace: str, external_id: str) -> list[tuple[str, dict]]:
    found = await kb.engine.stack.documents.find_documents_by_external_id(namespace, external_id)
    return [(d.content, dict(d.metadata)) for d in found]


async def test_identical_text_under_two_ids_is_two_documents(kb: Khora, namespace: str) -> None:
    a = await kb.remember(TEXT, namespace=namespace, external_id="a", metadata={"src": "a"}, dedup=False)
    b = await kb.remember(TEXT, namespace=namespace, external_id="b", metadata={"src": "b"}, dedup=False)
    assert not a.duplicate and not b.duplicate and a.document_id != b.document_id
    assert set(a.chunk_ids).isdisjoint(b.chunk_ids)
    assert await _docs(kb, namespace, "a") == [(TEXT, {"src": "a"})]
    assert await _docs(kb, namespace, "b") == [(TEXT, {"src": "b"})]
    assert (await kb.stats(namespace)).documents == 2
    hits = await kb.engine.stack.vectors.search(
        namespace, await kb.engine.embedder.embed_query("seals"), limit=10, min_similarity=-1.0
    )
    assert {h.chunk.document_id for h in hits.hits} == {a.document_id, b.document_id}


async def test_same_input_is_a_duplicate_and_a_change_replaces(kb: Khora, namespace: str) -> None:
    first = await kb.remember(TEXT, namespace=namespace, external_id="a", metadata={"v": 1}, dedup=False)
    again = await kb.remember(TEXT, namespace=namespace, external_id="a", metadata={"v": 1}, dedup=False)
    assert again.duplicate and again.document_id == first.document_id
    changed = await kb.remember(TEXT, namespace=namespace, external_id="a", metadata={"v": 2}, dedup=False)
    assert not changed.duplicate and changed.replaced_document_ids == [first.document_id]
    assert await _docs(kb, namespace, "a") == [(TEXT, {"v": 2})]
    assert (await kb.stats(namespace)).documents == 1


async def test_content_dedup_stays_the_default(kb: Khora, namespace: str) -> None:
    keyed = await kb.remember(TEXT, namespace=namespace, external_id="a", dedup=False)
    plain = await kb.remember(TEXT, namespace=namespace)
    assert plain.duplicate and plain.document_id == keyed.document_id
    other = await kb.remember("Grey seals haul out on sandbanks.", namespace=namespace, external_id="x")
    again = await kb.remember("Grey seals haul out on sandbanks.", namespace=namespace, external_id="y")
    assert again.duplicate and again.document_id == other.document_id


async def test_a_batch_keeps_one_entry_per_id(kb: Khora, namespace: str) -> None:
    items = [
        {"content": TEXT, "external_id": "a", "metadata": {"n": 1}, "dedup": False},
        {"content": TEXT, "external_id": "b", "metadata": {"n": 2}, "dedup": False},
        {"content": TEXT, "external_id": "a", "metadata": {"n": 3}, "dedup": False},  # a again: replaces
        {"content": TEXT, "external_id": "b", "metadata": {"n": 2}, "dedup": False},  # b again: identical
    ]
    out = await kb.remember_batch(items, namespace=namespace)
    assert all(isinstance(o, RememberResult) for o in out), out
    assert out[3].duplicate and out[3].document_id == out[1].document_id
    assert await _docs(kb, namespace, "a") == [(TEXT, {"n": 3})]
    assert await _docs(kb, namespace, "b") == [(TEXT, {"n": 2})]
    assert (await kb.stats(namespace)).documents == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"dedup": False}, "pass external_id"), ({"dedup": "no", "external_id": "a"}, "True or False")],
)
async def test_bad_dedup_arguments_are_refused(kb: Khora, namespace: str, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await kb.remember(TEXT, namespace=namespace, **kwargs)
    assert (await kb.stats(namespace)).documents == 0
