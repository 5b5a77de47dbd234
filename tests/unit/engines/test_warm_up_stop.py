"""When a warm-up stops: its minimum, its bounds, and the servers' compile share after it."""

from __future__ import annotations

import pytest

from khora_core.engines.vectorcypher.warm_up import SETTLED_SHARE, WARM_UP_MIN_RECALLS, warm_up_stop


def stop(done: int, *, recalls: int = 2000, elapsed_s: float = 1.0, share: float | None = 0.5) -> str | None:
    return warm_up_stop(done=done, recalls=recalls, elapsed_s=elapsed_s, max_s=90.0, compile_share=share)


@pytest.mark.parametrize("share", [None, 0.0, 0.9])
def test_the_minimum_runs_whatever_the_servers_say(share: float | None) -> None:
    assert stop(0, share=share) is None
    assert stop(WARM_UP_MIN_RECALLS - 1, share=share) is None


def test_past_the_minimum_it_goes_on_only_while_the_servers_compile() -> None:
    assert stop(WARM_UP_MIN_RECALLS, share=SETTLED_SHARE) is None
    assert stop(WARM_UP_MIN_RECALLS + 600, share=0.4) is None
    assert stop(WARM_UP_MIN_RECALLS, share=SETTLED_SHARE * 0.99) == "servers_settled"
    # a stack that does not say how long its servers compile stops at the minimum
    assert stop(WARM_UP_MIN_RECALLS, share=None) == "no_compile_reading"


def test_the_bounds_end_it_even_while_the_servers_compile() -> None:
    assert stop(2000, share=0.9) == "recalls"
    assert stop(500, elapsed_s=90.0, share=0.9) == "time"
    # fewer recalls asked than the minimum: exactly those
    assert stop(6, recalls=7, share=None) is None and stop(7, recalls=7, share=None) == "recalls"
    # the time bound holds inside the minimum too
    assert stop(10, elapsed_s=91.0, share=None) == "time"
