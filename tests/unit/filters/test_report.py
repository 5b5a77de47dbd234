"""FilterPushdownReport: the spec's example and the partition invariant."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from khora_core.errors import RecallFilterValidationError
from khora_core.filters import (
    FilterPushdownReport,
    RecallFilter,
    build_report,
    compile_cypher,
    compile_sqlite,
)

from .strategies import filters


def test_spec_example() -> None:
    report = build_report({"source_name": "linear"}, {"vector": (["source_name"], [], True)})
    assert isinstance(report, FilterPushdownReport)
    assert report.as_dict() == {
        "pushed_down": True,
        "post_filtered": True,
        "pushed_keys": ["source_name"],
        "post_filtered_keys": [],
        "unenforced_keys": [],
        "channels": {"vector": {"pushed_keys": ["source_name"], "post_filtered_keys": []}},
    }
    assert report.to_dict() == report.model_dump() == report.as_dict()


def test_graph_channel_with_a_residual() -> None:
    f = RecallFilter.parse({"source_name": "linear", "metadata.tier": "gold"})
    cy = compile_cypher(f)
    lite = compile_sqlite(f)
    report = build_report(
        f,
        {
            "vector": (lite.pushed_keys, lite.residual_keys, True),
            "graph": (cy.pushed_keys, cy.residual_keys, True),
        },
    )
    assert report.pushed_keys == ["source_name"]
    assert report.post_filtered_keys == ["metadata.tier"]
    assert report.unenforced_keys == []
    assert report.pushed_down is False and report.post_filtered is True
    assert report.channels["graph"].post_filtered_keys == ["metadata.tier"]
    assert report.channels["vector"].pushed_keys == ["source_name", "metadata.tier"]


def test_unenforced_keys_are_reported() -> None:
    f = {"source_name": "linear", "metadata.tier": "gold"}
    report = build_report(f, {"vector": (["source_name"], [], False)})
    assert report.unenforced_keys == ["metadata.tier"]
    assert report.pushed_keys == ["source_name"]
    assert report.pushed_down is False and report.post_filtered is False


def test_defensive_recheck_and_two_tuples() -> None:
    f = {"source_name": "linear", "metadata.tier": "gold"}
    report = build_report(f, channels={"vector": (["source_name"], [])}, defensive_recheck=True)
    assert report.post_filtered_keys == ["metadata.tier"]
    assert report.unenforced_keys == []
    assert report.post_filtered is True


def test_no_channels_is_vacuously_pushed() -> None:
    report = build_report({"title": "a"}, {})
    assert (report.pushed_keys, report.pushed_down, report.post_filtered) == (["title"], True, False)


channel_strategy = st.tuples(
    st.lists(st.sampled_from(["title", "source_name", "occurred_at", "metadata.a", "metadata.a.b", "extra"])),
    st.lists(st.sampled_from(["title", "source_name", "occurred_at", "metadata.a", "metadata.b", "extra"])),
    st.booleans(),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=filters, pages=st.dictionaries(st.sampled_from(["vector", "keyword", "graph"]), channel_strategy))
def test_partition_invariant(obj: dict[str, Any], pages: dict[str, Any]) -> None:
    try:
        f = RecallFilter.parse(obj)
    except RecallFilterValidationError:
        assume(False)
        return
    report = build_report(f, pages)
    buckets = [report.pushed_keys, report.post_filtered_keys, report.unenforced_keys]
    flat = [k for bucket in buckets for k in bucket]
    assert sorted(flat) == sorted(f.leaf_keys())  # every key exactly once
    assert report.pushed_down == (not report.post_filtered_keys and not report.unenforced_keys)
    for name, (pushed, _post, rechecked) in pages.items():
        channel = report.channels[name]
        assert set(channel.pushed_keys).isdisjoint(channel.post_filtered_keys)
        assert set(channel.pushed_keys) <= set(pushed)
        if rechecked:
            assert set(channel.pushed_keys) | set(channel.post_filtered_keys) == set(f.leaf_keys())
    if all(
        rechecked or set(f.leaf_keys()) <= set(pushed) | set(post)
        for pushed, post, rechecked in pages.values()
    ):
        assert report.unenforced_keys == []
    if report.unenforced_keys:
        assert any(not rechecked for _, _, rechecked in pages.values())
