"""Shared fixtures.

Service fixtures (``postgres_dsn``, ``neo4j_settings``) come from ``tests/fixtures/``: each
uses ``KHORA_DATABASE_URL`` / ``KHORA_NEO4J_URL`` when set (``make test`` starts both
servers and sets them) and otherwise starts the server itself. With ``CI`` or
``KHORA_REQUIRE_SERVICES`` set, a missing service fails the run instead of skipping.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = ["tests.fixtures.postgres", "tests.fixtures.neo4j", "tests.fixtures.stacks"]
