"""The query complexity router: SIMPLE / MODERATE / COMPLEX, graph depth and fusion weights.

Heuristics (the spec's table, in order of strength):

========================  ==========  ==========================================
pattern                   complexity  examples
========================  ==========  ==========================================
comparison keywords       COMPLEX     "compare", "difference between", "versus"
multi-hop keywords        COMPLEX     "through", "chain", "path", nested references
                                      ("the X of the Y that", "the X where the Y of")
bridge wording            COMPLEX     an attribute of a role holder ("What nationality
                                      is the director of ..."), a reduced relative
                                      clause ("the country Ana Lind is from"), a
                                      named thing's place or group ("Ana Lind's
                                      hometown"), the asked-about thing in place
                                      ("... an album by a singer from what state?")
2+ entity mentions        COMPLEX     "How are Alice and Bob connected?"
relationship keywords     MODERATE    "related to", "connected with", "works with"
otherwise                 SIMPLE      "What is the company policy?"
========================  ==========  ==========================================

Per complexity (``VectorCypherConfig`` defaults):

========  =====  ==============  =========  ======================
route     depth  entry entities  use graph  fusion vector / graph
========  =====  ==============  =========  ======================
SIMPLE    0      5               no         0.8 / 0.2
MODERATE  1      10              yes        0.6 / 0.4
COMPLEX   2-3    15              yes        0.4 / 0.6
========  =====  ==============  =========  ======================

Entry entities scale with ``graph_max_entry_entities`` (half, 1x, 1.5x). COMPLEX uses
``graph_default_depth`` (at least 2), one more for explicit multi-hop wording, never past 3.

Channel selection (decided here, used by ``channels.select_channels``): with routing on,
``HYBRID`` runs the graph channel only for MODERATE and COMPLEX questions, because the
spec routes SIMPLE lookups vector-only and a graph ranking over a single loosely matched
entity only adds noise to a lookup the vector channel already answers. ``GRAPH`` mode
always runs the graph channel (a SIMPLE question then walks depth 0, or deeper by the
adaptive rule below).

Adaptive depth (``adaptive_depth``): with many entry entities (``>= high`` threshold) the
walk stays at depth 1; with few (``<= low`` threshold) it goes one hop deeper; the result is
capped by ``min(graph_max_depth, QueryConfig.max_graph_depth)``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from khora_core.config import VectorCypherConfig

__all__ = [
    "QueryComplexity",
    "RoutingDecision",
    "adaptive_depth",
    "classify",
    "route",
]


class QueryComplexity(str, enum.Enum):
    """How much graph work a question needs."""

    SIMPLE = "simple"  # vector-only search (fastest)
    MODERATE = "moderate"  # shallow graph (depth 1)
    COMPLEX = "complex"  # full VectorCypher (depth 2-3)


_COMPARISON_RE = re.compile(
    r"\b(compare[sd]?|comparing|comparison|difference(?:s)?\s+between|differ(?:s|ent)?\s+from|"
    r"versus|vs\.?|similarities\s+between|contrast)\b",
    re.I,
)
_MULTI_HOP_RE = re.compile(
    r"\b(through|chain|path|paths|via|indirectly|in\s+common|linked\s+through)\b"
    # nested reference: "the manager of the team that ...", "the X of the Y who ..."
    r"|\bthe\s+\w+\s+of\s+the\s+\w+(?:\s+\w+)?\s+(?:that|who|which|whose|where)\b"
    # a relative clause that names another thing: "the startup where the lead of X worked"
    r"|\bthe\s+\w+\s+(?:that|who|which|whose|where)\s+(?:\w+\s+){0,3}?the\s+\w+\s+of\b"
    # possessive chains: "Alice's manager's team"
    r"|\b\w+'s\s+\w+'s\b"
    # a noun defined by a relative clause: "the country where the river is found",
    # "the association which published the journal"
    r"|\bthe\s+(?:\w+\s+){1,3}?(?:where|which|that|who|whose)\s+(?:[\w.'-]+\s+){0,3}?"
    r"(?:\w+(?:ed|s)|born|made|held|written|built|known|sung|shot|won)\b"
    # chained "of": "the place of birth of the performer of the song"
    r"|\bof\s+(?:the\s+)?(?:\w+\s+){1,2}?of\b"
    # a relation of a named thing: "Lothair II's mother", "the film's director"
    r"|\b[A-Z][\w.-]*(?:\s+[A-Z][\w.-]*)*'s\s+(?:\w+\s+)?(?:mother|father|wife|husband|spouse|son|daughter|"
    r"parent|sibling|brother|sister|grandfather|grandmother|director|author|founder|owner|producer|composer|"
    r"performer|creator|manager|successor|predecessor|employer|headquarters|capital|birthplace|"
    r"hometown|city|country|state|town|nationality|team|band|label|club|company|university|school|party)\b"
    # an attribute of a role holder: "What nationality is the director of ...",
    # "Where was the author of ... born" (not "What is the capital of ...", one hop)
    r"|\b(?:what|which)\s+\w+\s+(?:is|was|are|were|did|does)\s+the\s+\w+\s+of\b"
    r"|\b(?:where|when)\s+(?:is|was|were|did|does)\s+the\s+\w+\s+of\s+.+?\b(?:born|founded|formed|"
    r"die|died|buried|raised|educated|established)\b"
    # a reduced relative clause around a name: "the country Dai Jitao is from",
    # "the company Novair International Airways is part of"
    r"|\bthe\s+\w+\s+(?-i:[A-Z])[\w.'-]*(?:\s+(?-i:[A-Z])[\w.'-]*)*\s+(?:is|was|are|were)\s+"
    r"(?:\w+\s+)?(?:from|in|of|at|part|located|based|born)\b"
    # the asked-about thing in place, after a first fact: "... is the third album by a
    # singer from what state?", "... is based where?"
    r"|^\s*(?:\S+\s+){3,}?.*\b(?:from|on|in|by|at|of|for)\s+(?:what|which)\s+\w+\s*\?\s*$"
    r"|^\s*(?:\S+\s+){3,}?.*\b(?:\w+ed|born|based|located|founded)\s+(?:where|when)\s*\?\s*$",
    re.I,
)
_RELATIONSHIP_RE = re.compile(
    r"\b(related\s+to|relate[sd]?\s+to|relationship|connected\s+(?:with|to)|connection|"
    r"works?\s+with|worked\s+with|working\s+with|who\s+works|collaborat\w*|associated\s+with|"
    r"linked\s+to|reports?\s+to|partner(?:s|ed)?\s+with|involved\s+(?:with|in)|know[s]?\s+each\s+other|"
    r"team\s+(?:members?|mates?)|colleagues?|friends?\s+with)\b",
    re.I,
)


@dataclass(frozen=True)
class RoutingDecision:
    """What the router decided for one question.

    Attributes:
        complexity: SIMPLE, MODERATE or COMPLEX.
        reasons: the patterns that fired, for ``engine_info["routing"]``.
        depth: graph depth before the adaptive rule.
        entry_entities: how many entry entities the graph channel starts from.
        use_graph: whether HYBRID runs the graph channel.
        weights: base fusion weights per channel (``vector``, ``graph``, ``keyword``).
        max_depth: the cap for adaptive depth.
    """

    complexity: QueryComplexity
    reasons: tuple[str, ...] = ()
    depth: int = 0
    entry_entities: int = 5
    use_graph: bool = False
    weights: dict[str, float] = field(default_factory=dict)
    max_depth: int = 4

    def as_dict(self) -> dict[str, Any]:
        return {
            "complexity": self.complexity.value,
            "reasons": list(self.reasons),
            "depth": self.depth,
            "entry_entities": self.entry_entities,
            "use_graph": self.use_graph,
            "weights": dict(self.weights),
        }


def classify(query: str, entity_mentions: Sequence[str] = ()) -> tuple[QueryComplexity, list[str]]:
    """Classify a question with the heuristic table above.

    Args:
        query: the question.
        entity_mentions: the entity mentions found in it (``understand``).

    Returns:
        The complexity and the reasons that fired.
    """
    reasons: list[str] = []
    if m := _COMPARISON_RE.search(query):
        reasons.append(f"comparison:{m.group(0).lower()}")
    if m := _MULTI_HOP_RE.search(query):
        reasons.append(f"multi_hop:{m.group(0).lower()}")
    distinct = {m.casefold() for m in entity_mentions if m.strip()}
    if len(distinct) >= 2:
        reasons.append(f"entities:{len(distinct)}")
    if reasons:
        return QueryComplexity.COMPLEX, reasons
    if m := _RELATIONSHIP_RE.search(query):
        return QueryComplexity.MODERATE, [f"relationship:{m.group(0).lower()}"]
    return QueryComplexity.SIMPLE, ["default:simple"]


def _weights(complexity: QueryComplexity, config: VectorCypherConfig) -> dict[str, float]:
    if complexity is QueryComplexity.SIMPLE:
        vector, graph = config.fusion_simple_vector_weight, config.fusion_simple_graph_weight
    elif complexity is QueryComplexity.COMPLEX:
        vector, graph = config.fusion_complex_vector_weight, config.fusion_complex_graph_weight
    else:
        vector, graph = config.fusion_vector_weight, config.fusion_graph_weight
    return {"vector": vector, "graph": graph, "keyword": config.fusion_keyword_weight}


def route(
    query: str,
    config: VectorCypherConfig,
    *,
    entity_mentions: Sequence[str] = (),
    max_graph_depth: int | None = None,
    complexity: QueryComplexity | None = None,
    reasons: Sequence[str] = (),
    weights: dict[str, float] | None = None,
) -> RoutingDecision:
    """Route a question.

    Args:
        query: the question.
        config: the engine config (fusion weights, depths, entry entities).
        entity_mentions: entity mentions found in the question.
        max_graph_depth: ``QueryConfig.max_graph_depth``; caps every depth.
        complexity: a complexity decided elsewhere (the LLM understanding); skips the
            heuristics.
        reasons: reasons to record with a given ``complexity``.
        weights: per-query fusion weights proposed elsewhere (LLM); override the table's
            entries they name.

    Returns:
        The routing decision.
    """
    cap = min(
        config.graph_max_depth, max_graph_depth if max_graph_depth is not None else config.graph_max_depth
    )
    if not config.routing_enabled:
        # Routing off: every question takes the MODERATE-default path with the
        # configured depth, and the graph channel always runs.
        return RoutingDecision(
            complexity=QueryComplexity.MODERATE,
            reasons=("routing_disabled",),
            depth=min(config.graph_default_depth, cap),
            entry_entities=config.graph_max_entry_entities,
            use_graph=True,
            weights={**_weights(QueryComplexity.MODERATE, config), **(weights or {})},
            max_depth=cap,
        )
    if complexity is None:
        complexity, found = classify(query, entity_mentions)
        reasons = tuple(found)
    base_entry = max(1, config.graph_max_entry_entities)
    if complexity is QueryComplexity.SIMPLE:
        depth, entry, use_graph = 0, max(1, base_entry // 2), False
    elif complexity is QueryComplexity.MODERATE:
        depth, entry, use_graph = 1, base_entry, True
    else:
        depth = min(max(config.graph_default_depth, 2), 3)
        if any(r.startswith("multi_hop") for r in reasons):
            depth = min(depth + 1, 3)
        entry, use_graph = base_entry + base_entry // 2, True
    return RoutingDecision(
        complexity=complexity,
        reasons=tuple(reasons),
        depth=min(depth, cap),
        entry_entities=entry,
        use_graph=use_graph,
        weights={**_weights(complexity, config), **(weights or {})},
        max_depth=cap,
    )


def adaptive_depth(depth: int, n_entry_entities: int, config: VectorCypherConfig, *, max_depth: int) -> int:
    """Adjust the graph depth to how many entry entities were found.

    ``>= adaptive_depth_high_entity_threshold`` entities: depth 1 (many entities fanning out
    deep explode the candidates without adding signal). ``<= adaptive_depth_low_entity_threshold``:
    one hop deeper (sparse entry points need a wider walk). Capped by ``max_depth``.
    """
    if not config.adaptive_depth_enabled:
        return min(depth, max_depth)
    if n_entry_entities >= config.adaptive_depth_high_entity_threshold:
        depth = min(depth, 1)
    elif 0 < n_entry_entities <= config.adaptive_depth_low_entity_threshold:
        depth = depth + 1
    return max(0, min(depth, max_depth))
