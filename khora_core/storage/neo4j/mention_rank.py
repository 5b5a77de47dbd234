"""The mention rank: each entity's mentions in index order, best first.

The graph channel asks for an entity's most-mentioning chunks (``chunk_mentions``: count
first, then chunk id). Sorting an entity's ``MENTIONED_IN`` edges for that reads all of
them, so a popular entity (tens of thousands of mentions in a large store) costs its whole
degree on every question that names it. Instead every ``MENTIONED_IN`` edge carries
``rank``, one string that sorts in that order, under a range index (``khora_mention_rank``):

    <len(namespace)>:<namespace><len(entity id)>:<entity id><9999999999 - count><chunk id>

The length-prefixed namespace and entity id (``keys.length_prefixed``) make the entity's
part a prefix that starts no other entity's keys; the count follows as ten digits counting
down, then the chunk id. One entity's best ``n`` mentions are then an index seek on its
prefix that stops after ``n`` entries, whatever the entity's degree, and the key itself
holds the count and the chunk id, so the seek reads neither the edges nor the chunks
(``read_rank_suffix``). Graphs written before
the rank existed get theirs when the store is opened (``ensure_mention_rank``).
"""

from __future__ import annotations

import neo4j

from khora_core.storage.neo4j.keys import backfill_statement, backfill_then_index, length_prefixed

__all__ = [
    "MENTION_RANK_INDEX",
    "ensure_mention_rank",
    "rank_key",
    "rank_prefix",
    "rank_suffix",
    "read_rank_suffix",
]

#: The range index over ``MENTIONED_IN.rank``.
MENTION_RANK_INDEX = "khora_mention_rank"

#: Counts are written as this minus the count (ten digits for any count below 9e9), so a
#: larger count sorts first.
_COUNT_TOP = 9_999_999_999
_COUNT_DIGITS = len(str(_COUNT_TOP))


def rank_prefix(namespace: str, entity_id: str) -> str:
    """Cypher for the prefix shared by one entity's rank keys; the arguments are Cypher
    expressions (variable or parameter names), never user text."""
    return length_prefixed(namespace, entity_id)


def rank_key(namespace: str, entity_id: str, count: str, chunk_id: str) -> str:
    """Cypher for one mention's rank key (arguments as for :func:`rank_prefix`)."""
    return f"{rank_prefix(namespace, entity_id)} + toString({_COUNT_TOP} - {count}) + {chunk_id}"


def rank_suffix(rank: str, namespace: str, entity_id: str) -> str:
    """Cypher for what follows the entity's prefix in the rank key ``rank`` (the count
    counting down, then the chunk id), read back by :func:`read_rank_suffix`; the arguments
    are Cypher expressions, never user text."""
    return f"substring({rank}, size({rank_prefix(namespace, entity_id)}))"


def read_rank_suffix(suffix: str) -> tuple[str, int]:
    """``(chunk id, count)`` from a :func:`rank_suffix` value: a mention is read from the
    rank index alone, without its edge or its chunk."""
    return suffix[_COUNT_DIGITS:], _COUNT_TOP - int(suffix[:_COUNT_DIGITS])


_BACKFILL = backfill_statement(
    "(e:Entity)-[m:MENTIONED_IN]->(c:Chunk)",
    "m.rank IS NULL",
    "e, m, c",
    "m.rank = " + rank_key("e.namespace_id", "e.id", "m.count", "c.id"),
)

_CREATE_INDEX = f"CREATE INDEX {MENTION_RANK_INDEX} IF NOT EXISTS FOR ()-[m:MENTIONED_IN]-() ON (m.rank)"


async def ensure_mention_rank(driver: neo4j.AsyncDriver, *, database: str) -> None:
    """Give every ``MENTIONED_IN`` edge its rank, then create the index, unless it exists."""
    await backfill_then_index(driver, database=database, index=_CREATE_INDEX, backfill=_BACKFILL)
