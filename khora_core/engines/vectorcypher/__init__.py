"""The VectorCypher engine: vector + Cypher graph (+ BM25) retrieval with query routing."""

from __future__ import annotations

from khora_core.config import VectorCypherConfig
from khora_core.engines.vectorcypher.engine import VectorCypherEngine

__all__ = ["VectorCypherConfig", "VectorCypherEngine"]
