"""Property tests: translated filters select what they should, judged by the
``RecallFilter`` in-memory evaluator on randomised records.

* LlamaIndex -> Khora: the reference is LlamaIndex's own evaluator
  (``build_metadata_filter_fn``) applied leaf by leaf, combined with LlamaIndex's condition
  semantics (``and``: all, ``or``: any, ``not``: none), on well-typed records (each key
  holds one JSON type, or is missing, or null), where Python's ``==``/``<`` mean what
  Khora's typed comparisons mean.
* Khora -> LlamaIndex -> Khora: a random RecallFilter in the expressible subset selects
  the same records after the round trip.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from khora_core.filters import RecallFilter
from khora_integrations.llama_index.filters import (
    metadata_filters_to_recall_filter,
    recall_filter_to_metadata_filters,
)

O = FilterOperator  # noqa: E741 - short names keep the strategies readable
BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
SYSTEM_NONE: dict[str, Any] = {
    "occurred_at": None,
    "created_at": BASE,
    "source_timestamp": None,
    "source_type": None,
    "source_name": None,
    "source_url": None,
    "external_id": None,
    "content_type": "text/plain",
    "source": None,
    "title": None,
}
NUMBERS = st.one_of(st.integers(min_value=0, max_value=5), st.sampled_from([0.5, 2.5, 4.0]))
WORDS = st.sampled_from(["a", "b", "c", ""])
SOURCES = st.sampled_from(["linear", "slack", ""])
TAGS = st.lists(st.sampled_from(["a", "b"]), max_size=2)
ABSENT_MARK = "__absent__"  # the key is left out of the record


# -- LlamaIndex -> Khora --------------------------------------------------------------------


def _leaves(
    key: str, values: st.SearchStrategy[Any], ops: list[FilterOperator]
) -> st.SearchStrategy[MetadataFilter]:
    scalar = [op for op in ops if op not in (O.IN, O.NIN, O.IS_EMPTY)]
    options = [
        st.builds(
            lambda op, v: MetadataFilter(key=key, value=v, operator=op), st.sampled_from(scalar), values
        )
    ]
    if O.IN in ops:
        options.append(
            st.builds(
                lambda op, vs: MetadataFilter(key=key, value=vs, operator=op),
                st.sampled_from([O.IN, O.NIN]),
                st.lists(values, max_size=3),
            )
        )
    options.append(st.just(MetadataFilter(key=key, value=None, operator=O.IS_EMPTY)))
    return st.one_of(*options)


RANGES = [O.EQ, O.NE, O.GT, O.GTE, O.LT, O.LTE, O.IN, O.NIN, O.IS_EMPTY]
LEAF = st.one_of(
    _leaves("n", st.integers(min_value=0, max_value=5), RANGES),
    _leaves("s", WORDS, RANGES),
    _leaves("source", SOURCES, [O.EQ, O.NE, O.IN, O.NIN, O.IS_EMPTY]),
    st.builds(
        lambda op, v: MetadataFilter(key="tags", value=v, operator=op), st.sampled_from([O.EQ, O.NE]), TAGS
    ),
    st.just(MetadataFilter(key="tags", value=None, operator=O.IS_EMPTY)),
)
LI_FILTERS = st.recursive(
    st.builds(lambda leaf: MetadataFilters(filters=[leaf]), LEAF),
    lambda inner: st.builds(
        lambda items, cond: MetadataFilters(filters=items, condition=cond),
        st.lists(st.one_of(LEAF, inner), max_size=3),
        st.sampled_from(list(FilterCondition)),
    ),
    max_leaves=8,
)
LI_RECORD = st.builds(
    lambda n, s, tags, source: {
        **SYSTEM_NONE,
        "source": source or None,
        "metadata": {k: v for k, v in (("n", n), ("s", s), ("tags", tags)) if v != ABSENT_MARK},
    },
    st.one_of(NUMBERS, st.none(), st.just(ABSENT_MARK)),
    st.one_of(WORDS, st.none(), st.just(ABSENT_MARK)),
    st.one_of(TAGS, st.none(), st.just(ABSENT_MARK)),
    st.one_of(SOURCES, st.none()),
)


def _llama_flat(record: dict[str, Any]) -> dict[str, Any]:
    """What a LlamaIndex store sees: flat metadata plus the system key (absent when None)."""
    flat = dict(record["metadata"])
    if record["source"] is not None:
        flat["source"] = record["source"]
    return flat


def _reference(filters: MetadataFilters, flat: dict[str, Any]) -> bool:
    results = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            results.append(_reference(item, flat))
        else:  # LlamaIndex's own evaluator for one leaf
            results.append(build_metadata_filter_fn(lambda _: flat, MetadataFilters(filters=[item]))("node"))
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.OR:
        return any(results)
    if condition == FilterCondition.NOT:
        return not any(results)
    return all(results)


@settings(max_examples=400, deadline=None)
@given(LI_FILTERS, st.lists(LI_RECORD, min_size=1, max_size=6))
def test_llama_index_filters_select_what_llama_index_selects(filters, records):
    translated = metadata_filters_to_recall_filter(filters)
    parsed = RecallFilter.parse(translated) if translated is not None else None
    for record in records:
        # No filters at all select everything in LlamaIndex, whatever the condition.
        expected = _reference(filters, _llama_flat(record)) if filters.filters else True
        got = parsed.matches(record) if parsed is not None else True
        assert got == expected, (translated, record)


# -- Khora -> LlamaIndex -> Khora -----------------------------------------------------------

DAYS = st.integers(min_value=0, max_value=5).map(lambda d: BASE + timedelta(days=d))


def _khora_ops(values: st.SearchStrategy[Any], ops: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    single = st.builds(
        lambda op, v: {op: v}, st.sampled_from([o for o in ops if o not in ("$in", "$nin")]), values
    )
    member = st.builds(
        lambda op, vs: {op: vs}, st.sampled_from(["$in", "$nin"]), st.lists(values, max_size=3)
    )
    return st.one_of(values, single, member, single.map(lambda c: {"$not": c}))


ALL_OPS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]
K_FIELD = st.one_of(
    st.builds(lambda c: {"metadata.n": c}, _khora_ops(st.integers(min_value=0, max_value=5), ALL_OPS)),
    st.builds(lambda c: {"metadata.s": c}, _khora_ops(WORDS, ALL_OPS)),
    st.builds(lambda c: {"source": c}, _khora_ops(SOURCES, ["$eq", "$ne", "$in", "$nin"])),
    st.builds(lambda c: {"occurred_at": c}, _khora_ops(DAYS, ALL_OPS)),
)
K_FILTER = st.recursive(
    K_FIELD,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$nor": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
    ),
    max_leaves=8,
)
K_RECORD = st.builds(
    lambda n, s, source, day: {
        **SYSTEM_NONE,
        "source": source,
        "occurred_at": day,
        "metadata": {k: v for k, v in (("n", n), ("s", s)) if v != ABSENT_MARK},
    },
    st.one_of(NUMBERS, st.none(), st.just(ABSENT_MARK)),
    st.one_of(WORDS, st.none(), st.just(ABSENT_MARK)),
    st.one_of(SOURCES, st.none()),
    st.one_of(DAYS, st.none()),
)


@settings(max_examples=400, deadline=None)
@given(K_FILTER, st.lists(K_RECORD, min_size=1, max_size=6))
def test_recall_filters_survive_the_round_trip_through_llama_index(recall, records):
    original = RecallFilter.parse(recall)
    back = metadata_filters_to_recall_filter(recall_filter_to_metadata_filters(original))
    translated = RecallFilter.parse(back) if back is not None else None
    for record in records:
        got = translated.matches(record) if translated is not None else True
        assert got == original.matches(record), (recall, back, record)
