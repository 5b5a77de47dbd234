"""Statement parameters that the Neo4j driver can log cheaply.

The official driver (5.x and 6.x) builds the text of its debug log line for every
statement, the ``repr`` of all its parameters included, before the logger decides whether
debug logging is on. For a batch of entity rows with their 384-float embeddings, that text
costs more than everything else the client does for the statement (``docs/benchmarks.md``).
A wrapped list reaches the server as the same ``LIST<FLOAT>``; the packer takes any list.

``quiet(params)`` wraps every list-valued parameter in a list whose ``repr`` is its length,
so with debug logging on a statement's log line reads ``'rows': <list of 512>`` instead of
several megabytes of numbers. Every statement that carries data goes through it
(``search.records_of``, ``search.rows_of``, ``write._run``, ``write._single``); the others
take only a namespace and a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["quiet"]


class _QuietList(list):
    """A list whose ``repr`` names its length, not its items."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<list of {len(self)}>"


def quiet(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with each list or tuple value as a ``_QuietList`` (a shallow copy)."""
    return {k: _QuietList(v) if isinstance(v, list | tuple) else v for k, v in params.items()}
