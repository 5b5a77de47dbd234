"""Named read-path presets: one word builds the settings they document, and anything set
explicitly still wins."""

from __future__ import annotations

import pytest

from khora_core import KhoraConfig
from khora_core.errors import ConfigError
from khora_core.retrieval.presets import PRESETS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_a_config(name: str) -> None:
    cfg = KhoraConfig(preset=name)
    assert cfg.preset == PRESETS[name].name
    for key, value in PRESETS[name].query.items():
        assert getattr(cfg.query, key) == value
    for key, value in PRESETS[name].vectorcypher.items():
        assert getattr(cfg.vectorcypher, key) == value
    assert KhoraConfig(**PRESETS[name].config_kwargs()) == cfg


def test_memory_preset_settings_and_default_left_alone() -> None:
    cfg = KhoraConfig(preset="memory")
    assert cfg.query.enable_bm25_channel and not cfg.query.enable_diversity
    assert (cfg.vectorcypher.fusion_rrf_k, cfg.vectorcypher.fusion_keyword_weight) == (5, 3.0)
    assert KhoraConfig(preset="sharp") == cfg.model_copy(update={"preset": "memory"})  # the old name
    default = KhoraConfig()
    assert default.preset == "default"
    assert default.vectorcypher.fusion_rrf_k == 60 and default.query.enable_diversity


def test_explicit_settings_and_the_environment_override_a_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = KhoraConfig(preset="memory", query={"enable_diversity": True}, vectorcypher={"fusion_rrf_k": 9})
    assert cfg.query.enable_diversity and cfg.query.enable_bm25_channel
    assert (cfg.vectorcypher.fusion_rrf_k, cfg.vectorcypher.fusion_keyword_weight) == (9, 3.0)
    monkeypatch.setenv("KHORA_QUERY_ENABLE_BM25_CHANNEL", "false")
    assert not KhoraConfig(preset="memory").query.enable_bm25_channel
    monkeypatch.setenv("KHORA_PRESET", "memory")
    assert KhoraConfig().preset == "memory"
    assert KhoraConfig(preset="default").preset == "default"  # a keyword beats the environment


def test_an_unknown_preset_is_a_config_error_that_lists_the_names() -> None:
    with pytest.raises(ConfigError, match="memory"):
        KhoraConfig(preset="sharpest")
