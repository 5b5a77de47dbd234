"""``docs/configuration.md`` lists every setting, and matches what ``tools.config_docs`` writes."""

from __future__ import annotations

from tools.config_docs import OUTPUT, render, undocumented


def test_every_setting_has_a_description() -> None:
    assert undocumented() == [], "add a '#:' comment above each of these fields in khora_core/config.py"


def test_configuration_page_is_current() -> None:
    assert OUTPUT.read_text(encoding="utf-8") == render(), "run: python -m tools.config_docs"
