"""Shared fixtures.

Service fixtures (``postgres_dsn``, ``neo4j_settings``) come from ``tests/fixtures/``: each
uses ``KHORA_DATABASE_URL`` / ``KHORA_NEO4J_URL`` when set (``make test`` starts both
servers and sets them) and otherwise starts the server itself. With ``CI`` or
``KHORA_REQUIRE_SERVICES`` set, a missing service fails the run instead of skipping.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = ["tests.fixtures.postgres", "tests.fixtures.neo4j", "tests.fixtures.stacks"]

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "reference_pgvector: compares with langchain-postgres (a dev-only package that pins pgvector "
        "< 0.4; not installed where the wheel is tested as users install it)",
    )
    # ``namespace_id=`` is the deprecated alias of ``namespace=`` on Khora / KhoraSync
    # (khora_core.arguments.namespace_alias): a test that still passes it fails here. The
    # tests of the alias itself catch the warning with ``pytest.warns``.
    deprecated_alias = r".*\(namespace_id=\.\.\.\) is deprecated; pass namespace="
    config.addinivalue_line("filterwarnings", f"error:{deprecated_alias}:DeprecationWarning")


# -- recorded LLM traffic (pytest-recording / vcrpy) ----------------------------------------


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, object]:
    # Match on the body: vcrpy's default ignores it and would replay an old answer for a new
    # prompt. Auth headers never reach a cassette.
    return {
        "match_on": ["method", "scheme", "host", "port", "path", "query", "body"],
        "filter_headers": ["authorization", "api-key", "x-api-key", "openai-organization", "cookie"],
        "decode_compressed_response": True,
    }


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail loudly, with the fix, when a cassette-backed test has no cassette."""
    if item.get_closest_marker("vcr") is None or os.environ.get("KHORA_RECORDING"):
        return
    if item.config.getoption("--record-mode", default="none") not in (None, "none"):
        return
    from pytest_recording.plugin import get_default_cassette_name

    module = Path(str(item.fspath))
    name = get_default_cassette_name(getattr(item, "cls", None), item.name)
    cassette = module.parent / "cassettes" / module.stem / f"{name}.yaml"
    if not cassette.exists():
        pytest.fail(
            f"No recorded LLM cassette for {item.nodeid} (expected {cassette.relative_to(Path.cwd()) if cassette.is_relative_to(Path.cwd()) else cassette}). "
            "Re-record the cassettes from a real model with `make cassettes`.",
            pytrace=False,
        )
