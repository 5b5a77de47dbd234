"""The recall's pushdown report: every filter key in exactly one bucket."""

from __future__ import annotations

from khora_core.filters import RecallFilter
from khora_core.retrieval.pushdown import pushdown_report


def test_no_filter_no_report() -> None:
    assert pushdown_report(None, {"vector": ([], [])}) is None


def test_fully_pushed_with_defensive_recheck() -> None:
    f = RecallFilter.parse({"source_name": "linear"})
    r = pushdown_report(f, {"vector": (["source_name"], [])})
    assert r is not None
    assert r["pushed_down"] and r["post_filtered"]
    assert (r["pushed_keys"], r["post_filtered_keys"], r["unenforced_keys"]) == (["source_name"], [], [])
    assert r["channels"]["vector"] == {"pushed_keys": ["source_name"], "post_filtered_keys": []}


def test_graph_rechecks_metadata() -> None:
    f = RecallFilter.parse({"source_name": "linear", "metadata.tier": {"$in": ["gold"]}})
    r = pushdown_report(
        f,
        {"vector": (["source_name", "metadata.tier"], []), "graph": (["source_name"], ["metadata.tier"])},
    )
    assert r is not None
    assert r["pushed_keys"] == ["source_name"]
    assert r["post_filtered_keys"] == ["metadata.tier"]
    assert r["unenforced_keys"] == [] and not r["pushed_down"]
