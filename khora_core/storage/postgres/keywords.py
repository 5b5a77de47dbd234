"""BM25 keyword search over chunks, computed in PostgreSQL, and the shared tokenizer.

Indexing (done by ``PostgresDocumentStore.write_rows``): each chunk's text goes through
``tokenize`` (words, stopwords removed, Porter stems); ``khora_terms`` gets one row per
distinct term with its frequency ``tf`` and the chunk's length in terms (``chunk_terms``,
also ``khora_chunks.term_count``). Terms stored before stemming are stemmed once by ``migrate``.

Scoring (Okapi BM25, Lucene's non-negative idf), per namespace, over the distinct query
terms ``t``::

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(c) = sum_t idf(t) * tf(t,c) * (k1 + 1) / (tf(t,c) + k1 * (1 - b + b * len(c) / avglen))

``N`` is the namespace's chunk count, ``df`` the number of its chunks holding ``t``, and
``avglen`` their mean length. ``df`` is counted by the query; ``N`` and the total
length come from ``khora_chunk_totals``, which triggers on ``khora_chunks`` keep in the
writing transaction (migration 4), so all three are exact without reading every chunk row
of the namespace. A filter narrows the candidates, not the statistics.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import TYPE_CHECKING

from khora_core.config import StorageConfig
from khora_core.errors import InvalidInputError
from khora_core.models import ChunkHit
from khora_core.storage.porter import stem
from khora_core.storage.postgres.pool import PgPool
from khora_core.storage.postgres.rows import CHUNK_COLUMNS, chunk_from_row
from khora_core.storage.protocols import SearchPage

if TYPE_CHECKING:
    from khora_core.filters import RecallFilter

__all__ = ["STOPWORDS", "PostgresKeywordIndex", "term_frequencies", "tokenize"]

_WORD_RE = re.compile(r"\w+", re.UNICODE)
#: Longer tokens are noise (hashes, base64); they would bloat the term table.
_MAX_TERM_CHARS = 64
#: A small English stopword list: frequent function words that only add noise to BM25.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    """.split()
)


def tokenize(text: str) -> list[str]:
    """Text -> BM25 terms: NFKC-normalised, lowercased unicode words, stopwords removed,
    Porter-stemmed (``storage.porter``, the stemmer of the embedded store's FTS5 index).

    The one tokenizer for indexing and querying, so both sides always agree.
    """
    words = _WORD_RE.findall(unicodedata.normalize("NFKC", text).lower())
    return [stem(w) for w in words if w not in STOPWORDS and len(w) <= _MAX_TERM_CHARS]


def term_frequencies(text: str) -> Counter[str]:
    """``term -> count`` for ``text`` (see ``tokenize``)."""
    return Counter(tokenize(text))


_MAX_FETCH = 10_000

# ``stats`` and ``df`` are MATERIALIZED: inlined, the planner may put the namespace-wide
# aggregate inside the join's nested loop and recompute it once per posting. Each posting
# carries its chunk's length (``chunk_terms``, schema 6), so an unfiltered search reads the
# postings' primary key and nothing else; ``{join}`` brings in the chunk rows only for a
# filter to test.
_BM25_SQL = """
WITH stats AS MATERIALIZED (
    SELECT coalesce(sum(chunks), 0)::float8 AS n,
           coalesce(sum(terms)::float8 / nullif(sum(chunks), 0), 0)::float8 AS avglen
    FROM khora_chunk_totals WHERE namespace_id = $1
), df AS MATERIALIZED (
    SELECT term, count(*)::float8 AS df
    FROM khora_terms WHERE namespace_id = $1 AND term = ANY($2::text[])
    GROUP BY term
), scored AS (
    SELECT t.chunk_id,
           sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
               * t.tf * ($3::float8 + 1)
               / (t.tf + $3::float8 * (1 - $4::float8 + $4::float8 * t.chunk_terms / greatest(s.avglen, 1e-9))))
               AS score
    FROM khora_terms t
    JOIN df ON df.term = t.term
    {join}
    CROSS JOIN stats s
    WHERE t.namespace_id = $1 AND t.term = ANY($2::text[]) AND ({filter})
    GROUP BY t.chunk_id
    ORDER BY score DESC, t.chunk_id
    LIMIT $5
)
SELECT {columns}, scored.score AS score
FROM scored JOIN khora_chunks c ON c.namespace_id = $1 AND c.id = scored.chunk_id
ORDER BY scored.score DESC, c.id
"""
_FILTER_JOIN = "JOIN khora_chunks c ON c.namespace_id = t.namespace_id AND c.id = t.chunk_id"


class PostgresKeywordIndex:
    """``KeywordIndex`` on PostgreSQL: BM25 over ``khora_terms`` (see the module docstring).

    Args:
        pool: the opened database.
        config: ``bm25_k1`` and ``bm25_b`` come from here (default: the pool's config).
    """

    def __init__(self, pool: PgPool, config: StorageConfig | None = None) -> None:
        self._pool = pool
        cfg = config or pool.config
        self.k1 = float(cfg.bm25_k1)
        self.b = float(cfg.bm25_b)

    async def search(
        self,
        namespace_id: str,
        query: str,
        *,
        limit: int,
        filter: RecallFilter | None = None,
    ) -> SearchPage:
        """Top ``limit`` chunks of the namespace by BM25 for ``query``.

        ``score`` is the BM25 score. A filter is compiled into the query; what it could not
        push down is checked in memory, fetching more rows when that check drops some.

        Raises:
            InvalidInputError: ``limit`` is negative.
            StorageUnavailableError: the server is unreachable.
        """
        if limit < 0:
            raise InvalidInputError(f"limit must be >= 0, got {limit}")
        terms = sorted(set(tokenize(query)))
        if limit == 0 or not terms:
            return _empty_page(filter)
        where, params, pushed, residual_keys, needs_check = "TRUE", [], [], [], False
        if filter is not None:
            from khora_core.filters import compile_postgres

            compiled = compile_postgres(filter, table_alias="c", param_start=6)
            where, params = compiled.sql, list(compiled.params)
            pushed, residual_keys = list(compiled.pushed_keys), list(compiled.residual_keys)
            needs_check = compiled.residual is not None
        sql = _BM25_SQL.format(
            filter=where, columns=CHUNK_COLUMNS, join=_FILTER_JOIN if filter is not None else ""
        )
        fetch = limit * 4 if needs_check else limit
        while True:
            rows = await self._pool.fetch(sql, namespace_id, terms, self.k1, self.b, fetch, *params)
            hits: list[ChunkHit] = []
            for row in rows:
                chunk = chunk_from_row(row)
                # Defensive re-check, always: the SQL should already enforce the pushed part.
                if filter is not None and not filter.matches(chunk.filter_record()):
                    continue
                hits.append(ChunkHit(chunk=chunk, score=float(row["score"]), rank=len(hits) + 1))
                if len(hits) == limit:
                    break
            if len(hits) >= limit or len(rows) < fetch or fetch >= _MAX_FETCH:
                return SearchPage(hits=hits, pushed_keys=pushed, post_filtered_keys=residual_keys)
            fetch = min(fetch * 4, _MAX_FETCH)


def _empty_page(filter: RecallFilter | None) -> SearchPage:
    if filter is None:
        return SearchPage()
    from khora_core.filters import compile_postgres

    compiled = compile_postgres(filter, table_alias="c", param_start=6)
    return SearchPage(pushed_keys=list(compiled.pushed_keys), post_filtered_keys=list(compiled.residual_keys))
