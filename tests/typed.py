"""Comparing stored values with what was given, types included."""

from __future__ import annotations

from typing import Any


def typed(value: Any) -> Any:
    """``value`` with each leaf paired with its type name, so that a comparison tells a float
    from an int (``1e16 == 10**16``) and ``True`` from ``1``."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [typed(v) for v in value]
    return (type(value).__name__, value)
