"""The filter pushdown report for ``engine_info["filter"]``.

A thin step over ``khora_core.filters.build_report``: the channels' ``SearchPage`` keys go
in, with ``defensive_recheck=True`` because the pipeline re-checks every candidate of every
channel against the full filter (so ``unenforced_keys`` is empty on every recall).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["pushdown_report"]


def pushdown_report(
    filter: RecallFilter | None,
    channels: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    *,
    defensive_recheck: bool = True,
) -> dict[str, Any] | None:
    """The report dict for a filtered recall (None when there is no filter).

    Args:
        filter: the parsed filter, or None.
        channels: channel name -> (pushed_keys, post_filtered_keys) of the channels that ran.
        defensive_recheck: the pipeline re-checked the whole filter in memory.
    """
    if filter is None:
        return None
    from khora_core.filters.report import build_report

    pages = {name: (list(p), list(q)) for name, (p, q) in channels.items()}
    # Positional: the filters helper's build_report shadows its own ``channels=`` keyword.
    return build_report(filter, pages, defensive_recheck=defensive_recheck).as_dict()
