"""Reciprocal Rank Fusion, plain and normalised, and the evidence rules that keep it honest.

``weighted_rrf`` is the spec's formula, ``score(d) = Σ_c w_c / (k + rank_c(d))`` with
``k = 60``; ``weighted_rrf_normalized`` min-max normalises each channel's raw scores first
and breaks ties with the normalised score from the item's dominant channel.

**A channel that found nothing useful must not dilute the others.** With ``k = 60`` RRF is
nearly flat across the top ranks (1/61 vs 1/62), so the *weights* decide: a graph channel at
weight 0.6 that puts an arbitrary chunk at rank 1 outvotes a vector channel at 0.4 that put
the right chunk at rank 1. Four rules, each with its own reason, stop that:

1. **Equal evidence shares a rank** (``ranks_from_scores``): ranks are competition ranks
   over each channel's scores, so the graph channel (whose score is the weighted set of
   query entities a chunk mentions) gives every chunk with the same entity evidence the
   same rank and leaves their order to the channels that can tell them apart. A channel
   must not invent an order it has no evidence for.
2. **A channel's weight is scaled by the quality of its evidence** (``evidence_weights``):
   graph weight by how well its entry entities matched the question (``graph_quality``:
   1.0 for an exact name link, the calibrated cosine for an entity found only by
   embedding, 0 with no entry entity), each entry entity's score first scaled by how
   specific it is to the namespace (``entity_specificity``: a name in half the chunks,
   such as a chat's speaker, picks out almost nothing); keyword weight by the share of the
   question's content words its top hit contains, context included (``keyword_quality``).
   A weakly anchored channel still contributes, at its evidence's strength.
3. **A confident vector top hit stays first** (``confident_top``): RRF throws away score
   magnitudes. When the top raw cosine clears ``anchor_min_score`` and beats the runner-up
   by ``anchor_margin``, the vector channel is sure, and fusion may reorder everything below
   it but not it. When the margin is small the vector channel is itself unsure, and fusion
   decides.
4. **The vector channel's order is displaced at most by its weight share**
   (``keep_anchor_order``): under RRF any chunk that two channels list outranks every chunk
   that one lists, so a graph channel that nominates fifteen chunks the vector channel also
   found at ranks 20-50 can push the vector channel's rank-2 hit out of the first ten. With
   ``s`` the vector channel's part of the weights actually used (after rule 2) times
   ``FusionPolicy.anchor_share_factor``, its rank-``i`` hit stays within the first
   ``ceil(i / s)`` places: the other channels may interleave their finds, in proportion to
   their weight, but not bury its best hits.

Together these make HYBRID rank the right chunk first on single-hop lookups at least as
often as VECTOR alone, while multi-hop questions still get the graph's extra candidates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "FusedItem",
    "FusionPolicy",
    "calibrated_similarity",
    "confident_top",
    "entity_specificity",
    "evidence_weights",
    "fuse",
    "graph_quality",
    "keep_anchor_order",
    "keyword_quality",
    "min_max",
    "nominations",
    "protect_top",
    "query_terms",
    "ranks_from_scores",
    "weighted_rrf",
    "weighted_rrf_normalized",
]

#: RRF's smoothing constant (Cormack et al. 2009): large enough that one channel's
#: rank-1 does not swamp consensus across channels.
DEFAULT_RRF_K = 60

#: A ranking: ids best first, or a mapping id -> 1-based rank (ties allowed).
Ranking = Union[Sequence[str], Mapping[str, float]]


@dataclass
class FusedItem:
    """One fused id with its score, per-channel ranks and RRF contributions."""

    id: str
    score: float = 0.0
    ranks: dict[str, float] = field(default_factory=dict)
    contributions: dict[str, float] = field(default_factory=dict)
    tiebreak: float = 0.0

    @property
    def dominant(self) -> str | None:
        """The channel that contributed most to this item's score."""
        return max(self.contributions, key=lambda c: self.contributions[c]) if self.contributions else None


def _as_ranks(ranking: Ranking) -> dict[str, float]:
    if isinstance(ranking, Mapping):
        return {str(k): float(v) for k, v in ranking.items()}
    ranks: dict[str, float] = {}
    for pos, item in enumerate(ranking, start=1):
        ranks.setdefault(str(item), float(pos))
    return ranks


def ranks_from_scores(scored: Iterable[tuple[str, float]], *, rel_tol: float = 1e-9) -> dict[str, int]:
    """Competition ranks (1, 1, 3, ...) by descending score: equal scores share a rank.

    Args:
        scored: ``(id, score)`` pairs in any order (a repeated id keeps its best score).
        rel_tol: scores within this relative tolerance count as equal.
    """
    best: dict[str, float] = {}
    for item, score in scored:
        if item not in best or score > best[item]:
            best[item] = score
    ordered = sorted(best.items(), key=lambda p: -p[1])
    ranks: dict[str, int] = {}
    prev: float | None = None
    rank = 0
    for pos, (item, score) in enumerate(ordered, start=1):
        if prev is None or not math.isclose(score, prev, rel_tol=rel_tol, abs_tol=1e-12):
            rank, prev = pos, score
        ranks[item] = rank
    return ranks


def weighted_rrf(
    rankings: Mapping[str, Ranking], weights: Mapping[str, float], k: int = DEFAULT_RRF_K
) -> list[FusedItem]:
    """Weighted Reciprocal Rank Fusion: ``Σ_c w_c / (k + rank_c)``.

    Args:
        rankings: channel name -> ranking (ids best first, or id -> rank).
        weights: channel name -> weight; a channel without a weight counts 1.0, a weight
            of 0 drops the channel's contribution.
        k: the RRF constant (60).

    Returns:
        Items by descending fused score; ties keep the order in which ids first appeared
        (channels in the given order), so the result is deterministic.
    """
    items: dict[str, FusedItem] = {}
    for channel, ranking in rankings.items():
        w = float(weights.get(channel, 1.0))
        for item, rank in _as_ranks(ranking).items():
            fused = items.setdefault(item, FusedItem(id=item))
            fused.ranks[channel] = rank
            contribution = w / (k + rank)
            fused.contributions[channel] = contribution
            fused.score += contribution
    order = {item: i for i, item in enumerate(items)}
    return sorted(items.values(), key=lambda f: (-f.score, -f.tiebreak, order[f.id]))


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Min-max normalise to [0, 1]; all-equal scores map to 1.0."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def weighted_rrf_normalized(
    scores: Mapping[str, Mapping[str, float]], weights: Mapping[str, float], k: int = DEFAULT_RRF_K
) -> list[FusedItem]:
    """RRF over min-max normalised channel scores, tie-broken by the dominant channel.

    Each channel's raw scores are normalised to [0, 1] (so a channel on a larger scale
    cannot dominate), ranked (equal scores share a rank), and fused with ``weighted_rrf``.
    Items with equal fused scores are ordered by their normalised score in their dominant
    channel (the one contributing most).

    Args:
        scores: channel name -> {id: raw score}.
        weights: channel name -> weight.
        k: the RRF constant.
    """
    normalised = {c: min_max(s) for c, s in scores.items()}
    rankings = {c: ranks_from_scores(n.items()) for c, n in normalised.items()}
    fused = weighted_rrf(rankings, weights, k)
    for item in fused:
        dom = item.dominant
        item.tiebreak = normalised[dom].get(item.id, 0.0) if dom else 0.0
    order = {f.id: i for i, f in enumerate(fused)}
    return sorted(fused, key=lambda f: (-round(f.score, 12), -f.tiebreak, order[f.id]))


# -- evidence --------------------------------------------------------------------------------

_STOP = frozenset(
    """the a an and or of to in on at for from by with about what who whom whose which when where
    why how is are was were be been do does did has have had can could would should will i me my
    we our you your he she it they them his her its their this that these those there any some
    all tell show give find list please much many did not no yes""".split()
)


def _stem(word: str) -> str:
    """A light suffix strip so "grippers" meets "gripper" (BM25 stems; this check should too)."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def query_terms(text: str) -> list[str]:
    """Distinct lower-case content words (3+ characters, not stop words) of ``text``."""
    words = re.findall(r"[\w][\w'-]*", text.lower())
    return list(dict.fromkeys(w for w in words if len(w) >= 3 and w not in _STOP))


def keyword_quality(query: str, top_text: str | None) -> float:
    """Share of the question's content words (lightly stemmed) in the keyword channel's top hit.

    ``top_text`` is the text BM25 searched (``Chunk.search_text``: the chunk's context, then
    its content), so a hit found through its context counts the words it was found by.
    """
    terms = query_terms(query)
    if not terms or not top_text:
        return 0.0
    present = {_stem(w) for w in re.findall(r"[\w][\w'-]*", top_text.lower())}
    return sum(1 for t in terms if _stem(t) in present) / len(terms)


def graph_quality(seed_scores: Iterable[float]) -> float:
    """How well the graph channel's entry entities match the question, in [0, 1].

    The strongest entry entity decides: 1.0 for an exact name link, the fuzzy ratio or the
    calibrated cosine (``calibrated_similarity``) otherwise, each scaled by the entity's
    specificity by the caller; 0 when the channel had no entry entity at all.
    """
    return max((min(1.0, max(0.0, s)) for s in seed_scores), default=0.0)


def calibrated_similarity(score: float, floor: float) -> float:
    """An entity found by embedding, as evidence in [0, 1]: its cosine rescaled from
    ``[floor, 1]`` (``floor``: the lowest similarity at which an entity is accepted at all) to
    ``[0, 1]``, so an entity that barely clears the bar counts as weak evidence, not as the
    0.4 that its raw cosine would claim against an exact name link's 1.0."""
    if floor >= 1.0:
        return 1.0 if score >= 1.0 else 0.0
    return min(1.0, max(0.0, (score - floor) / (1.0 - floor)))


def entity_specificity(mentions: int, chunks: int, *, common_share: float) -> float:
    """How much naming an entity narrows a namespace down, in [0, 1] (an IDF for entities).

    1.0 while the entity's mentions are at most ``common_share`` of the namespace's chunks;
    above that, ``log(1 / share) / log(1 / common_share)``, which reaches 0 when the entity
    is mentioned as often as there are chunks. On a conversation whose turns read "Ana:
    ...", Ana is mentioned in about half the turns: with ``common_share = 0.05`` her
    specificity is 0.23, so a question that names her and nothing rarer no longer makes the
    graph channel's list of her turns outvote the vector channel.

    Args:
        mentions: the entity's ``mention_count`` (a chunk that names it twice counts twice,
            so this errs towards common).
        chunks: the namespace's chunk count.
        common_share: the share of chunks up to which an entity counts as specific; 1.0
            turns the discount off.
    """
    if chunks <= 0 or common_share >= 1.0:
        return 1.0
    share = min(1.0, max(1, mentions) / chunks)
    if share <= common_share:
        return 1.0
    return max(0.0, math.log(1.0 / share) / math.log(1.0 / common_share))


def nominations(nominate: int, limit: int, quality: float) -> int:
    """How many chunks the graph hands fusion beside another channel: ``nominate`` scaled by
    the strength of its question-specific entity evidence (``quality``), at least one.

    Under RRF any chunk that two channels list outranks the chunks that one lists, so each
    nomination that the vector channel also found moves it up past the vector channel's own
    order. A graph anchored only on entities that pick out little (a chat's speaker) or on a
    weak embedding match nominates one or two chunks; an exact link to a specific entity
    nominates the full ``nominate``.
    """
    return max(1, min(limit, round(nominate * min(1.0, max(0.0, quality)))))


def evidence_weights(weights: Mapping[str, float], quality: Mapping[str, float]) -> dict[str, float]:
    """Scale each channel's weight by its evidence quality (channels without one keep theirs)."""
    return {c: w * min(1.0, max(0.0, quality.get(c, 1.0))) for c, w in weights.items()}


def confident_top(scores: Sequence[float], *, min_score: float, margin: float) -> bool:
    """True when the best raw score clears ``min_score`` and beats the next by ``margin``."""
    if not scores:
        return False
    ordered = sorted(scores, reverse=True)
    runner_up = ordered[1] if len(ordered) > 1 else -1.0
    return ordered[0] >= min_score and ordered[0] - runner_up >= margin


def protect_top(fused: list[FusedItem], anchor_id: str | None) -> list[FusedItem]:
    """Move ``anchor_id`` to the front, raising its score to the current top's."""
    if anchor_id is None or not fused or fused[0].id == anchor_id:
        return fused
    idx = next((i for i, f in enumerate(fused) if f.id == anchor_id), None)
    if idx is None:
        return fused
    anchor = fused.pop(idx)
    anchor.score = max(anchor.score, fused[0].score)
    return [anchor, *fused]


def keep_anchor_order(fused: list[FusedItem], anchor_order: Sequence[str], share: float) -> list[FusedItem]:
    """Move each of the anchor channel's hits up to at most place ``ceil(i / share)``.

    ``anchor_order`` is the anchor channel's ids best first (its rank ``i`` is its 1-based
    position). The other items keep their fused order; a hit moved up takes the score of the
    item it now precedes, so scores stay in descending order. ``share`` of 0 (or less)
    leaves ``fused`` as it is; 1 gives the anchor channel's order back for its own hits.
    """
    if share <= 0.0 or not fused or not anchor_order:
        return fused
    present = {f.id for f in fused}
    anchor = [cid for cid in dict.fromkeys(anchor_order) if cid in present]
    deadline = {cid: math.ceil(round(i / min(1.0, share), 9)) for i, cid in enumerate(anchor, start=1)}
    rest = list(fused)
    placed: set[str] = set()
    out: list[FusedItem] = []
    due = 0  # index into ``anchor`` of its best hit not yet placed
    while rest:
        while due < len(anchor) and anchor[due] in placed:
            due += 1
        position = len(out) + 1
        if due < len(anchor) and deadline[anchor[due]] <= position and rest[0].id != anchor[due]:
            idx = next(i for i, f in enumerate(rest) if f.id == anchor[due])
            item = rest.pop(idx)
            item.score = max(item.score, rest[0].score) if rest else item.score
        else:
            item = rest.pop(0)
        placed.add(item.id)
        out.append(item)
    return out


@dataclass(frozen=True)
class FusionPolicy:
    """How ``fuse`` combines channels (see the module docstring for why).

    Attributes:
        k: the RRF constant.
        normalized: use ``weighted_rrf_normalized`` (``VectorCypherConfig.fusion_normalized``).
        anchor_channel: the channel whose confident top hit is kept first.
        anchor_min_score: raw score the anchor must reach (cosine; all-MiniLM-L6-v2 puts
            on-topic matches above ~0.4).
        anchor_margin: lead over the runner-up that counts as confident.
        anchor_share_factor: the anchor channel's hit at rank ``i`` stays within the first
            ``ceil(i / (factor * share))`` places, ``share`` its part of the weights used
            (``keep_anchor_order``); 0 turns the bound off.
    """

    k: int = DEFAULT_RRF_K
    normalized: bool = False
    anchor_channel: str = "vector"
    anchor_min_score: float = 0.4
    anchor_margin: float = 0.05
    anchor_share_factor: float = 0.9


@dataclass
class FusionOutcome:
    items: list[FusedItem]
    weights: dict[str, float]
    anchored: str | None = None
    #: The anchor channel's share of the weights times the policy's factor (None: not applied).
    anchor_share: float | None = None
    #: How many of the anchor channel's hits the share bound moved up.
    moved_up: int = 0


def fuse(
    channels: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float],
    *,
    quality: Mapping[str, float] | None = None,
    policy: FusionPolicy | None = None,
) -> FusionOutcome:
    """Fuse channel hits with the four evidence rules.

    Args:
        channels: channel name -> ``(id, raw score)`` best first. Empty channels are ignored.
        weights: base weights per channel (from the router).
        quality: evidence quality per channel in [0, 1] (missing: 1.0).
        policy: fusion settings.

    Returns:
        The fused items (best first), the weights actually used, the anchored id and the
        anchor channel's share bound with how many of its hits it moved up.
    """
    policy = policy or FusionPolicy()
    live = {c: list(h) for c, h in channels.items() if h}
    used = evidence_weights({c: weights.get(c, 1.0) for c in live}, quality or {})
    if policy.normalized:
        items = weighted_rrf_normalized({c: dict(reversed(h)) for c, h in live.items()}, used, policy.k)
    else:
        items = weighted_rrf({c: ranks_from_scores(h) for c, h in live.items()}, used, policy.k)
    anchored = None
    share: float | None = None
    moved = 0
    anchor_hits = live.get(policy.anchor_channel)
    if anchor_hits and len(live) > 1:
        top_id, _ = max(anchor_hits, key=lambda p: p[1])
        if confident_top(
            [s for _, s in anchor_hits], min_score=policy.anchor_min_score, margin=policy.anchor_margin
        ):
            anchored = top_id
            items = protect_top(items, top_id)
        total = sum(used.values())
        if policy.anchor_share_factor > 0.0 and total > 0.0:
            share = min(1.0, policy.anchor_share_factor * used.get(policy.anchor_channel, 0.0) / total)
            ranked = sorted(anchor_hits, key=lambda p: -p[1])
            before = {f.id: i for i, f in enumerate(items)}
            items = keep_anchor_order(items, [cid for cid, _ in ranked], share)
            moved = sum(1 for i, f in enumerate(items) if i < before[f.id])
    return FusionOutcome(items=items, weights=used, anchored=anchored, anchor_share=share, moved_up=moved)
