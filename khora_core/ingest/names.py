"""Name state shared by the documents of one ``remember_batch``.

:class:`NameVectors` embeds entity names at most once per batch: an exact-string cache,
filled in one embedder call per request (so a window of documents costs one call, not one
per document), and seeded with the embeddings that stored entities already carry. Encoding
cost is per token, so only *fewer* names make name embedding cheaper; most surface names
of a corpus repeat across its documents.

:class:`BatchEntities` remembers the entities built earlier in the batch, so a later
document resolves against them exactly as if they were already stored (documents of one
window are looked up before any of them is written).

Vectors are kept as float32 arrays (a tenth of a list of Python floats), and entities as
plain tuples without their embedding (an ``Entity`` is rebuilt when found), to keep a large
batch small.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from khora_core.embedding.base import Embedder, embed_names
from khora_core.errors import KhoraError
from khora_core.models import Entity
from khora_core.storage.protocols import fold

__all__ = ["BatchEntities", "NameVectors"]


class NameVectors:
    """Exact-string cache of name embeddings (see the module docstring).

    Args:
        embedder: embeds the names the cache does not hold yet.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}
        #: Names sent to the embedder, and the number of calls made.
        self.embedded = 0
        self.calls = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, name: object) -> bool:
        return name in self._vectors

    def seed(self, entities: Iterable[Entity]) -> None:
        """Take stored entities' embeddings for their names and aliases (never overriding
        a name already held: a name's own embedding beats its entity's)."""
        for ent in entities:
            if not ent.embedding:
                continue
            vector = np.asarray(ent.embedding, dtype=np.float32)
            for name in (ent.name, *ent.aliases):
                self._vectors.setdefault(name, vector)

    async def ensure(self, names: Iterable[str]) -> None:
        """Embed, in one call, every name in ``names`` the cache does not hold.

        Raises:
            KhoraError: the embedder failed or returned the wrong number of vectors.
        """
        missing = list(dict.fromkeys(n for n in names if n and n not in self._vectors))
        if not missing:
            return
        self.calls += 1
        self.embedded += len(missing)
        vectors = await embed_names(self.embedder, missing)
        if len(vectors) != len(missing):
            raise KhoraError(f"The embedder returned {len(vectors)} vectors for {len(missing)} names.")
        for name, vector in zip(missing, vectors, strict=True):
            self._vectors[name] = np.asarray(vector, dtype=np.float32)

    def get(self, name: str) -> np.ndarray | None:
        """The cached vector of ``name`` (exact string), or None."""
        return self._vectors.get(name)

    def as_list(self, name: str) -> list[float] | None:
        """The cached vector as a list of floats (what ``Entity.embedding`` holds), or None."""
        vector = self._vectors.get(name)
        return vector.tolist() if vector is not None else None

    def mapping(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """``{name: vector}`` for the names the cache holds."""
        return {n: self._vectors[n] for n in names if n in self._vectors}


class BatchEntities:
    """The entities built so far in one batch, found by exact case-insensitive name or alias."""

    def __init__(self) -> None:
        #: id -> (namespace_id, name, type, aliases, description)
        self._by_id: dict[str, tuple[str, str, str, tuple[str, ...], str | None]] = {}
        self._ids_by_key: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, entities: Iterable[Entity]) -> None:
        """Remember (or update) entities, without their embedding; aliases add up."""
        for ent in entities:
            old = self._by_id.get(ent.id)
            aliases = list(ent.aliases)
            if old is not None:
                seen = {fold(a) for a in aliases} | {fold(ent.name)}
                aliases += [a for a in old[3] if fold(a) not in seen]
            self._by_id[ent.id] = (ent.namespace_id, ent.name, ent.type, tuple(aliases), ent.description)
            for name in (ent.name, *aliases):
                key = fold(name)
                if key:
                    ids = self._ids_by_key.setdefault(key, [])
                    if ent.id not in ids:
                        ids.append(ent.id)

    def find(self, names: Iterable[str]) -> list[Entity]:
        """The remembered entities whose name or an alias equals one of ``names`` (case-insensitive),
        without embedding and with ``mention_count`` 0."""
        ids: set[str] = set()
        for name in names:
            ids.update(self._ids_by_key.get(fold(name), ()))
        return [self._entity(i) for i in sorted(ids)]

    def _entity(self, entity_id: str) -> Entity:
        namespace_id, name, etype, aliases, description = self._by_id[entity_id]
        return Entity(
            id=entity_id,
            namespace_id=namespace_id,
            name=name,
            type=etype,
            aliases=list(aliases),
            description=description,
        )
