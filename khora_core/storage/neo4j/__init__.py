"""The Neo4j graph store of the ``postgres`` stack (official async ``neo4j`` driver).

``open_driver`` connects and checks credentials; ``Neo4jGraphStore`` implements the
``GraphStore`` protocol plus the write/maintenance calls the stack makes
(``ensure_schema``, ``write_batch``, ``delete_document``, ``delete_namespace``,
``count_entities``, ``count_relationships``).
"""

from __future__ import annotations

from khora_core.storage.neo4j.errors import open_driver, translate_error
from khora_core.storage.neo4j.graph import Neo4jGraphStore

__all__ = ["Neo4jGraphStore", "open_driver", "translate_error"]
