"""The query complexity router: SIMPLE / MODERATE / COMPLEX, graph depth and fusion weights.

Heuristics (the spec's table, in order of strength):

========================  ==========  ==========================================
pattern                   complexity  examples
========================  ==========  ==========================================
comparison keywords       COMPLEX     "compare", "difference between", "versus",
                                      "Which came first, X or Y?"
multi-hop keywords        COMPLEX     "through", "chain", "path", "in common"
nested references         COMPLEX     a chain of "of" ("the birthplace of the author
                                      of X"), of possessives ("X's manager's team"),
                                      a thing picked out by a relative clause ("the
                                      team that shipped X"), an attribute of a role
                                      holder ("What nationality is the director of X?")
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

The patterns are read from the question's words in one pass (``_tokens``), over its first
``ROUTING_CHARS`` characters, so routing takes time linear in the question and bounded.

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
from itertools import pairwise
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


#: Routing reads at most this many characters of a question: the patterns below are about
#: how a question is phrased, which its opening shows; a pasted document is not re-read.
ROUTING_CHARS = 2000

_TOKEN_RE = re.compile(r"[^\W_][\w'’.&-]*|\?")
_COMPARISON_WORDS = frozenset("compare compared compares comparing comparison versus vs vs. contrast".split())
_COMPARISON_PAIRS = frozenset(
    [("difference", "between"), ("differences", "between"), ("similarities", "between"), ("differ", "from")]
)
_MULTI_HOP_WORDS = frozenset("through chain path paths via indirectly".split())
_QUESTION_WORDS = frozenset("what which who whom whose where when how".split())
_AUX = frozenset("is was are were did does do has have had".split())
_RELATIVE = frozenset("that who which whose where".split())
_ARTICLES = frozenset("the a an".split())
#: "the name of X's child" is X's child: a name or title is a label, not a further hop; and
#: "one of X's hobbies" picks from X's hobbies (a partitive), it does not follow a relation.
_NAMING = frozenset("name names title titles one some any each all none most many several few".split())
_DETERMINERS = _ARTICLES | frozenset("another any each every some".split())
#: What follows "is"/"was" in a reduced relative clause: "the country X is from", "the
#: company X is part of", "the town X was born in".
_CLAUSE_TAILS = frozenset("from in of at on for part located based born".split())
_RELATIONSHIP_WORDS = frozenset(
    "relationship connection collaborate collaborated collaborates collaborating collaboration "
    "colleague colleagues teammate teammates".split()
)
_RELATIONSHIP_PAIRS = frozenset(
    [
        ("related", "to"),
        ("relate", "to"),
        ("relates", "to"),
        ("related", "with"),
        ("connected", "with"),
        ("connected", "to"),
        ("work", "with"),
        ("works", "with"),
        ("worked", "with"),
        ("working", "with"),
        ("associated", "with"),
        ("linked", "to"),
        ("report", "to"),
        ("reports", "to"),
        ("partnered", "with"),
        ("involved", "with"),
        ("involved", "in"),
        ("friends", "with"),
        ("team", "members"),
        ("team", "member"),
    ]
)


def _tokens(query: str) -> tuple[list[str], list[str]]:
    """The question's words as written and lower-cased (one linear pass)."""
    raw = _TOKEN_RE.findall(query[:ROUTING_CHARS])
    return raw, [t.lower() for t in raw]


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


def _comparison(raw: list[str], low: list[str]) -> str | None:
    for i, word in enumerate(low):
        if word in _COMPARISON_WORDS:
            return word
        if i + 1 < len(low) and (word, low[i + 1]) in _COMPARISON_PAIRS:
            return f"{word} {low[i + 1]}"
    # an alternative question: "Which came first, X or Y?"
    if low and low[0] in ("which", "who", "whom") and "or" in low[2:] and low[-1] == "?":
        return "which ... or ...?"
    return None


def _multi_hop(raw: list[str], low: list[str]) -> str | None:
    """Wording that reaches an answer through another thing (the spec's "nested
    references"): multi-hop words, a chain of "of" ("the birthplace of the author of X"), a
    chain of possessives ("X's manager's team") or of a possessive and "of" ("X's city of
    birth", "the spouse of X's director"), a thing picked out by a relative clause ("the
    team that shipped X"), or by a reduced one ("the country X is from"), and an attribute
    of a role holder ("What nationality is the director of X?", "Where was the author of X
    born?")."""
    for i, word in enumerate(low):
        if word in _MULTI_HOP_WORDS:
            return word
        if word == "in" and i + 1 < len(low) and low[i + 1] == "common":
            return "in common"
    ofs = [i for i, w in enumerate(low) if w == "of" and not (i > 0 and low[i - 1] in _NAMING)]
    for a, b in pairwise(ofs):
        between = [w for w in low[a + 1 : b] if w not in _ARTICLES]
        if 1 <= len(between) <= 2:
            return "of ... of"
    possessive = [i for i, w in enumerate(low) if w.endswith(("'s", "’s"))]
    for a, b in pairwise(possessive):
        if b - a <= 2:
            return "'s ... 's"
    for p in possessive:
        # "What is X's style of dance?" asks for the phrase itself (one hop); "Which hotel is
        # in X's city of birth?" asks about what it names
        asked_itself = (
            len(low) > 2
            and low[0] in _QUESTION_WORDS
            and low[1] in _AUX
            and (p == 2 or (p == 4 and low[2] in _NAMING and low[3] == "of"))
        )
        if "of" in low[p + 1 : p + 4] and not asked_itself:
            return "'s ... of"
        before = low[max(0, p - 4) : p]
        if "of" in before and not _NAMING.intersection(before):
            return "of ... 's"
        # an event of a named thing's relation: "When did X's mother die?"
        words = [w for w in low[p + 1 :] if w != "?"]
        if len(low) > 1 and low[1] in ("did", "does", "do") and len(words) == 2:
            return f"did ... 's {words[0]} {words[1]}"
    for i in range(1, len(low) - 2):
        # a reduced relative clause: "the <noun> <Name> is/was <from|in|part|born...>"
        if low[i - 1] in _ARTICLES and not _capitalised(raw[i]) and _capitalised(raw[i + 1]):
            j = i + 1
            while j < len(raw) and _capitalised(raw[j]):
                j += 1
            if j + 1 < len(low) and low[j] in ("is", "was", "are", "were") and low[j + 1] in _CLAUSE_TAILS:
                return f"the {low[i]} ... {low[j]} {low[j + 1]}"
    for i in range(2, len(low) - 1):
        # "the <noun> that/who/which/whose/where <verb ...>", after the question's opening
        if low[i - 2] in _DETERMINERS and low[i] in _RELATIVE and not _capitalised(raw[i - 1]):
            if i + 1 < len(low) and low[i + 1] != "?":
                return f"the {low[i - 1]} {low[i]}"
    # an attribute of a role holder: "<wh> <noun> <aux> the <role> of", "<wh> <aux> the <role> of ... <verb>?"
    if len(low) >= 5 and low[0] in _QUESTION_WORDS:
        j = 2 if low[1] not in _AUX else 1
        if j == 2 and low[2] in _AUX and low[3] in _ARTICLES and len(low) > 5 and low[5] == "of":
            if not _capitalised(raw[4]):
                return f"{low[0]} {low[1]} ... the {low[4]} of"
        if j == 1 and low[0] in ("where", "when") and low[2] in _ARTICLES and len(low) > 4 and low[4] == "of":
            tail = [w for w in low[5:] if w != "?"]
            if not _capitalised(raw[3]) and tail and not _capitalised(raw[len(raw) - 1 - (low[-1] == "?")]):
                return f"{low[0]} ... the {low[3]} of ... {tail[-1]}"
    return None


def _relationship(low: list[str]) -> str | None:
    for i, word in enumerate(low):
        if word in _RELATIONSHIP_WORDS:
            return word
        if i + 1 < len(low) and (word, low[i + 1]) in _RELATIONSHIP_PAIRS:
            return f"{word} {low[i + 1]}"
        if word == "know" and low[i + 1 : i + 3] == ["each", "other"]:
            return "know each other"
    return None


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
    raw, low = _tokens(query)
    if found := _comparison(raw, low):
        reasons.append(f"comparison:{found}")
    if found := _multi_hop(raw, low):
        reasons.append(f"multi_hop:{found}")
    distinct = {m.casefold() for m in entity_mentions if m.strip()}
    if len(distinct) >= 2:
        reasons.append(f"entities:{len(distinct)}")
    if reasons:
        return QueryComplexity.COMPLEX, reasons
    if found := _relationship(low):
        return QueryComplexity.MODERATE, [f"relationship:{found}"]
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
