"""The public API's shape: one name for the namespace argument, typed errors from ``recall``,
and a ``KhoraSync`` whose methods are written out with ``Khora``'s signatures."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from khora_core import Khora, KhoraConfig, KhoraSync
from khora_core.errors import InvalidInputError, NamespaceNotFoundError

# -- KhoraSync mirrors Khora ----------------------------------------------------------------

#: Khora's async lifecycle methods and their sync names; they return the object itself.
_LIFECYCLE = {"open": "open", "aclose": "close"}


def _public_async_methods() -> list[str]:
    return sorted(
        name
        for name, fn in inspect.getmembers(Khora, inspect.iscoroutinefunction)
        if not name.startswith("_")
    )


def _first_paragraph(doc: str | None) -> str:
    return " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())


def test_khora_has_the_public_async_methods_this_test_expects() -> None:
    # Guards the parity test below against an empty or shrunken list.
    names = _public_async_methods()
    assert {"recall", "remember", "remember_batch", "forget", "list_entities", "open", "aclose"} <= set(names)


@pytest.mark.parametrize("name", _public_async_methods())
def test_khora_sync_method_is_written_out_with_the_async_signature(name: str) -> None:
    sync_name = _LIFECYCLE.get(name, name)
    assert hasattr(KhoraSync, sync_name), f"KhoraSync lacks {sync_name}() (Khora.{name})"
    async_fn = inspect.unwrap(getattr(Khora, name))
    sync_fn = inspect.unwrap(getattr(KhoraSync, sync_name))
    # Written out on KhoraSync itself (not generated from Khora's function), and synchronous.
    assert sync_fn.__qualname__ == f"KhoraSync.{sync_name}"
    assert not inspect.iscoroutinefunction(sync_fn)
    a_sig, s_sig = inspect.signature(async_fn), inspect.signature(sync_fn)
    if name in _LIFECYCLE:
        assert list(s_sig.parameters.values()) == list(a_sig.parameters.values())
    else:
        assert s_sig == a_sig, f"KhoraSync.{sync_name}{s_sig} != Khora.{name}{a_sig}"
    assert _first_paragraph(sync_fn.__doc__) == _first_paragraph(async_fn.__doc__)


def test_khora_sync_takes_khoras_constructor_arguments() -> None:
    a_sig = inspect.signature(Khora.__init__)
    s_sig = inspect.signature(KhoraSync.__init__)
    assert s_sig == a_sig


def test_khora_sync_has_no_public_methods_khora_lacks() -> None:
    extra = {
        name
        for name, _ in inspect.getmembers(KhoraSync, inspect.isfunction)
        if not name.startswith("_") and name != "close" and not hasattr(Khora, name)
    }
    assert not extra


# -- behaviour on a real embedded store ------------------------------------------------------


def _config(tmp_path: Path) -> KhoraConfig:
    return KhoraConfig(storage={"data_dir": str(tmp_path / "data"), "database_url": None})


@pytest.fixture
async def kb(tmp_path: Path, embedder: Any) -> AsyncIterator[Khora]:
    async with Khora(config=_config(tmp_path), embedder=embedder) as kb:
        await kb.create_namespace("api", namespace="api")
        await kb.remember("Maya Chen is the chief technology officer of Northwind Robotics.", namespace="api")
        yield kb


@pytest.fixture
def sync_kb(tmp_path: Path, embedder: Any) -> Iterator[KhoraSync]:
    with KhoraSync(config=_config(tmp_path), embedder=embedder) as kb:
        kb.create_namespace("api", namespace="api")
        kb.remember("Maya Chen is the chief technology officer of Northwind Robotics.", namespace="api")
        yield kb


async def test_every_namespace_method_takes_namespace(kb: Khora) -> None:
    for name, fn in inspect.getmembers(Khora, inspect.iscoroutinefunction):
        params = inspect.signature(fn).parameters
        assert "namespace_id" not in params, f"Khora.{name} still names its argument namespace_id"
    ns = await kb.get_namespace("api")
    assert ns.namespace_id == "api"
    assert (await kb.stats(namespace="api")).documents == 1
    entities = await kb.list_entities(namespace="api")
    assert (await kb.search_entities("Maya Chen", namespace="api")) is not None
    if entities:
        assert await kb.get_entity(entities[0].id, namespace="api") is not None
        await kb.find_related_entities(entities[0].id, namespace="api")


async def test_namespace_id_is_a_deprecated_alias_that_warns_at_the_caller(kb: Khora) -> None:
    expected = [e.id for e in await kb.list_entities(namespace="api")]
    with pytest.warns(
        DeprecationWarning, match=r"Khora\.list_entities\(namespace_id=\.\.\.\) is deprecated"
    ) as rec:
        got = [e.id for e in await kb.list_entities(namespace_id="api")]
    assert got == expected
    assert rec[0].filename == __file__, "the warning should point at the calling line"
    with pytest.warns(DeprecationWarning, match="Khora.create_namespace"):
        ns = await kb.create_namespace("other", namespace_id="other")
    assert ns.namespace_id == "other"
    with pytest.warns(DeprecationWarning, match="Khora.get_namespace"):
        assert (await kb.get_namespace(namespace_id="other")).namespace_id == "other"
    with pytest.warns(DeprecationWarning, match="Khora.recall"):
        res = await kb.recall("Who is the chief technology officer?", namespace_id="api", mode="keyword")
    assert res.chunks


async def test_namespace_and_namespace_id_together_are_refused(kb: Khora) -> None:
    with pytest.raises(InvalidInputError, match="both namespace= and its deprecated alias"):
        await kb.list_entities(namespace="api", namespace_id="api")


async def test_the_new_spelling_raises_no_warning(kb: Khora) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        await kb.list_entities(namespace="api")
        await kb.recall("Who is the chief technology officer?", namespace="api", mode="keyword")


def test_khora_sync_runs_the_async_methods_and_takes_the_alias(sync_kb: KhoraSync) -> None:
    assert sync_kb.get_namespace("api").namespace_id == "api"
    res = sync_kb.recall("Who is the CTO of Northwind Robotics?", namespace="api", limit=1)
    assert res.chunks and "Maya Chen" in res.chunks[0].content
    with pytest.warns(DeprecationWarning, match=r"KhoraSync\.list_entities") as rec:
        sync_kb.list_entities(namespace_id="api")
    assert rec[0].filename == __file__
    with pytest.raises(NamespaceNotFoundError):
        sync_kb.stats("missing")


# -- recall's errors are typed ---------------------------------------------------------------

_WHEN = datetime(2024, 1, 1, tzinfo=timezone.utc)

BAD_RECALLS: list[tuple[str, dict[str, Any]]] = [
    ("filter with start_time", {"filter": {"source_name": "x"}, "start_time": _WHEN}),
    ("filter with end_time", {"filter": {"source_name": "x"}, "end_time": _WHEN}),
    ("min_similarity text", {"min_similarity": "high"}),
    ("min_similarity nan", {"min_similarity": math.nan}),
    ("min_similarity above 1", {"min_similarity": 1.5}),
    ("min_similarity bool", {"min_similarity": True}),
    ("limit 0", {"limit": 0}),
    ("limit text", {"limit": "10"}),
    ("unknown mode", {"mode": "fastest"}),
    ("now not a date", {"now": "yesterday"}),
    ("start_time out of range", {"start_time": datetime(1, 1, 1, tzinfo=timezone.utc)}),
    ("namespace not a string", {"namespace": 42}),
    ("namespace empty", {"namespace": ""}),
]


@pytest.mark.parametrize(("case", "kwargs"), BAD_RECALLS, ids=[c for c, _ in BAD_RECALLS])
async def test_recall_raises_invalid_input_for_bad_arguments(
    kb: Khora, case: str, kwargs: dict[str, Any]
) -> None:
    kwargs = {"namespace": "api", **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # start_time/end_time are deprecated
        with pytest.raises(InvalidInputError):
            await kb.recall("Who is the CTO?", **kwargs)


async def test_start_time_is_deprecated_and_warns_at_the_caller(kb: Khora) -> None:
    with pytest.warns(DeprecationWarning, match=r"recall\(start_time=, end_time=\) is deprecated") as rec:
        await kb.recall("Who is the CTO?", namespace="api", start_time=_WHEN)
    assert rec[0].filename == __file__, "the warning should point at the calling line"


async def test_recall_still_answers_with_good_arguments(kb: Khora) -> None:
    # The checks above refuse bad input only: the edges of each range are accepted.
    res = await kb.recall(
        "Who is the chief technology officer?", namespace="api", min_similarity=-1, limit=1, mode="keyword"
    )
    assert res.chunks
    res = await kb.recall("Who is the CTO?", namespace="api", min_similarity=0, now=_WHEN)
    assert res.chunks
