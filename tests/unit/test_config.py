from __future__ import annotations

import pytest
from pydantic import ValidationError

from khora_core.config import KhoraConfig, VectorCypherConfig
from khora_core.errors import ConfigError


def test_env_overrides_yaml_and_keywords_override_env(tmp_path, monkeypatch):
    cfg_file = tmp_path / "khora.yaml"
    cfg_file.write_text(
        "query:\n  diversity_lambda: 0.7\n  enable_bm25_channel: false\nvectorcypher:\n  skeleton:\n    core_ratio: 0.25\n"
    )
    monkeypatch.setenv("KHORA_QUERY_ENABLE_BM25_CHANNEL", "true")
    cfg = KhoraConfig.load(cfg_file)
    assert cfg.query.diversity_lambda == 0.7
    assert cfg.query.enable_bm25_channel is True
    assert cfg.vectorcypher.skeleton_core_ratio == 0.25
    cfg2 = KhoraConfig.load(cfg_file, query={"enable_bm25_channel": False})
    assert cfg2.query.enable_bm25_channel is False


def test_spec_env_names(monkeypatch):
    monkeypatch.setenv("KHORA_DATABASE_URL", "postgresql://u:p@h/db")
    monkeypatch.setenv("KHORA_NEO4J_URL", "bolt://h:7687")
    monkeypatch.setenv("KHORA_STORAGE_NEO4J_PASSWORD", "pw")
    cfg = KhoraConfig()
    assert cfg.storage.database_url == "postgresql://u:p@h/db"
    assert cfg.storage.neo4j_url == "bolt://h:7687"
    assert cfg.storage.neo4j_password == "pw"


def test_spec_defaults():
    vc = VectorCypherConfig()
    assert (vc.fusion_rrf_k, vc.fusion_vector_weight, vc.fusion_graph_weight) == (60, 0.6, 0.4)
    assert vc.skeleton_core_ratio == 0.5
    with pytest.raises(ValidationError):
        VectorCypherConfig(skeleton_core_ratio=1.5)


def test_bad_setting_is_config_error():
    with pytest.raises(ConfigError):
        KhoraConfig(query={"diversity_lambda": "not-a-number"})
    with pytest.raises(ConfigError):
        KhoraConfig(query={"no_such_knob": 1})
