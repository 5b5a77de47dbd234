"""Named read-path presets build valid configurations with the settings they document."""

from __future__ import annotations

import pytest

from khora_core import KhoraConfig
from khora_core.retrieval.presets import PRESETS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_a_config(name: str) -> None:
    cfg = KhoraConfig(**PRESETS[name].config_kwargs())
    for key, value in PRESETS[name].query.items():
        assert getattr(cfg.query, key) == value
    for key, value in PRESETS[name].vectorcypher.items():
        assert getattr(cfg.vectorcypher, key) == value


def test_sharp_preset_settings_and_default_left_alone() -> None:
    cfg = KhoraConfig(**PRESETS["sharp"].config_kwargs())
    assert cfg.query.enable_bm25_channel and not cfg.query.enable_diversity
    assert (cfg.vectorcypher.fusion_rrf_k, cfg.vectorcypher.fusion_keyword_weight) == (5, 1.5)
    default = KhoraConfig(**PRESETS["default"].config_kwargs())
    assert default.vectorcypher.fusion_rrf_k == 60 and default.query.enable_diversity
