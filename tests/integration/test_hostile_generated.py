"""Generated hostile input at the ``Khora`` facade, on every storage stack (issue #38 item 4).

Hypothesis builds contents, titles, external ids, metadata (keys and values), namespace ids,
questions and filters out of quotes, comment sequences, SQL and Cypher fragments, null
bytes, lone surrogates, direction marks, deep nesting and huge lists. Every call must
either succeed with a correct result or raise a ``KhoraError``; nothing else. After every
example a canary document written before the run must still be stored, unchanged and found,
and the namespace must hold exactly the documents that were reported written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from khora_core import KhoraConfig, KhoraSync, RememberResult
from khora_core.errors import KhoraError
from tests.fixtures.stacks import config_for
from tests.typed import typed

CANARY = "Canary note: Maya Chen keeps the lighthouse log in Lisbon."

#: Pieces that break naive quoting, comments and query building in SQL and Cypher.
FRAGMENTS = [
    "'",
    '"',
    "`",
    "\\",
    "--",
    "/*",
    "*/",
    "//",
    ";",
    "' OR '1'='1",
    '"; DROP TABLE khora_documents; --',
    "MATCH (n) DETACH DELETE n",
    "}) RETURN n //",
    "$ns",
    "{namespace_id}",
    "%s",
    "\x00",
    "\ud800",
    "\udfff",
    "\u202e",
    "\ufeff",
    "🦜",
    "\n",
    "$where",
    "$and",
    "a.b",
    "__proto__",
]

hostile_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=0, max_size=6
).map("".join)


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
values = st.one_of(
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=3),
        max_leaves=10,
    ),
    st.integers(min_value=30, max_value=200).map(_nested),
    st.integers(min_value=10_000, max_value=20_000).map(lambda n: list(range(n))),
)
metadata = st.dictionaries(hostile_text, values, max_size=4)
operators = st.sampled_from(
    ["$eq", "$ne", "$in", "$nin", "$gt", "$lte", "$exists", "$contains", "$like", "$bogus"]
)
filters = st.recursive(
    st.dictionaries(
        st.one_of(hostile_text, st.sampled_from(["source_type", "external_id", "occurred_at", "title"])),
        st.one_of(values, st.dictionaries(operators, values, min_size=1, max_size=2)),
        max_size=3,
    ),
    lambda inner: st.dictionaries(
        st.sampled_from(["$and", "$or", "$not", "$nor"]), st.lists(inner, max_size=3)
    ),
    max_leaves=6,
)

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

HOSTILE = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def kb(stack_name: str, request: pytest.FixtureRequest, tmp_path: Any, embedder: Any) -> Iterator[KhoraSync]:
    config: KhoraConfig = config_for(stack_name, request, tmp_path / "khora-data")
    with KhoraSync(config=config, embedder=embedder) as k:
        yield k


@pytest.fixture
def ns(kb: KhoraSync) -> Iterator[str]:
    namespace = kb.create_namespace("hostile", namespace=f"hostile-{uuid.uuid4().hex[:12]}").namespace_id
    canary = kb.remember(CANARY, namespace=namespace, external_id="canary", metadata={"kind": "canary"})
    assert isinstance(canary, RememberResult)
    yield namespace
    kb.delete_namespace(namespace)


def _canary_intact(kb: KhoraSync, ns: str, documents: int) -> None:
    """The canary is stored unchanged and found, and the namespace holds ``documents``."""
    assert kb.stats(ns).documents == documents
    found = kb.recall("Who keeps the lighthouse log?", namespace=ns, filter={"external_id": "canary"})
    assert [c.content for c in found.chunks] == [CANARY]
    assert found.documents[0].metadata == {"kind": "canary"}


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``: its result, or ``None`` when it raised a ``KhoraError`` (anything else fails)."""
    try:
        return fn(*args, **kwargs)
    except KhoraError:
        return None


@HOSTILE
@given(
    content=hostile_text, title=hostile_text, context=hostile_text, external_id=hostile_text, meta=metadata
)
def test_generated_remember_stores_exactly_or_refuses(
    kb: KhoraSync, ns: str, content: str, title: str, context: str, external_id: str, meta: dict[str, Any]
) -> None:
    before = kb.stats(ns).documents
    ext = f"x-{external_id}"
    result = _call(
        kb.remember,
        content,
        namespace=ns,
        title=title or None,
        context=context or None,
        external_id=ext,
        metadata=meta,
    )
    event("refused" if result is None else "stored")
    if result is None:  # refused: nothing written
        _canary_intact(kb, ns, before)
        return
    assert isinstance(result, RememberResult)
    after = before if result.duplicate else before + 1
    _canary_intact(kb, ns, after)
    # What was stored is what was given, found again by its external id.
    found = kb.recall(content or "anything", namespace=ns, filter={"external_id": ext}, limit=50)
    assert {d.external_id for d in found.documents} <= {ext}
    if not result.duplicate:
        assert found.documents, "a stored document is not found by its own external id"
        assert typed(found.documents[0].metadata) == typed(meta)
        assert found.documents[0].content == content  # the context is searched, never stored as content
        assert kb.forget(namespace=ns, external_id=ext)
        _canary_intact(kb, ns, before)


@HOSTILE
@given(question=hostile_text, filter=filters)
def test_generated_recall_filters_answer_or_refuse(
    kb: KhoraSync, ns: str, question: str, filter: Any
) -> None:
    result = _call(kb.recall, question or "lighthouse", namespace=ns, filter=filter)
    event("refused" if result is None else "answered")
    if result is not None:
        assert all(c.document_id for c in result.chunks)
    _canary_intact(kb, ns, 1)


@HOSTILE
@given(namespace_id=hostile_text, name=hostile_text, meta=metadata)
def test_generated_namespace_ids_are_created_exactly_or_refused(
    kb: KhoraSync, ns: str, namespace_id: str, name: str, meta: dict[str, Any]
) -> None:
    created = _call(kb.create_namespace, name or "n", namespace=namespace_id, metadata=meta)
    event("refused" if created is None else "created")
    if created is not None:
        try:
            assert created.namespace_id == namespace_id
            stored_ns = kb.get_namespace(namespace_id)
            assert (stored_ns.namespace_id, stored_ns.name, typed(stored_ns.metadata)) == (
                namespace_id,
                name or "n",
                typed(meta),
            )
            stored = kb.remember("A note in the new namespace.", namespace=namespace_id)
            assert isinstance(stored, RememberResult)
            assert kb.stats(namespace_id).documents == 1
            # Another namespace's data stays out of sight.
            seen = kb.recall("Who keeps the lighthouse log?", namespace=namespace_id, limit=50)
            assert all(c.content != CANARY for c in seen.chunks)
        finally:
            kb.delete_namespace(namespace_id)
    _canary_intact(kb, ns, 1)
