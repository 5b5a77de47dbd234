"""``KhoraRetriever`` argument checks: all happen before any storage is touched."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from khora_core import KhoraSync
from khora_core.errors import ConfigError, InvalidInputError, RecallFilterUnsupportedError
from khora_core.models import SearchMode
from khora_integrations.langchain import KhoraRetriever


@pytest.fixture
def retriever(tmp_path) -> KhoraRetriever:
    # Never opened: every call below fails validation first.
    return KhoraRetriever(kb=KhoraSync(data_dir=str(tmp_path / "never-opened")), namespace="ns")


def test_defaults(retriever):
    assert (retriever.k, retriever.mode, retriever.abstain, retriever.min_similarity) == (
        4,
        SearchMode.HYBRID,
        "flag",
        0.0,
    )


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"abstain": "ignore"}, {"mode": "telepathy"}])
def test_constructor_validates(tmp_path, kwargs):
    with pytest.raises(ValidationError):
        KhoraRetriever(kb=KhoraSync(data_dir=str(tmp_path)), namespace="ns", **kwargs)


def test_unknown_call_arguments_are_rejected(retriever):
    with pytest.raises(InvalidInputError, match="top_k"):
        retriever.invoke("q", top_k=3)
    with pytest.raises(InvalidInputError, match="k must be"):
        retriever.invoke("q", k=0)


def test_unsupported_filters_fail_before_any_search(retriever):
    with pytest.raises(RecallFilterUnsupportedError):
        retriever.invoke("q", filter={"title": {"$like": "a%"}})
    with pytest.raises(ConfigError, match="not open"):
        retriever.kb.aio.engine  # noqa: B018 - nothing was opened
