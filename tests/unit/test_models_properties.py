"""``Entity.properties`` / ``Relationship.properties``: JSON values under string keys, checked
when a record is built, with an ``InvalidInputError`` that names the key."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from khora_core.errors import InvalidInputError
from khora_core.models import Entity, Relationship


def _rel(properties: dict) -> Relationship:
    return Relationship(
        id="r",
        namespace_id="n",
        source_id="a",
        target_id="b",
        type="T",
        document_id="d",
        properties=properties,
    )


def test_json_values_are_kept_and_tuples_become_lists() -> None:
    props = {"n": 1, "f": 0.5, "s": "x", "b": True, "none": None, "list": [1, {"k": "v"}], "t": (1, 2)}
    assert Entity(id="e", namespace_id="n", name="x", properties=props).properties == {**props, "t": [1, 2]}
    assert Entity(id="e", namespace_id="n", name="x").properties == {}
    assert _rel({"a": {"b": [None]}}).properties == {"a": {"b": [None]}}


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"when": datetime(2024, 1, 1, tzinfo=timezone.utc)}, r"property 'when' is of type datetime"),
        ({"tags": {"a", "b"}}, r"property 'tags' is of type set"),
        ({"v": [1.0, math.nan]}, r"property 'v'\[1\] is nan"),
        ({"m": {"inner": object()}}, r"property 'm'\['inner'\] is of type object"),
        ({"m": {1: "x"}}, r"has the key 1"),
        ({1: "x"}, r"keys must be non-empty strings"),
        ({"": "x"}, r"keys must be non-empty strings"),
    ],
)
def test_non_json_properties_raise_invalid_input(properties: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Entity(id="e", namespace_id="n", name="x", properties=properties)
    with pytest.raises(InvalidInputError, match=message):
        _rel(properties)


def test_properties_must_be_a_dict() -> None:
    with pytest.raises(InvalidInputError, match="must be a dict"):
        Entity(id="e", namespace_id="n", name="x", properties=[("a", 1)])  # type: ignore[arg-type]
