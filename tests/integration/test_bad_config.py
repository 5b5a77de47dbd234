"""Bad configuration fails at open with one clear KhoraError naming the setting, fast."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from khora_core import ConfigError, Khora, KhoraConfig, StorageUnavailableError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unknown_engine_names_the_setting() -> None:
    with pytest.raises(ConfigError) as exc:
        Khora(engine="vectorcypher-9000")
    assert exc.value.setting == "engine" and "vectorcypher" in str(exc.value)


async def test_non_postgres_url_is_rejected(embedder, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        async with Khora("mysql://u:p@localhost/db", embedder=embedder):
            pass
    assert exc.value.setting == "KHORA_DATABASE_URL"


async def test_postgres_without_neo4j_names_the_neo4j_url(embedder, monkeypatch) -> None:
    monkeypatch.delenv("KHORA_NEO4J_URL", raising=False)
    with pytest.raises(ConfigError) as exc:
        async with Khora("postgresql://khora:x@127.0.0.1:1/khora", embedder=embedder):
            pass
    assert exc.value.setting == "KHORA_NEO4J_URL"


async def test_unreachable_database_fails_fast(embedder, monkeypatch) -> None:
    monkeypatch.setenv("KHORA_NEO4J_URL", "bolt://127.0.0.1:1")
    url = f"postgresql://khora:x@127.0.0.1:{_free_port()}/khora"
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError) as exc:
        async with Khora(url, embedder=embedder):
            pass
    assert time.monotonic() - t0 < 10
    assert "KHORA_DATABASE_URL" in str(exc.value)


@pytest.mark.postgres
async def test_wrong_postgres_password_names_the_url(embedder, postgres_dsn: str, neo4j_settings) -> None:
    parts = urlsplit(postgres_dsn)
    bad = urlunsplit(parts._replace(netloc=f"khora:wrong-password@{parts.hostname}:{parts.port}"))
    cfg = KhoraConfig(
        storage={
            "database_url": bad,
            "neo4j_url": neo4j_settings["uri"],
            "neo4j_password": neo4j_settings["password"],
        }
    )
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as exc:
        async with Khora(config=cfg, embedder=embedder):
            pass
    assert time.monotonic() - t0 < 10
    assert "KHORA_DATABASE_URL" in str(exc.value) and "wrong-password" not in str(exc.value)


@pytest.mark.neo4j
async def test_wrong_neo4j_password_names_the_setting(embedder, postgres_dsn: str, neo4j_settings) -> None:
    cfg = KhoraConfig(
        storage={"database_url": postgres_dsn, "neo4j_url": neo4j_settings["uri"], "neo4j_password": "nope"}
    )
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as exc:
        async with Khora(config=cfg, embedder=embedder):
            pass
    assert time.monotonic() - t0 < 15
    assert "KHORA_STORAGE_NEO4J_PASSWORD" in str(exc.value)
