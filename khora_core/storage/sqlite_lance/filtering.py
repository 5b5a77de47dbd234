"""Recall filters on the embedded store: compile once to SQLite, re-check in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from khora_core.models import Chunk

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter


@dataclass
class PreparedFilter:
    """A parsed filter with its SQLite compilation (boolean SQL over chunk alias ``c``)."""

    filter: RecallFilter
    sql: str
    params: list[Any] = field(default_factory=list)
    pushed_keys: list[str] = field(default_factory=list)
    residual_keys: list[str] = field(default_factory=list)

    @property
    def pushes(self) -> bool:
        return bool(self.pushed_keys) and self.sql.strip().upper() not in ("1", "TRUE")

    def matches(self, chunk: Chunk) -> bool:
        """The defensive in-memory re-check of the full filter."""
        return bool(self.filter.matches(chunk.filter_record()))


def prepare(filter: Any) -> PreparedFilter | None:
    """Parse and compile ``filter`` for SQLite; ``None`` when there is no filter.

    Raises:
        RecallFilterValidationError: the filter is malformed.
        RecallFilterUnsupportedError: a predicate cannot be enforced here.
    """
    if filter is None:
        return None
    from khora_core.filters import RecallFilter, compile_sqlite

    parsed = filter if isinstance(filter, RecallFilter) else RecallFilter.parse(filter)
    compiled = compile_sqlite(parsed, table_alias="c")
    return PreparedFilter(
        filter=parsed,
        sql=compiled.sql or "1",
        params=list(compiled.params or []),
        pushed_keys=list(compiled.pushed_keys),
        residual_keys=list(compiled.residual_keys),
    )
