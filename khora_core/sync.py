"""The one bridge from sync code to Khora's async core.

Coroutines run on a private event loop in a daemon thread, so a sync call works the same
from a script, from inside a running loop (Jupyter) and from LangChain/LlamaIndex sync
entry points. Every sync path in Khora goes through :func:`run_sync`.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="khora-sync-loop", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
    """Run ``coro`` to completion on Khora's background loop and return its result.

    Objects that hold connections (pools, drivers) are bound to the loop they were created
    on; a ``KhoraSync`` creates its ``Khora`` through this bridge so they all live on the
    same background loop.
    """
    loop = _background_loop()
    if threading.current_thread() is _thread:
        raise RuntimeError("run_sync() called from Khora's own loop thread; await the coroutine instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


def _shutdown() -> None:
    if _loop is not None and not _loop.is_closed():
        _loop.call_soon_threadsafe(_loop.stop)


atexit.register(_shutdown)
