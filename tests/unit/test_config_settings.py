"""Every setting does something: each ``KhoraConfig`` field is read by the code it configures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from khora_core.config import KhoraConfig, QueryConfig, VectorCypherConfig

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("khora_core", "khora_integrations")


def _sections() -> dict[str, type[BaseModel]]:
    """Every config model reachable from ``KhoraConfig``, by name."""
    found: dict[str, type[BaseModel]] = {"KhoraConfig": KhoraConfig}
    for field in KhoraConfig.model_fields.values():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            found[model.__name__] = model
    return found


def _attributes_read() -> set[str]:
    """Names read as attributes (``x.name``, ``getattr(x, "name")``) anywhere in the packages.

    ``config.py`` declares the fields and ``presets.py`` only sets them, so neither counts.
    """
    names: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name in {"config.py", "presets.py"} and path.parent.name in {"khora_core", "retrieval"}:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    names.add(node.attr)
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "getattr"
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                ):
                    names.add(str(node.args[1].value))
    return names


def test_every_setting_is_read_somewhere() -> None:
    read = _attributes_read()
    unread = [
        f"{name}.{field}"
        for name, model in _sections().items()
        for field in model.model_fields
        if field not in read
    ]
    assert not unread, f"settings that nothing reads (implement or retire them): {unread}"


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (QueryConfig, "enable_hyde_cypher"),
        (VectorCypherConfig, "fusion_hybrid_alpha"),
        (VectorCypherConfig, "retriever_coherence_weight"),
        (VectorCypherConfig, "retriever_max_chunks"),
    ],
)
def test_retired_settings_load_with_a_deprecation_warning(model: type[BaseModel], name: str) -> None:
    with pytest.warns(DeprecationWarning, match=name):
        config = model(**{name: 1})
    assert name not in type(config).model_fields


def test_retired_setting_in_khora_config_and_yaml(tmp_path: Path) -> None:
    path = tmp_path / "khora.yaml"
    path.write_text("vectorcypher:\n  fusion:\n    hybrid_alpha: 0.7\n    rrf_k: 5\n")
    with pytest.warns(DeprecationWarning, match="fusion_hybrid_alpha"):
        config = KhoraConfig.load(path)
    assert config.vectorcypher.fusion_rrf_k == 5
    with pytest.warns(DeprecationWarning, match="enable_hyde_cypher"):
        config = KhoraConfig(query={"enable_hyde_cypher": True, "enable_bm25_channel": True})
    assert config.query.enable_bm25_channel


def test_retired_environment_variable_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KHORA_QUERY_ENABLE_HYDE_CYPHER", "true")
    with pytest.warns(DeprecationWarning, match="KHORA_QUERY_ENABLE_HYDE_CYPHER"):
        QueryConfig()
