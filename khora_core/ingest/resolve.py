"""Entity resolution: one node per real-world thing, with a deterministic id.

:func:`entity_id` is uuid5 of a fixed Khora UUID, the namespace and the normalised
canonical name, so the same entity mentioned in two documents lands on the same node.

:class:`EntityResolver` merges the mentions of one write (and the matching entities already
stored) into clusters, by, in order:

1. the normalised name (case, punctuation, whitespace, possessive "'s");
2. the name without titles or company suffixes ("Dr. Jane Smith" ~ "Jane Smith",
   "Acme Corp." ~ "Acme");
3. acronyms of multi-word names ("NASA" ~ "National Aeronautics and Space Administration");
4. edit distance: rapidfuzz ``ratio >= resolve_fuzzy_threshold``, confirmed by the name
   embeddings' cosine ``>= resolve_embedding_threshold`` when embeddings are given; with
   embeddings, a cosine above the threshold also merges names up to 15 points less alike.

Names that differ in their digits ("Q1"/"Q2", "GPT-3"/"GPT-4") and dates never merge by
similarity, and types must agree (``CONCEPT`` agrees with anything). Two stored entities
are never merged into one. Each cluster gets a canonical name (a stored entity's name, else
the most frequent title-free form), its other forms as aliases, and a majority-vote type.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from khora_core.config import IngestConfig
from khora_core.ingest.extract_base import ExtractedEntity
from khora_core.ingest.lexicon import PERSON_TITLES
from khora_core.models import Entity

__all__ = [
    "KHORA_ENTITY_NAMESPACE",
    "EntityResolver",
    "Resolution",
    "ResolutionPlan",
    "ResolvedEntity",
    "entity_id",
    "normalise_name",
]

#: Fixed namespace UUID for entity ids (never change it: stored ids depend on it).
KHORA_ENTITY_NAMESPACE = uuid.UUID("5f1d3c2e-8a4b-5c6d-9e7f-6b686f726121")

_DROP = re.compile(r"['’`.]")
_PUNCT = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")
_CORP_SUFFIXES = frozenset(
    "inc incorporated corp corporation ltd limited llc plc co company gmbh ag sa".split()
)
_CONNECTORS = frozenset("of the and for & de da del van von der".split())


@functools.lru_cache(maxsize=1 << 16)
def normalise_name(name: str) -> str:
    """Comparison form of a name: NFKC, casefolded, possessive and punctuation removed.

    Apostrophes and periods vanish ("O'Brien" -> "obrien", "U.S." -> "us"); other
    punctuation separates words ("Jean-Luc" -> "jean luc"); whitespace is collapsed.
    Memoised (65,536 names, about 14 MiB when full): remembering HotpotQA's 994 passages asks
    for 8,104 distinct names 104,564 times.
    """
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    text = re.sub(r"['’]s$", "", text)
    text = _PUNCT.sub(" ", _DROP.sub("", text))
    return _SPACES.sub(" ", text).strip()


def entity_id(namespace_id: str, canonical_name: str) -> str:
    """Deterministic entity id: uuid5(Khora UUID, namespace + normalised canonical name)."""
    return str(uuid.uuid5(KHORA_ENTITY_NAMESPACE, f"{namespace_id}\x1f{normalise_name(canonical_name)}"))


def _core(norm: str) -> str:
    """Name without leading titles and trailing company suffixes ("dr jane smith" -> "jane smith")."""
    words = norm.split()
    while len(words) > 1 and words[0] in PERSON_TITLES:
        words = words[1:]
    while len(words) > 1 and words[-1] in _CORP_SUFFIXES:
        words = words[:-1]
    return " ".join(words)


def _strip_title(surface: str) -> str:
    words = surface.split()
    while len(words) > 1 and words[0].rstrip(".").lower() in PERSON_TITLES:
        words = words[1:]
    return " ".join(words)


def _initials(norm: str) -> str | None:
    words = [w for w in norm.split() if w not in _CONNECTORS]
    return "".join(w[0] for w in words) if len(words) >= 2 else None


def _compatible(a: str | None, b: str | None) -> bool:
    if a is None or b is None or a == b:
        return True
    if "DATE" in (a, b):
        return False
    return "CONCEPT" in (a, b)


@dataclass
class _Node:
    norm: str
    forms: Counter[str] = field(default_factory=Counter)
    votes: Counter[str] = field(default_factory=Counter)
    descriptions: list[str] = field(default_factory=list)
    existing: Entity | None = None

    @property
    def type(self) -> str | None:
        if self.existing is not None:
            return self.existing.type
        return _vote(self.votes, None)


def _vote(votes: Counter[str], prefer: str | None) -> str | None:
    if not votes:
        return prefer
    # Most votes; ties go to the stored type, then to a specific type over CONCEPT.
    return min(votes, key=lambda t: (-votes[t], t != prefer, t == "CONCEPT", t))


@dataclass
class ResolvedEntity:
    """One resolved entity: canonical name, aliases, type, and the stored entity it extends."""

    name: str
    type: str
    aliases: list[str]
    description: str | None
    existing: Entity | None
    surface_forms: list[str]

    def id(self, namespace_id: str) -> str:
        """The entity's id in ``namespace_id`` (the stored id when it extends a stored entity)."""
        return self.existing.id if self.existing is not None else entity_id(namespace_id, self.name)


@dataclass
class Resolution:
    """The resolver's answer: the entities, and which one each surface name resolved to."""

    entities: list[ResolvedEntity]
    _by_norm: dict[str, ResolvedEntity]

    def lookup(self, name: str) -> ResolvedEntity | None:
        """The entity a surface name (as extracted, or any alias) resolved to."""
        return self._by_norm.get(normalise_name(name))


class EntityResolver:
    """Merges entity mentions (see the module docstring).

    Resolution runs in two steps so that a caller embeds only the names it must:
    :meth:`plan` does every merge that needs no vector and lists, in
    :attr:`ResolutionPlan.wanted`, the names whose vectors would decide a fuzzy merge (most
    documents have none); :meth:`ResolutionPlan.finish` takes those vectors and returns
    the :class:`Resolution`. :meth:`resolve` runs both at once.

    Args:
        fuzzy_threshold: rapidfuzz ratio (0-100) above which two names may merge.
        embedding_threshold: cosine above which name embeddings confirm a merge.
    """

    def __init__(self, *, fuzzy_threshold: float = 92.0, embedding_threshold: float = 0.85) -> None:
        self.fuzzy_threshold = fuzzy_threshold
        self.embedding_threshold = embedding_threshold

    @classmethod
    def from_config(cls, config: IngestConfig) -> EntityResolver:
        """Thresholds from ``IngestConfig.resolve_fuzzy_threshold`` / ``resolve_embedding_threshold``."""
        return cls(
            fuzzy_threshold=config.resolve_fuzzy_threshold,
            embedding_threshold=config.resolve_embedding_threshold,
        )

    def resolve(
        self,
        mentions: Sequence[ExtractedEntity],
        *,
        existing: Sequence[Entity] = (),
        embeddings: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> Resolution:
        """Cluster ``mentions`` (and ``existing`` stored entities) into resolved entities.

        Args:
            mentions: every extracted entity mention of the write (repeats count as votes).
            existing: stored entities that may be the same things (exact name/alias matches).
            embeddings: optional name embeddings keyed by surface name.

        Returns:
            A :class:`Resolution`. Stored entities with no matching mention are not returned.
        """
        return self.plan(mentions, existing=existing).finish(embeddings)

    def plan(self, mentions: Sequence[ExtractedEntity], *, existing: Sequence[Entity] = ()) -> ResolutionPlan:
        """Every merge that needs no vector, and the names whose vectors decide the rest
        (arguments as for :meth:`resolve`)."""
        clusters = _Clusters()
        for ent in existing:  # names before aliases: a name anchors its node
            norm = normalise_name(ent.name)
            if norm and clusters.node(norm).existing is None:
                clusters.nodes[norm].existing = ent
                clusters.nodes[norm].forms[ent.name] += 0
        for ent in existing:
            for alias in ent.aliases:
                norm = normalise_name(alias)
                if norm and clusters.node(norm).existing is None:
                    clusters.nodes[norm].existing = ent
                    clusters.nodes[norm].forms[alias] += 0
        mentioned: set[str] = set()
        for m in mentions:
            norm = normalise_name(m.name)
            if not norm:
                continue
            n = clusters.node(norm)
            n.forms[m.name.strip()] += 1
            n.votes[m.type] += 1
            if m.description:
                n.descriptions.append(m.description)
            mentioned.add(norm)
        clusters.freeze()
        nodes, keys, union = clusters.nodes, clusters.keys, clusters.union

        for ent in existing:  # a stored entity's name and aliases are one cluster
            forms = [normalise_name(n) for n in [ent.name, *ent.aliases]]
            forms = [f for f in forms if f and nodes[f].existing is ent]
            for f in forms[1:]:
                union(forms[0], f)
        by_core: dict[str, str] = {}
        for k in keys:
            core = _core(k)
            if core in by_core:
                union(by_core[core], k)
            else:
                by_core[core] = k
        by_initials: dict[str, list[str]] = {}
        for k in keys:
            ini = _initials(_core(k))
            if ini and len(ini) >= 2:
                by_initials.setdefault(ini, []).append(k)
        for k in keys:
            is_acronym = any(f.isupper() and " " not in f for f in nodes[k].forms) and 2 <= len(k) <= 6
            for other in by_initials.get(k, []) if is_acronym else []:
                union(other, k)
        return ResolutionPlan(self, clusters, mentioned, self._fuzzy_pairs(clusters))

    def _fuzzy_pairs(self, clusters: _Clusters) -> list[tuple[str, str, float]]:
        """Name pairs within the loose edit-distance ratio (``fuzzy_threshold - 15``) whose
        digits agree and that are not one cluster already."""
        from rapidfuzz import fuzz, process

        pool = [k for k in clusters.keys if len(k) >= 4 and clusters.nodes[k].type != "DATE"]
        if len(pool) < 2:
            return []
        loose = self.fuzzy_threshold - 15
        scores = process.cdist(pool, pool, scorer=fuzz.ratio, score_cutoff=loose, dtype=np.uint8)
        pairs = []
        for i, j in zip(*np.nonzero(scores), strict=True):
            if i >= j:
                continue
            a, b = pool[i], pool[j]
            if clusters.find(a) == clusters.find(b):
                continue  # already one cluster (same name without its title, an acronym)
            if re.findall(r"\d+", a) == re.findall(r"\d+", b):
                pairs.append((a, b, fuzz.ratio(a, b)))
        return pairs


class _Clusters:
    """Name nodes (by normalised name) and the union-find over them."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.keys: list[str] = []
        self.parent: dict[str, str] = {}
        self.anchor: dict[str, str | None] = {}
        self.ctype: dict[str, str | None] = {}

    def node(self, norm: str) -> _Node:
        return self.nodes.setdefault(norm, _Node(norm))

    def freeze(self) -> None:
        """Every node is in: start the union-find."""
        self.keys = list(self.nodes)
        for k in self.keys:
            stored = self.nodes[k].existing
            self.parent[k] = k
            self.anchor[k] = stored.id if stored is not None else None
            self.ctype[k] = self.nodes[k].type

    def find(self, k: str) -> str:
        parent = self.parent
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        ctype, anchor = self.ctype, self.anchor
        if ra == rb or not _compatible(ctype[ra], ctype[rb]):
            return
        if anchor[ra] and anchor[rb] and anchor[ra] != anchor[rb]:
            return  # never merge two stored entities
        self.parent[rb] = ra
        anchor[ra] = anchor[ra] or anchor[rb]
        ctype[ra] = ctype[ra] if ctype[ra] not in (None, "CONCEPT") else ctype[rb]


class ResolutionPlan:
    """A resolution waiting for the vectors of :attr:`wanted` (from :meth:`EntityResolver.plan`).

    Use it once: :meth:`finish` completes the merges in place.
    """

    def __init__(
        self,
        resolver: EntityResolver,
        clusters: _Clusters,
        mentioned: set[str],
        pairs: list[tuple[str, str, float]],
    ) -> None:
        self._resolver = resolver
        self._clusters = clusters
        self._mentioned = mentioned
        self._pairs = pairs
        #: The names whose vectors decide a fuzzy merge: one form of each name in a close pair.
        self.wanted: list[str] = list(
            dict.fromkeys(next(iter(clusters.nodes[k].forms)) for a, b, _ in pairs for k in (a, b))
        )

    def finish(self, embeddings: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> Resolution:
        """Merge the close pairs (see the module docstring) and build the :class:`Resolution`.

        Args:
            embeddings: name vectors by surface name (at least those of :attr:`wanted`);
                without them, only pairs within ``fuzzy_threshold`` merge.
        """
        nodes = self._clusters.nodes
        vectors: dict[str, np.ndarray] = {}
        known: Mapping[str, Sequence[float] | np.ndarray] = embeddings or {}
        for k in {k for a, b, _ in self._pairs for k in (a, b)} if known else ():
            vec = next((known[f] for f in nodes[k].forms if f in known), None)
            if vec is not None:
                arr = np.asarray(vec, dtype=np.float32)
                norm = float(np.linalg.norm(arr))
                if norm > 0:
                    vectors[k] = arr / norm
        for a, b, ratio in self._pairs:
            if a in vectors and b in vectors:
                if float(vectors[a] @ vectors[b]) < self._resolver.embedding_threshold:
                    continue
            elif ratio < self._resolver.fuzzy_threshold:
                continue
            self._clusters.union(a, b)
        return self._build()

    def _build(self) -> Resolution:
        nodes, mentioned = self._clusters.nodes, self._mentioned
        clusters: dict[str, list[str]] = {}
        for k in self._clusters.keys:
            clusters.setdefault(self._clusters.find(k), []).append(k)
        entities: list[ResolvedEntity] = []
        by_norm: dict[str, ResolvedEntity] = {}
        for members in clusters.values():
            if not any(k in mentioned for k in members):
                continue  # a stored entity nobody mentioned this time
            existing = next((nodes[k].existing for k in members if nodes[k].existing is not None), None)
            forms: Counter[str] = Counter()
            votes: Counter[str] = Counter()
            descriptions: list[str] = []
            for k in members:
                forms.update(nodes[k].forms)
                votes.update(nodes[k].votes)
                descriptions.extend(nodes[k].descriptions)
            if existing is not None:
                name = existing.name
                etype = _vote(votes + Counter({existing.type: 1}), existing.type) or "CONCEPT"
                description = existing.description or (descriptions[0] if descriptions else None)
            else:
                # The most frequent form (ties: the longer, more complete one), without titles.
                best = max(forms, key=lambda f: (forms[f], any(c.isupper() for c in f), len(f)))
                name = _strip_title(best).strip(" .,;:") or best
                etype = _vote(votes, None) or "CONCEPT"
                description = descriptions[0] if descriptions else None
            canonical = normalise_name(name)
            aliases: dict[str, str] = {}
            for form in [*forms, *(existing.aliases if existing else [])]:
                norm = normalise_name(form)
                if norm and norm != canonical:
                    aliases.setdefault(norm, form)
            resolved = ResolvedEntity(
                name=name,
                type=etype,
                aliases=list(aliases.values()),
                description=description,
                existing=existing,
                surface_forms=[f for f in forms if forms[f] > 0],
            )
            entities.append(resolved)
            for k in members:
                by_norm[k] = resolved
            by_norm.setdefault(canonical, resolved)
        return Resolution(entities=entities, _by_norm=by_norm)
