"""The Cypher of the Neo4j graph store's lookups: entities by name, words or chunk,
relationships among entities, mentions, time nodes, listings and counts.

Every statement is parameterised and names the namespace in each ``MATCH``; statements
that return many rows return them as one list (``RETURN collect({...}) AS rows``, read
with ``search.rows_of``).
"""

from __future__ import annotations

from khora_core.storage.neo4j.mention_rank import rank_prefix, rank_suffix
from khora_core.storage.neo4j.pair_rank import pair_key
from khora_core.storage.neo4j.records import ENTITY_FIELDS, entity_ref_list

__all__ = [
    "CHUNK_GRAPH",
    "CHUNK_MENTIONS",
    "COUNT_ENTITIES",
    "COUNT_RELATIONSHIPS",
    "DOCUMENTS_FOR_ENTITIES",
    "ENTITIES_FOR_CHUNKS",
    "ENTITY_REFS_FOR_CHUNKS",
    "FIND_BY_NAME",
    "FIND_BY_WORDS",
    "LIST_ENTITIES",
    "LIST_RELATIONSHIPS",
    "LIST_RELATIONSHIPS_OF",
    "RELATIONSHIPS_AMONG_PER_PAIR",
    "TIME_NODES",
]

LIST_ENTITIES = f"""
MATCH (e:Entity {{namespace_id: $ns}})
WHERE $type IS NULL OR e.type = $type
WITH e ORDER BY e.mention_count DESC, e.name_lower, e.id SKIP $offset LIMIT $limit
RETURN collect({{e: e {ENTITY_FIELDS}}}) AS rows
"""

FIND_BY_NAME = """
OPTIONAL MATCH (n:Entity {namespace_id: $ns}) WHERE n.name_lower IN $keys
WITH collect(n) AS by_name
OPTIONAL MATCH (a:EntityAlias {namespace_id: $ns})-[:ALIAS_OF]->(x:Entity {namespace_id: $ns})
WHERE a.key IN $keys
WITH by_name, collect(x) AS by_alias
UNWIND by_name + by_alias AS e
WITH DISTINCT e
RETURN collect({e: properties(e)}) AS rows
"""

# One full-text query per text; other namespaces' hits are dropped before the limit.
FIND_BY_WORDS = f"""
UNWIND range(0, size($queries) - 1) AS i
CALL {{
  WITH i
  CALL db.index.fulltext.queryNodes($index, $queries[i]) YIELD node, score
  WITH node, score WHERE node.namespace_id = $ns
  RETURN node ORDER BY score DESC, size(node.name), node.id LIMIT $k
}}
RETURN i, collect(node {ENTITY_FIELDS}) AS entities
"""


def _entities_for_chunks(projection: str) -> str:
    """Each chunk's entities, most mentions in it first, as ``projection`` of ``e``."""
    return f"""
MATCH (e:Entity {{namespace_id: $ns}})-[m:MENTIONED_IN]->(c:Chunk {{namespace_id: $ns}})
WHERE c.id IN $ids
WITH c.id AS chunk_id, e, m ORDER BY m.count DESC, e.name_lower, e.id
WITH chunk_id, collect({projection}) AS entities
RETURN collect({{chunk_id: chunk_id, entities: entities}}) AS rows
"""


ENTITIES_FOR_CHUNKS = _entities_for_chunks(f"e {ENTITY_FIELDS}")
ENTITY_REFS_FOR_CHUNKS = _entities_for_chunks(entity_ref_list("e"))

# The relationships among the entity nodes ``kept``: at most $per_pair between one ordered
# pair (heaviest, then by id), and the $max_relationships heaviest of those, as
# ``relationships``. Each pair is read from its cheap side, and falls in exactly one of three
# cases: a target with at most $dense incoming RELATES edges expands them; a source with at
# most $dense outgoing ones expands them toward the other targets; between two entities with
# more, the pair rank index is sought $per_pair entries deep (``pair_rank``; a hint, since on
# a store with few relationships the planner's statistics chose a scan). Expanding the
# sources alone read a hub's whole degree and every parallel edge of a pair of hubs: 137,000
# edges for the 30 entities of a result on a 100,000-chunk store. Each case hands on the
# weight and id it sorts by: the index seek takes them from the index (weight = -rank_weight),
# so only the relationships returned are read whole (a 40,000-chunk store, 80 recalls'
# statements: 6,837 db hits a statement against 10,937 when the sorts read them from each
# relationship, wall p50 19.4 against 22.9 ms, identical results).
_AMONG_PER_PAIR = f"""
CALL {{
  WITH kept
  UNWIND kept AS x
  WITH x, COUNT {{ (x)-[:RELATES]->() }} AS out_degree, COUNT {{ (x)<-[:RELATES]-() }} AS in_degree
  RETURN collect(CASE WHEN 0 < in_degree <= $dense THEN x END) AS few_in,
         collect(CASE WHEN in_degree > $dense THEN x END) AS many_in,
         collect(CASE WHEN 0 < out_degree <= $dense THEN x END) AS few_out,
         collect(CASE WHEN out_degree > $dense THEN x END) AS many_out
}}
CALL {{
  WITH kept, few_in, many_in, few_out, many_out
  CALL {{
    WITH kept, few_in
    UNWIND few_in AS t
    MATCH (s)-[r:RELATES]->(t)
    WHERE s IN kept
    RETURN s, t, r, r.weight AS w, r.id AS rid
    UNION ALL
    WITH few_out, many_in
    UNWIND few_out AS s
    MATCH (s)-[r:RELATES]->(t)
    WHERE t IN many_in
    RETURN s, t, r, r.weight AS w, r.id AS rid
    UNION ALL
    WITH many_out, many_in
    UNWIND many_out AS s
    UNWIND many_in AS t
    CALL {{
      WITH s, t
      MATCH ()-[r:RELATES]->()
      USING INDEX SEEK r:RELATES(pair, rank_weight, id)
      WHERE r.pair = {pair_key("$ns", "s.id", "t.id")} AND r.rank_weight IS NOT NULL AND r.id IS NOT NULL
      WITH r ORDER BY r.pair, r.rank_weight, r.id LIMIT $per_pair
      RETURN r, -r.rank_weight AS w, r.id AS rid
    }}
    RETURN s, t, r, w, rid
  }}
  WITH s, t, r, w, rid ORDER BY w DESC, rid
  WITH s, t, collect([r, w, rid])[..$per_pair] AS heaviest
  UNWIND heaviest AS h
  WITH h[0] AS r, h[1] AS w, h[2] AS rid, s, t ORDER BY w DESC, rid LIMIT $max_relationships
  RETURN collect({{r: properties(r), source_id: s.id, target_id: t.id}}) AS relationships
}}
"""

#: Relationships with both ends among the entities ``$ids`` (``_AMONG_PER_PAIR``).
RELATIONSHIPS_AMONG_PER_PAIR = f"""
MATCH (s:Entity {{namespace_id: $ns}}) WHERE s.id IN $ids
WITH collect(s) AS kept
{_AMONG_PER_PAIR}
RETURN relationships AS rows
"""

# ENTITIES_FOR_CHUNKS, the ranking of ``storage.chunk_graph.rank_chunk_entities`` and
# RELATIONSHIPS_AMONG_PER_PAIR over the kept entities, in one statement: recall's assembly
# reads the graph in one round trip instead of two (11,763 passages, interleaved: VECTOR
# recall's assembly 4.2 ms p50 instead of 6.1, HYBRID 6.3 instead of 7.6; the same results
# for 400 and 300 questions). Each chunk's entities travel as ``EntityRef`` lists, all a
# recall result shows of them; only the kept ones travel whole (a result's ten chunks name about
# 140 entities, and decoding them whole cost about 1.7 ms of client CPU per recall).
CHUNK_GRAPH = f"""
MATCH (e:Entity {{namespace_id: $ns}})-[m:MENTIONED_IN]->(c:Chunk {{namespace_id: $ns}})
WHERE c.id IN $ids
WITH c.id AS chunk_id, e, m ORDER BY m.count DESC, e.name_lower, e.id
WITH chunk_id, collect(e) AS entities
WITH collect({{chunk_id: chunk_id, entities: entities}}) AS per_chunk
CALL {{
  WITH per_chunk
  UNWIND per_chunk AS p
  UNWIND p.entities AS e
  WITH e, count(DISTINCT p.chunk_id) AS seen
  ORDER BY seen DESC, coalesce($scores[e.id], 0.0) DESC, e.mention_count DESC, e.name, e.id
  LIMIT $max_entities
  RETURN collect(e) AS kept
}}
{_AMONG_PER_PAIR}
RETURN [{{
  chunks: [p IN per_chunk | {{chunk_id: p.chunk_id, entities: [x IN p.entities | {entity_ref_list("x")}]}}],
  kept: [x IN kept | x {ENTITY_FIELDS}],
  relationships: relationships
}}] AS rows
"""

DOCUMENTS_FOR_ENTITIES = """
MATCH (e:Entity {namespace_id: $ns})-[:MENTIONED_IN]->(c:Chunk {namespace_id: $ns})
WHERE e.id IN $ids
WITH e.id AS id, collect(DISTINCT c.document_id) AS documents
RETURN collect({id: id, documents: documents}) AS rows
"""

# Each entity's ``$per`` most-mentioning chunks (count, then chunk id, as the embedded store
# orders them): a seek on the entity's prefix of the mention rank index, stopped after
# ``$per`` entries, so a popular entity costs ``$per`` edges, not its degree
# (``mention_rank``). The prefix names the namespace: mentions never cross namespaces. Each
# mention comes back as the rest of its key (count and chunk id), taken from the index, so
# neither the edge nor the chunk is read (2,953 chunks, 107 recalls' calls: 733 db hits
# instead of 2,584 for the largest, the same results).
CHUNK_MENTIONS = f"""
UNWIND $ids AS eid
CALL {{
  WITH eid
  MATCH ()-[m:MENTIONED_IN]->()
  USING INDEX SEEK m:MENTIONED_IN(rank)
  WHERE m.rank STARTS WITH {rank_prefix("$ns", "eid")}
  WITH eid, m.rank AS rank ORDER BY rank LIMIT $per
  RETURN collect({rank_suffix("rank", "$ns", "eid")}) AS top
}}
WITH eid, top WHERE size(top) > 0
RETURN collect({{eid: eid, top: top}}) AS rows
"""

TIME_NODES = """
MATCH (c:Chunk {namespace_id: $ns, id: $id})-[:AT_TIME]->(t)
WHERE t.namespace_id = $ns
WITH t.key AS key ORDER BY key
RETURN collect({key: key}) AS rows
"""

LIST_RELATIONSHIPS = """
MATCH (s:Entity {namespace_id: $ns})-[r:RELATES]->(t:Entity {namespace_id: $ns})
WHERE $types IS NULL OR r.type IN $types
WITH r, s, t ORDER BY r.weight DESC, r.id LIMIT $limit
RETURN collect({r: properties(r), source_id: s.id, target_id: t.id}) AS rows
"""

LIST_RELATIONSHIPS_OF = """
UNWIND $ids AS id
MATCH (:Entity {namespace_id: $ns, id: id})-[r:RELATES]-(:Entity {namespace_id: $ns})
WHERE $types IS NULL OR r.type IN $types
WITH DISTINCT r ORDER BY r.weight DESC, r.id LIMIT $limit
RETURN collect({r: properties(r), source_id: startNode(r).id, target_id: endNode(r).id}) AS rows
"""

COUNT_ENTITIES = "MATCH (e:Entity {namespace_id: $ns}) RETURN count(e) AS n"
GRAPH_DOCUMENT_IDS = "MATCH (c:Chunk {namespace_id: $ns}) RETURN DISTINCT c.document_id AS d"
COUNT_RELATIONSHIPS = (
    "MATCH (:Entity {namespace_id: $ns})-[r:RELATES]->(:Entity {namespace_id: $ns}) RETURN count(r) AS n"
)

#: Labels a namespace owns, deleted in slices so one namespace never needs one huge transaction.
