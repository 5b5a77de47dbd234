"""Query understanding: intent, entity mentions, time references, complexity, fusion weights.

Two ways, same output (``QueryUnderstanding``):

* heuristics (always available, no I/O): entity mentions are quoted strings, runs of
  capitalised words and acronyms; time references come from ``dates.parse_temporal``;
  complexity and weights from ``router.classify``;
* one LLM call (``understand(..., llm=client, use_llm=True)``) that returns all of it as
  JSON, validated field by field. Any ``LLMError`` or malformed answer falls back to the
  heuristics, and ``fallback_reason`` says why (the pipeline copies it to ``engine_info``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from khora_core.errors import ConfigError, LLMError
from khora_core.retrieval.dates import (
    TemporalReference,
    is_temporal_question,
    parse_temporal,
    wants_recency,
)
from khora_core.retrieval.router import QueryComplexity, classify

if TYPE_CHECKING:
    from khora_core.llm.client import LLMClient

__all__ = ["QueryUnderstanding", "extract_mentions", "understand"]

INTENTS = ("lookup", "relationship", "comparison", "multi_hop", "temporal", "aggregation", "other")

# Capitalised words that start a question or sentence, or name a time, not an entity.
_NOT_ENTITIES = frozenset(
    """a an the and or but if of in on at to for from by with about as is are was were be been
    being do does did done have has had can could would should will shall may might must
    what who whom whose which when where why how whatever whoever tell show list give find
    describe explain summarize summarise compare please i me my we our us you your he she it they
    them his her its their this that these those there here any some all each every no not
    yes hi hello hey ok okay also then so just did doesn't don't isn't wasn't aren't weren't
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday today yesterday tomorrow last next recent latest q1 q2 q3 q4
    ceo cto cfo coo cmo cio vp svp evp hr pm faq""".split()
)
_QUOTED_RE = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|(?<!\w)'([^']{2,80})'(?!\w)")
_CAPS_RE = re.compile(
    r"\b[A-Z][\w&.\-]*(?:'s)?(?:\s+(?:of\s+|de\s+|von\s+|van\s+|&\s+)?[A-Z][\w&.\-]*(?:'s)?)*"
)
_ACRONYM_RE = re.compile(r"\b[A-Z][A-Z0-9]{1,}(?:-\d+)?\b|\b[a-z]+[A-Z]\w*\b")


@dataclass
class QueryUnderstanding:
    """What the engine understood of a question.

    Attributes:
        query: the question.
        intent: one of ``INTENTS``.
        entity_mentions: surface forms of entities named in the question.
        temporal_refs: resolved time references.
        complexity: the router's class.
        complexity_reasons: why.
        fusion_weights: per-query weights proposed by the LLM (None: use the table).
        is_temporal: time matters to the answer ("when", a date, "latest").
        wants_recency: the question asks for recent information.
        source: ``"heuristic"`` or ``"llm"``.
        fallback_reason: why the LLM path fell back to heuristics, if it did.
    """

    query: str
    intent: str = "lookup"
    entity_mentions: list[str] = field(default_factory=list)
    temporal_refs: list[TemporalReference] = field(default_factory=list)
    complexity: QueryComplexity = QueryComplexity.SIMPLE
    complexity_reasons: list[str] = field(default_factory=list)
    fusion_weights: dict[str, float] | None = None
    is_temporal: bool = False
    wants_recency: bool = False
    source: str = "heuristic"
    fallback_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "entity_mentions": list(self.entity_mentions),
            "temporal_refs": [r.as_dict() for r in self.temporal_refs],
            "complexity": self.complexity.value,
            "complexity_reasons": list(self.complexity_reasons),
            "fusion_weights": self.fusion_weights,
            "is_temporal": self.is_temporal,
            "wants_recency": self.wants_recency,
            "source": self.source,
            "fallback_reason": self.fallback_reason,
        }


def _clean_span(span: str) -> str | None:
    words = span.split()
    while words and words[0].lower().removesuffix("'s") in _NOT_ENTITIES:
        words.pop(0)
    while words and words[-1].lower() in {"of", "de", "von", "van", "&"}:
        words.pop()
    text = re.sub(r"'s$", "", " ".join(words).strip(" .-&"))
    if len(text) < 2 or text.lower() in _NOT_ENTITIES:
        return None
    return text


def extract_mentions(query: str) -> list[str]:
    """Entity mentions by heuristics: quoted strings, capitalised runs, acronyms.

    Question words, auxiliaries, months and weekdays at the start of a run are dropped
    ("Does Alice" -> "Alice"); results are distinct, in order of appearance.
    """
    found: list[tuple[int, str]] = []
    covered: list[tuple[int, int]] = []
    for m in _QUOTED_RE.finditer(query):
        text = next(g for g in m.groups() if g)
        found.append((m.start(), text.strip()))
        covered.append(m.span())
    for regex in (_CAPS_RE, _ACRONYM_RE):
        for m in regex.finditer(query):
            if any(a <= m.start() < b for a, b in covered):
                continue
            text = _clean_span(m.group(0))
            if text:
                found.append((m.start(), text))
                covered.append(m.span())
    out: list[str] = []
    seen: set[str] = set()
    for _, text in sorted(found):
        key = text.casefold()
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


def _intent(complexity: QueryComplexity, reasons: list[str], temporal: bool) -> str:
    if any(r.startswith("comparison") for r in reasons):
        return "comparison"
    if any(r.startswith("multi_hop") for r in reasons):
        return "multi_hop"
    if complexity is QueryComplexity.MODERATE:
        return "relationship"
    return "temporal" if temporal else "lookup"


def heuristic_understanding(query: str, *, now: datetime) -> QueryUnderstanding:
    """Understand a question without an LLM."""
    mentions = extract_mentions(query)
    refs = parse_temporal(query, now=now)
    complexity, reasons = classify(query, mentions)
    temporal = is_temporal_question(query, refs)
    return QueryUnderstanding(
        query=query,
        intent=_intent(complexity, reasons, temporal),
        entity_mentions=mentions,
        temporal_refs=refs,
        complexity=complexity,
        complexity_reasons=reasons,
        is_temporal=temporal,
        wants_recency=wants_recency(query, refs),
    )


_LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "intent": {"type": "string", "enum": list(INTENTS)},
        "entities": {"type": "array", "items": {"type": "string"}},
        "temporal": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "start": {"type": ["string", "null"]},
                    "end": {"type": ["string", "null"]},
                },
                "required": ["text"],
            },
        },
        "complexity": {"type": "string", "enum": [c.value for c in QueryComplexity]},
        "fusion_weights": {
            "type": "object",
            "properties": {k: {"type": "number"} for k in ("vector", "graph", "keyword")},
        },
    },
    "required": ["intent", "entities", "complexity"],
}

_PROMPT = """You analyse a search question for a memory engine. Today is {now}.
Return JSON with:
- intent: one of {intents}
- entities: the names of people, organisations, places, products or other named things in the question
- temporal: time expressions in the question, each {{"text", "start", "end"}} with start/end as
  ISO-8601 UTC datetimes (end exclusive; null when open), resolved relative to today
- complexity: "simple" (one fact about one thing), "moderate" (one relationship hop) or "complex"
  (comparisons, several entities, multi-hop chains)
- fusion_weights: {{"vector": w, "graph": w, "keyword": w}}, each 0-1: how much to trust semantic
  similarity, entity-graph traversal and exact keyword match for this question

Question: {query}"""


def _parse_iso(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _from_llm(query: str, data: Any, now: datetime, fallback: QueryUnderstanding) -> QueryUnderstanding:
    """Validate the LLM's JSON; raises ValueError/TypeError/KeyError on bad output."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    intent = str(data["intent"])
    if intent not in INTENTS:
        raise ValueError(f"unknown intent {intent!r}")
    entities = data["entities"]
    if not isinstance(entities, list) or not all(isinstance(e, str) for e in entities):
        raise TypeError("entities must be a list of strings")
    complexity = QueryComplexity(str(data["complexity"]).lower())
    refs: list[TemporalReference] = []
    for item in data.get("temporal") or []:
        start, end = _parse_iso(item.get("start")), _parse_iso(item.get("end"))
        if start is None and end is None:
            continue
        kind = "window" if start and end else ("since" if start else "before")
        refs.append(TemporalReference(str(item.get("text", "")), start, end, kind, "llm", False))
    # Recency words carry no window: keep the rule-based ones alongside the LLM's windows.
    refs += [r for r in fallback.temporal_refs if r.kind == "recency"]
    weights = None
    if isinstance(data.get("fusion_weights"), dict):
        weights = {
            k: float(v)
            for k, v in data["fusion_weights"].items()
            if k in ("vector", "graph", "keyword") and 0.0 <= float(v) <= 1.0
        }
        if not weights or sum(weights.values()) <= 0:
            weights = None
    mentions = [e.strip() for e in entities if e.strip()]
    return QueryUnderstanding(
        query=query,
        intent=intent,
        entity_mentions=list(dict.fromkeys(mentions)),
        temporal_refs=refs,
        complexity=complexity,
        complexity_reasons=["llm"],
        fusion_weights=weights,
        is_temporal=bool(refs) or fallback.is_temporal or intent == "temporal",
        wants_recency=fallback.wants_recency or any(r.kind == "recency" for r in refs),
        source="llm",
    )


async def understand(
    query: str, *, llm: LLMClient | None = None, use_llm: bool = False, now: datetime
) -> QueryUnderstanding:
    """Understand a question (one LLM call when asked and available, else heuristics).

    Args:
        query: the question.
        llm: an ``LLMClient`` (``complete_json(prompt, schema=...)``), or None.
        use_llm: ask the LLM (``VectorCypherConfig.routing_use_llm``).
        now: the reference for relative dates.

    Returns:
        A ``QueryUnderstanding``; never raises for LLM trouble (see ``fallback_reason``).
    """
    heuristic = heuristic_understanding(query, now=now)
    if not use_llm or llm is None:
        return heuristic
    prompt = _PROMPT.format(now=now.isoformat(), intents=", ".join(INTENTS), query=query)
    try:
        data = await llm.complete_json(prompt, schema=_LLM_SCHEMA)
        return _from_llm(query, data, now, heuristic)
    except (LLMError, ConfigError) as exc:
        heuristic.fallback_reason = f"llm_error: {type(exc).__name__}: {exc}"[:300]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        heuristic.fallback_reason = f"bad_llm_output: {type(exc).__name__}: {exc}"[:300]
    return heuristic
