"""``storage.neo4j.params.quiet``: list parameters with a short ``repr``, values unchanged."""

from __future__ import annotations

from khora_core.storage.neo4j.params import quiet


def test_lists_and_tuples_keep_their_items_and_show_only_their_length() -> None:
    rows = [{"id": "a", "embedding": [0.25] * 384}, {"id": "b", "embedding": None}]
    params = {"ns": "n1", "rows": rows, "ids": ("x", "y"), "limit": 5, "scores": {"a": 1.0}}
    out = quiet(params)
    assert out == {**params, "ids": ["x", "y"]}
    assert isinstance(out["rows"], list) and out["rows"] is not rows
    assert (
        repr(out) == "{'ns': 'n1', 'rows': <list of 2>, 'ids': <list of 2>, 'limit': 5, 'scores': {'a': 1.0}}"
    )
    assert params["rows"] is rows and params["ids"] == ("x", "y")  # the caller's dict is untouched
