"""BM25 keyword search for the embedded store: SQLite FTS5 over chunk content.

FTS5's ``bm25()`` uses k1=1.2 and b=0.75 (fixed by SQLite, equal to Khora's defaults). The
index is porter-stemmed ``unicode61`` with diacritics folded. User text never reaches the
FTS5 query language: it is cut into word tokens, each token becomes a quoted FTS5 string,
the strings are OR-ed, and the whole expression is bound as a parameter, so ``"``, ``*``,
``NEAR``, ``AND``, ``-``, column filters and the like are just text.

Term statistics (document frequencies, average length) are those of the whole FTS index,
all namespaces together; hits are always restricted to the namespace.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from khora_core.models import ChunkHit
from khora_core.storage.protocols import SearchPage
from khora_core.storage.sqlite_lance.db import Database
from khora_core.storage.sqlite_lance.filtering import PreparedFilter, prepare
from khora_core.storage.sqlite_lance.schema import CHUNK_SELECT, chunk_from_row
from khora_core.storage.words import content_words

_MAX_TERMS = 64
# Dropped from queries (when other words remain): they match almost every chunk, which costs
# time and adds nothing to a BM25 ranking. Same spirit as PostgreSQL's english stop words.
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves""".split()
)


def match_expression(text: str) -> str | None:
    """A safe FTS5 ``MATCH`` expression for free text, or ``None`` when it has no words.

    >>> match_expression('say "hi" OR *x*')
    '"say" OR "hi" OR "x"'
    """
    words = content_words(text, common=_STOPWORDS, limit=_MAX_TERMS)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class Fts5KeywordIndex:
    """``KeywordIndex`` on SQLite FTS5; the filter is pushed into the same query."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def search(self, namespace_id: str, query: str, *, limit: int, filter: Any = None) -> SearchPage:
        """Top ``limit`` chunks by BM25; ``score`` is the positive BM25 score (higher is better)."""
        prepared = prepare(filter)
        page = SearchPage(
            pushed_keys=list(prepared.pushed_keys) if prepared else [],
            post_filtered_keys=list(prepared.residual_keys) if prepared else [],
        )
        expression = match_expression(query)
        if expression is None or limit <= 0:
            return page
        page.hits = await self._db.read_tx(
            self._search, namespace_id, expression, limit, prepared, what="search keywords"
        )
        return page

    @staticmethod
    def _search(
        conn: sqlite3.Connection,
        namespace_id: str,
        expression: str,
        limit: int,
        prepared: PreparedFilter | None,
    ) -> list[ChunkHit]:
        where = "chunks_fts MATCH ? AND c.namespace_id = ?"
        params: list[Any] = [expression, namespace_id]
        if prepared is not None:
            where += f" AND ({prepared.sql})"
            params += prepared.params
        sql = (
            f"SELECT {CHUNK_SELECT}, bm25(chunks_fts) AS rank FROM chunks_fts "
            f"JOIN chunks c ON c.rid = chunks_fts.rowid WHERE {where} "
            "ORDER BY rank, c.rid LIMIT ? OFFSET ?"
        )
        hits: list[ChunkHit] = []
        offset = 0
        page = limit if prepared is None or not prepared.residual_keys else limit * 4
        while True:
            rows = conn.execute(sql, [*params, page, offset]).fetchall()
            for row in rows:
                chunk = chunk_from_row(row)
                if prepared is not None and not prepared.matches(chunk):
                    continue
                hits.append(ChunkHit(chunk=chunk, score=-float(row[-1]), rank=len(hits) + 1))
                if len(hits) == limit:
                    return hits
            if len(rows) < page:
                return hits
            offset += page
            page *= 4
