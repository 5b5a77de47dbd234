"""``FilterPushdownReport``: what each channel did with the filter, for ``engine_info["filter"]``.

The rule (also in ``docs/filters.md``): each distinct constraint-leaf key of the filter
lands in exactly one of three lists.

For one channel, a key is *pushed* when the channel's backend query enforced it and the
channel did not also list it as post-filtered; *post-filtered* when it was not pushed but
the channel listed it as post-filtered or re-checked the whole filter in memory; otherwise
*unenforced*: the channel returned candidates without checking it.

Across channels a key is ``unenforced`` if any channel left it unenforced, else
``post_filtered`` if any channel post-filtered it, else ``pushed`` (this includes the
vacuous case of no channels). ``pushed_down`` is true when nothing is post-filtered or
unenforced; ``post_filtered`` is true when any in-memory check ran, the defensive re-check
included. ``unenforced_keys`` is empty whenever every channel pushed or re-checked each key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from khora_core.filters.ast import RecallFilter

__all__ = ["ChannelPushdown", "FilterPushdownReport", "build_report"]


class ChannelPushdown(BaseModel):
    """One channel's share of the report."""

    model_config = ConfigDict(frozen=True)

    pushed_keys: list[str] = Field(default_factory=list)
    post_filtered_keys: list[str] = Field(default_factory=list)


class FilterPushdownReport(BaseModel):
    """Where each filter key was enforced; see the module docstring for the rule."""

    model_config = ConfigDict(frozen=True)

    pushed_down: bool
    post_filtered: bool
    pushed_keys: list[str] = Field(default_factory=list)
    post_filtered_keys: list[str] = Field(default_factory=list)
    unenforced_keys: list[str] = Field(default_factory=list)
    channels: dict[str, ChannelPushdown] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, as stored in ``RecallResult.engine_info["filter"]``."""
        return self.model_dump()

    def to_dict(self) -> dict[str, Any]:
        """Same as ``as_dict``."""
        return self.model_dump()


def build_report(
    f: RecallFilter | Mapping[str, Any],
    channel_pages: Mapping[str, tuple[Any, ...]] | None = None,
    *,
    channels: Mapping[str, tuple[Any, ...]] | None = None,
    defensive_recheck: bool = False,
) -> FilterPushdownReport:
    """Build the report for one recall.

    Args:
        f: the filter of the recall (a dict is parsed).
        channel_pages: per channel name, ``(pushed_keys, post_filtered_keys, rechecked)``:
            the ``SearchPage`` keys the channel reported and whether its hits were
            re-checked against the full filter in memory. A 2-tuple means
            ``rechecked=False``.
        channels: the same mapping under another name (for keyword callers).
        defensive_recheck: the pipeline re-checked every candidate of every channel
            against the full filter (same as ``rechecked=True`` on every channel).

    Returns:
        The report. Keys a channel reports that are not in the filter are ignored.

    Raises:
        RecallFilterValidationError: ``f`` is a malformed dict.
    """
    parsed = RecallFilter.parse(f)
    keys = parsed.leaf_keys()
    per_channel: dict[str, ChannelPushdown] = {}
    any_recheck = False
    verdicts: dict[str, set[str]] = {k: set() for k in keys}
    pages = {**(channel_pages or {}), **(channels or {})}
    for name, page in pages.items():
        pushed_in, post_in = page[0], page[1]
        rechecked = defensive_recheck or (len(page) > 2 and bool(page[2]))
        pushed_set, post_set = set(pushed_in), set(post_in)
        any_recheck = any_recheck or bool(rechecked)
        pushed: list[str] = []
        post: list[str] = []
        for key in keys:
            if key in pushed_set and key not in post_set:
                pushed.append(key)
                verdicts[key].add("pushed")
            elif key in post_set or rechecked:
                post.append(key)
                verdicts[key].add("post")
            else:
                verdicts[key].add("unenforced")
        per_channel[name] = ChannelPushdown(pushed_keys=pushed, post_filtered_keys=post)
    unenforced = [k for k in keys if "unenforced" in verdicts[k]]
    post_filtered = [k for k in keys if "post" in verdicts[k] and "unenforced" not in verdicts[k]]
    pushed_keys = [k for k in keys if k not in unenforced and k not in post_filtered]
    return FilterPushdownReport(
        pushed_down=not unenforced and not post_filtered,
        post_filtered=any_recheck or defensive_recheck or bool(post_filtered),
        pushed_keys=pushed_keys,
        post_filtered_keys=post_filtered,
        unenforced_keys=unenforced,
        channels=per_channel,
    )
