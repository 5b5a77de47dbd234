"""The PostgreSQL half of the ``postgres`` stack against a real PostgreSQL + pgvector server.

Each module run works in its own schema (``search_path`` in the URL), so the shared
``khora`` database keeps whatever dimension the other suites use.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg
import numpy as np
import pytest

from khora_core.config import StorageConfig
from khora_core.errors import (
    ConfigError,
    InvalidInputError,
    NamespaceNotFoundError,
    StorageUnavailableError,
)
from khora_core.filters import RecallFilter
from khora_core.models import Chunk, Document, Namespace, WriteBatch
from khora_core.storage.postgres import (
    PgPool,
    PostgresDocumentStore,
    PostgresKeywordIndex,
    PostgresVectorIndex,
    open_pool,
    tokenize,
)
from khora_core.storage.postgres.keywords import STOPWORDS
from khora_core.storage.postgres.migrate import load_migrations, migrate
from khora_core.storage.protocols import DocumentStore, KeywordIndex, VectorIndex

pytestmark = pytest.mark.postgres

DIM = 8
UTC = timezone.utc
T0 = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)


def vec(*xs: float) -> list[float]:
    return [float(x) for x in xs] + [0.0] * (DIM - len(xs))


def with_schema(dsn: str, schema: str) -> str:
    parts = urlsplit(dsn)
    extra = f"search_path={quote(schema + ',public', safe='')}"
    return urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra))


def with_password(dsn: str, password: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{password}@{host}"))


def with_port(dsn: str, port: int) -> str:
    parts = urlsplit(dsn)
    creds = parts.netloc.rsplit("@", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{creds}@127.0.0.1:{port}"))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_batch(
    ns: str,
    chunks: Sequence[tuple[str, list[float] | None]],
    *,
    doc_id: str | None = None,
    external_id: str | None = None,
    occurred_at: datetime | None = T0,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    source_type: str | None = None,
    replaces: Sequence[str] = (),
) -> WriteBatch:
    doc_id = doc_id or uuid.uuid4().hex
    content = "\n".join(text for text, _ in chunks)
    common: dict[str, Any] = {
        "namespace_id": ns,
        "created_at": datetime.now(UTC),
        "occurred_at": occurred_at,
        "external_id": external_id,
        "source_type": source_type,
        "title": f"doc {doc_id[:6]}",
        "metadata": metadata or {},
        "tags": tags or [],
    }
    doc = Document(
        id=doc_id, content=content, content_hash=hashlib.sha256(content.encode()).hexdigest(), **common
    )
    out: list[Chunk] = []
    pos = 0
    for i, (text, emb) in enumerate(chunks):
        out.append(
            Chunk(
                id=f"{doc_id}-{i}",
                document_id=doc_id,
                index=i,
                content=text,
                start_char=pos,
                end_char=pos + len(text),
                token_count=len(text.split()),
                embedding=emb,
                is_core=i == 0,
                **common,
            )
        )
        pos += len(text) + 1
    return WriteBatch(document=doc, chunks=out, replaces=list(replaces))


@dataclass
class Pg:
    pool: PgPool
    docs: PostgresDocumentStore
    vectors: PostgresVectorIndex
    keywords: PostgresKeywordIndex
    dsn: str
    schema: str


@pytest.fixture(scope="module")
async def pg(postgres_dsn: str) -> AsyncIterator[Pg]:
    schema = f"khora_t_{uuid.uuid4().hex[:10]}"
    await _admin(postgres_dsn, f'CREATE SCHEMA "{schema}"')
    dsn = with_schema(postgres_dsn, schema)
    pool = await open_pool(StorageConfig(database_url=dsn, pool_max_size=4), dim=DIM)
    docs = PostgresDocumentStore(pool)
    try:
        yield Pg(pool, docs, PostgresVectorIndex(pool), PostgresKeywordIndex(pool), dsn, schema)
    finally:
        await pool.aclose()
        await _admin(postgres_dsn, f'DROP SCHEMA "{schema}" CASCADE')


async def _admin(dsn: str, sql: str) -> None:
    # A fresh connection each time: a test may restart the server in between.
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
async def fresh_schema(postgres_dsn: str) -> AsyncIterator[str]:
    """A DSN whose search_path is a new, empty schema."""
    schema = f"khora_m_{uuid.uuid4().hex[:10]}"
    await _admin(postgres_dsn, f'CREATE SCHEMA "{schema}"')
    try:
        yield with_schema(postgres_dsn, schema)
    finally:
        await _admin(postgres_dsn, f'DROP SCHEMA "{schema}" CASCADE')


async def new_namespace(pg: Pg) -> str:
    ns = f"ns-{uuid.uuid4().hex[:10]}"
    await pg.docs.create_namespace(Namespace(namespace_id=ns, name="test", created_at=datetime.now(UTC)))
    return ns


async def table_counts(pg: Pg, ns: str) -> dict[str, int]:
    out = {}
    for table in ("khora_documents", "khora_chunks", "khora_terms"):
        out[table] = await pg.pool.fetchval(f"SELECT count(*) FROM {table} WHERE namespace_id = $1", ns)
    return out


# -- migrations -----------------------------------------------------------------------------


async def test_migrations_from_empty_then_rerun_keeps_data(fresh_schema: str) -> None:
    assert await migrate(fresh_schema, DIM) == [m.version for m in load_migrations()]
    conn = await asyncpg.connect(fresh_schema)
    try:
        assert await conn.fetchval("SELECT value FROM khora_settings WHERE key = 'embedding_dim'") == str(DIM)
        indexes = {
            r["indexname"]: r["indexdef"]
            for r in await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            )
        }
        hnsw = indexes["ix_khora_chunks_embedding_hnsw"]
        assert "hnsw" in hnsw and "vector_cosine_ops" in hnsw
        assert "ef_construction='128'" in hnsw and "m='16'" in hnsw
        assert "gin" in indexes["ix_khora_chunks_tags_gin"]
        assert "(namespace_id, occurred_at)" in indexes["ix_khora_chunks_ns_occurred"]
        assert "(namespace_id, content_hash)" in indexes["ix_khora_documents_ns_hash"]
        assert "(namespace_id, external_id)" in indexes["ix_khora_documents_ns_external"]
        atttype = await conn.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'khora_chunks'::regclass AND attname = 'embedding'"
        )
        assert atttype == f"vector({DIM})"
    finally:
        await conn.close()

    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        store = PostgresDocumentStore(pool)
        await store.create_namespace(Namespace(namespace_id="ns", created_at=T0))
        await store.write_rows("ns", make_batch("ns", [("kept across migrations", vec(1))], doc_id="d1"))
    finally:
        await pool.aclose()

    assert await migrate(fresh_schema, DIM) == []  # idempotent
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        store = PostgresDocumentStore(pool)
        assert [d.id for d in await store.get_documents("ns", ["d1"])] == ["d1"]
        assert await pool.fetchval("SELECT count(*) FROM khora_schema_version") == len(load_migrations())
    finally:
        await pool.aclose()


async def test_other_dimension_is_a_config_error(fresh_schema: str) -> None:
    await migrate(fresh_schema, DIM)
    with pytest.raises(ConfigError, match="dimension"):
        await migrate(fresh_schema, DIM + 1)
    with pytest.raises(ConfigError, match="dimension"):
        await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM * 2)


async def test_concurrent_migrations_apply_once(fresh_schema: str) -> None:
    results = await asyncio.gather(*(migrate(fresh_schema, DIM) for _ in range(3)))
    applied = [v for r in results for v in r]
    assert sorted(applied) == [m.version for m in load_migrations()]


# -- documents ------------------------------------------------------------------------------


async def test_protocols_are_implemented(pg: Pg) -> None:
    assert isinstance(pg.docs, DocumentStore)
    assert isinstance(pg.vectors, VectorIndex)
    assert isinstance(pg.keywords, KeywordIndex)


async def test_namespace_round_trip(pg: Pg) -> None:
    ns = Namespace(namespace_id=f"ns-{uuid.uuid4().hex[:8]}", name="n", created_at=T0, metadata={"k": [1, 2]})
    await pg.docs.create_namespace(ns)
    await pg.docs.create_namespace(ns.model_copy(update={"name": "other"}))  # existing: left alone
    assert await pg.docs.get_namespace(ns.namespace_id) == ns
    assert await pg.docs.get_namespace("missing") is None
    assert ns in await pg.docs.list_namespaces()


async def test_document_and_chunk_round_trip(pg: Pg) -> None:
    ns = await new_namespace(pg)
    meta = {"tier": 2, "when": datetime(2024, 2, 1, tzinfo=UTC), "nested": {"a": [1, "x"]}, "uni": "Zürich"}
    batch = make_batch(
        ns,
        [("first chunk about apples", vec(1, 0.5)), ("second chunk, no vector", None)],
        external_id="ext-1",
        metadata=meta,
        tags=["red", "fruit"],
        source_type="email",
    )
    await pg.docs.write_rows(ns, batch)
    doc = batch.document
    (got,) = await pg.docs.get_documents(ns, [doc.id])
    want = doc.model_copy(update={"metadata": {**meta, "when": "2024-02-01T00:00:00+00:00"}})
    assert got == want
    chunks = await pg.docs.get_chunks(ns, [c.id for c in reversed(batch.chunks)] + ["nope"])
    assert [c.id for c in chunks] == [c.id for c in reversed(batch.chunks)]  # order asked, unknown skipped
    c0 = next(c for c in chunks if c.index == 0)
    assert c0.embedding is not None and np.allclose(c0.embedding, vec(1, 0.5))
    assert c0.model_copy(update={"embedding": None}) == batch.chunks[0].model_copy(
        update={"embedding": None, "metadata": want.metadata}
    )
    assert next(c for c in chunks if c.index == 1).embedding is None
    assert (await pg.docs.find_document_by_hash(ns, doc.content_hash)).id == doc.id  # type: ignore[union-attr]
    assert await pg.docs.find_document_by_hash(ns, "0" * 64) is None
    assert [d.id for d in await pg.docs.find_documents_by_external_id(ns, "ext-1")] == [doc.id]
    assert await pg.docs.newest_occurred_at(ns) == T0
    assert (await pg.docs.count_documents(ns), await pg.docs.count_chunks(ns)) == (1, 2)
    assert await pg.docs.chunk_ids_for_documents(ns, [doc.id]) == {doc.id: [c.id for c in batch.chunks]}


async def test_get_documents_in_batches_of_1000(pg: Pg) -> None:
    ns = await new_namespace(pg)
    ids = [f"d{i:05d}" for i in range(2300)]
    async with pg.pool.transaction() as conn:
        await conn.executemany(
            "INSERT INTO khora_documents (namespace_id, id, content, content_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
            [(ns, i, f"content {i}", i, T0) for i in ids],
        )
    asked = [*reversed(ids), "missing"]
    got = await pg.docs.get_documents(ns, asked)
    assert [d.id for d in got] == list(reversed(ids))


async def test_write_replaces_and_a_stored_document_id_is_refused(pg: Pg) -> None:
    ns = await new_namespace(pg)
    old = make_batch(ns, [("old version text", vec(1))], external_id="same")
    await pg.docs.write_rows(ns, old)
    new = make_batch(ns, [("new version text", vec(0, 1))], external_id="same", replaces=[old.document.id])
    await pg.docs.write_rows(ns, new)
    # Writing a stored document id again (a concurrent write of the same content landed
    # first) is refused, typed, and leaves the one copy.
    with pytest.raises(InvalidInputError, match="stored already"):
        await pg.docs.write_rows(ns, new)
    assert [d.id for d in await pg.docs.find_documents_by_external_id(ns, "same")] == [new.document.id]
    assert await table_counts(pg, ns) == {"khora_documents": 1, "khora_chunks": 1, "khora_terms": 3}
    assert await pg.docs.get_chunks(ns, [old.chunks[0].id]) == []


async def test_concurrent_writes_of_one_external_id_keep_the_last(pg: Pg) -> None:
    """Neither writer names the other in ``replaces``; the row write finds it under the
    external id's lock, whatever the interleaving, and reports it in ``replaces``."""
    ns = await new_namespace(pg)
    batches = [make_batch(ns, [(f"version {i} text", vec(i + 1))], external_id="ext") for i in range(6)]
    await asyncio.gather(*(pg.docs.write_rows(ns, b) for b in batches))
    (kept,) = await pg.docs.find_documents_by_external_id(ns, "ext")
    replaced = {d for b in batches for d in b.replaces}
    assert replaced == {b.document.id for b in batches} - {kept.id}
    assert await table_counts(pg, ns) == {"khora_documents": 1, "khora_chunks": 1, "khora_terms": 3}


async def test_failed_write_leaves_nothing(pg: Pg) -> None:
    with pytest.raises(NamespaceNotFoundError):
        await pg.docs.write_rows("no-such-ns", make_batch("no-such-ns", [("text", vec(1))]))
    ns = await new_namespace(pg)
    bad = make_batch(ns, [("good chunk", vec(1)), ("bad chunk", [1.0, 2.0])])  # wrong dimension
    with pytest.raises(InvalidInputError):
        await pg.docs.write_rows(ns, bad)
    assert await table_counts(pg, ns) == {"khora_documents": 0, "khora_chunks": 0, "khora_terms": 0}
    other = make_batch("elsewhere", [("x", vec(1))])
    with pytest.raises(InvalidInputError):
        await pg.docs.write_rows(ns, other)


async def test_delete_leaves_no_orphans(pg: Pg) -> None:
    ns = await new_namespace(pg)
    a = make_batch(ns, [("alpha one", vec(1)), ("alpha two", vec(0, 1))])
    b = make_batch(ns, [("beta one", vec(1, 1))])
    await pg.docs.write_rows(ns, a)
    await pg.docs.write_rows(ns, b)
    assert await pg.docs.delete_document_rows(ns, a.document.id) is True
    assert await pg.docs.delete_document_rows(ns, a.document.id) is False
    assert await table_counts(pg, ns) == {"khora_documents": 1, "khora_chunks": 1, "khora_terms": 2}
    orphans = await pg.pool.fetchval(
        "SELECT count(*) FROM khora_terms t WHERE t.namespace_id = $1 AND NOT EXISTS "
        "(SELECT 1 FROM khora_chunks c WHERE c.namespace_id = t.namespace_id AND c.id = t.chunk_id)",
        ns,
    )
    assert orphans == 0
    assert await pg.docs.delete_namespace_rows(ns) is True
    assert await pg.docs.delete_namespace_rows(ns) is False
    assert await table_counts(pg, ns) == {"khora_documents": 0, "khora_chunks": 0, "khora_terms": 0}
    assert await pg.docs.get_namespace(ns) is None


async def totals(conn: Any, ns: str) -> tuple[int, int]:
    """The namespace's (chunks, BM25 length) as the triggers keep them, checked against a
    count of its chunk rows."""
    kept = await conn.fetchrow(
        "SELECT coalesce(sum(chunks), 0) AS n, coalesce(sum(terms), 0) AS t "
        "FROM khora_chunk_totals WHERE namespace_id = $1",
        ns,
    )
    counted = await conn.fetchrow(
        "SELECT count(*) AS n, coalesce(sum(term_count), 0) AS t FROM khora_chunks WHERE namespace_id = $1",
        ns,
    )
    assert (kept["n"], kept["t"]) == (counted["n"], counted["t"]), ns
    return int(counted["n"]), int(counted["t"])


async def test_chunk_totals_stay_exact_through_every_write(pg: Pg) -> None:
    """``khora_chunk_totals`` (BM25's N and total length, kept by triggers) equals a count of
    the chunk rows after concurrent writes, a replace, a refused write, a delete, an update
    by hand and a namespace delete, in which its rows go too."""
    ns, other = await new_namespace(pg), await new_namespace(pg)
    batches = [
        make_batch(ns, [(f"writer {i} chunk {j} " + "word " * (i + j), vec(1)) for j in range(i + 1)])
        for i in range(6)
    ]
    await asyncio.gather(*(pg.docs.write_rows(ns, b) for b in batches))
    await pg.docs.write_rows(other, make_batch(other, [("elsewhere entirely", vec(1))]))
    n, length = await totals(pg.pool, ns)
    assert n == 21 and length > n
    assert await pg.docs.count_chunks(ns) == 21

    new = make_batch(ns, [("a replacement", vec(1))], replaces=[batches[5].document.id])
    await pg.docs.write_rows(ns, new)
    with pytest.raises(InvalidInputError):
        await pg.docs.write_rows(ns, new)  # stored already: rolled back, totals untouched
    assert (await totals(pg.pool, ns))[0] == 16
    assert await pg.docs.delete_document_rows(ns, batches[0].document.id) is True
    async with pg.pool.transaction() as conn:
        await conn.execute(
            "UPDATE khora_chunks SET term_count = term_count + 5 WHERE namespace_id = $1 AND document_id = $2",
            ns,
            batches[1].document.id,
        )
    assert (await totals(pg.pool, ns))[0] == 15
    assert (await pg.docs.stats(ns)).chunks == 15
    assert (await totals(pg.pool, other))[0] == 1

    assert await pg.docs.delete_namespace_rows(ns) is True
    assert await pg.pool.fetchval("SELECT count(*) FROM khora_chunk_totals WHERE namespace_id = $1", ns) == 0
    assert await pg.docs.count_chunks(ns) == 0
    assert (await totals(pg.pool, other))[0] == 1


async def test_chunk_totals_are_computed_for_a_store_written_before_them(fresh_schema: str) -> None:
    """A database migrated before schema 4 has chunks but no totals: the migration counts
    them, and BM25 scores come out as before."""
    await migrate(fresh_schema, DIM)
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        store = PostgresDocumentStore(pool)
        await store.create_namespace(Namespace(namespace_id="ns", created_at=T0))
        batch = make_batch("ns", [(t, vec(1)) for t in ("zebra banana", "banana cherry durian", "cherry")])
        await store.write_rows("ns", batch)
        before = [
            (h.chunk.id, h.score)
            for h in (await PostgresKeywordIndex(pool).search("ns", "banana", limit=5)).hits
        ]
        # What a store looked like before schema 4.
        async with pool.transaction() as conn:
            for event in ("insert", "delete", "update_old", "update_new"):
                await conn.execute(f"DROP TRIGGER khora_chunk_totals_on_{event} ON khora_chunks")
            await conn.execute("DROP TABLE khora_chunk_totals")
            await conn.execute("DELETE FROM khora_schema_version WHERE version = 4")
    finally:
        await pool.aclose()

    assert await migrate(fresh_schema, DIM) == [4]
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        assert (await totals(pool, "ns"))[0] == 3
        after = [
            (h.chunk.id, h.score)
            for h in (await PostgresKeywordIndex(pool).search("ns", "banana", limit=5)).hits
        ]
        assert after == before and len(after) == 2
        await PostgresDocumentStore(pool).write_rows("ns", make_batch("ns", [("one more banana", vec(1))]))
        assert (await totals(pool, "ns"))[0] == 4
    finally:
        await pool.aclose()


async def test_posting_lengths_are_filled_in_for_a_store_written_before_them(fresh_schema: str) -> None:
    """A database migrated before schema 6 has postings without their chunk's length: the
    migration copies each chunk's ``term_count`` into its postings, BM25 scores come out as
    before, and new writes carry the length themselves."""
    await migrate(fresh_schema, DIM)
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    texts = ("zebra banana", "banana cherry durian banana", "cherry")
    try:
        store = PostgresDocumentStore(pool)
        await store.create_namespace(Namespace(namespace_id="ns", created_at=T0))
        await store.write_rows("ns", make_batch("ns", [(t, vec(1)) for t in texts]))
        before = [
            (h.chunk.id, h.score)
            for h in (await PostgresKeywordIndex(pool).search("ns", "banana cherry", limit=5)).hits
        ]
        # What a store looked like before schema 6.
        async with pool.transaction() as conn:
            await conn.execute("ALTER TABLE khora_terms DROP CONSTRAINT khora_terms_pkey")
            await conn.execute("ALTER TABLE khora_terms DROP COLUMN chunk_terms")
            await conn.execute(
                "ALTER TABLE khora_terms ADD CONSTRAINT khora_terms_pkey "
                "PRIMARY KEY (namespace_id, term, chunk_id) INCLUDE (tf)"
            )
            await conn.execute(
                "CREATE INDEX ix_khora_chunks_term_count ON khora_chunks (namespace_id, id) INCLUDE (term_count)"
            )
            await conn.execute("DELETE FROM khora_schema_version WHERE version = 6")
    finally:
        await pool.aclose()

    assert await migrate(fresh_schema, DIM) == [6]
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    mismatched = (
        "SELECT count(*) FROM khora_terms t JOIN khora_chunks c "
        "ON c.namespace_id = t.namespace_id AND c.id = t.chunk_id WHERE t.chunk_terms <> c.term_count"
    )
    try:
        assert await pool.fetchval(mismatched) == 0
        assert await pool.fetchval("SELECT count(*) FROM khora_terms") == 6
        dropped = "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1"
        assert await pool.fetchval(dropped, "ix_khora_chunks_term_count") == 0
        after = [
            (h.chunk.id, h.score)
            for h in (await PostgresKeywordIndex(pool).search("ns", "banana cherry", limit=5)).hits
        ]
        assert after == before and len(after) == 3
        await PostgresDocumentStore(pool).write_rows("ns", make_batch("ns", [("one more banana", vec(1))]))
        assert await pool.fetchval("SELECT count(*) FROM khora_terms") == 8
        assert await pool.fetchval(mismatched) == 0
    finally:
        await pool.aclose()


async def test_namespace_isolation(pg: Pg) -> None:
    ns1, ns2 = await new_namespace(pg), await new_namespace(pg)
    b1 = make_batch(ns1, [("shared words here", vec(1))], doc_id="same-id")
    b2 = make_batch(ns2, [("shared words here", vec(1))], doc_id="same-id-2")
    await pg.docs.write_rows(ns1, b1)
    await pg.docs.write_rows(ns2, b2)
    assert await pg.docs.get_documents(ns1, ["same-id-2"]) == []
    assert await pg.docs.get_chunks(ns1, [b2.chunks[0].id]) == []
    assert await pg.docs.find_document_by_hash(ns1, b2.document.content_hash) == b1.document.model_copy()
    for page in (
        await pg.vectors.search(ns1, vec(1), limit=10),
        await pg.keywords.search(ns1, "shared words", limit=10),
    ):
        assert {h.chunk.namespace_id for h in page.hits} == {ns1}
        assert [h.chunk.id for h in page.hits] == [b1.chunks[0].id]
    assert await pg.docs.delete_document_rows(ns1, "same-id-2") is False
    assert await pg.docs.count_documents(ns2) == 1


# -- vector search --------------------------------------------------------------------------


async def test_vector_search_order_scores_and_min_similarity(pg: Pg) -> None:
    ns = await new_namespace(pg)
    vectors = {"same": vec(1), "diag": vec(1, 1), "ortho": vec(0, 1), "opposite": vec(-1, 0.1), "none": None}
    batch = make_batch(ns, [(name, v) for name, v in vectors.items()])
    await pg.docs.write_rows(ns, batch)
    q = np.asarray(vec(1), dtype=np.float64)

    def cosine(v: list[float]) -> float:
        a = np.asarray(v)
        return float(a @ q / (np.linalg.norm(a) * np.linalg.norm(q)))

    page = await pg.vectors.search(ns, vec(1), limit=10, min_similarity=-1.0)
    assert [h.chunk.content for h in page.hits] == ["same", "diag", "ortho", "opposite"]
    assert [h.rank for h in page.hits] == [1, 2, 3, 4]
    for hit in page.hits:
        assert hit.score == pytest.approx(cosine(vectors[hit.chunk.content]), abs=1e-5)  # type: ignore[arg-type]
    assert page.pushed_keys == [] and page.post_filtered_keys == []

    page = await pg.vectors.search(ns, vec(1), limit=10)  # default 0.0 drops the negative cosine
    assert [h.chunk.content for h in page.hits] == ["same", "diag", "ortho"]
    page = await pg.vectors.search(ns, vec(1), limit=10, min_similarity=0.5)
    assert [h.chunk.content for h in page.hits] == ["same", "diag"]
    page = await pg.vectors.search(ns, vec(1), limit=1, ef_search=10)
    assert [h.chunk.content for h in page.hits] == ["same"]
    assert (await pg.vectors.search(ns, vec(1), limit=0)).hits == []
    with pytest.raises(InvalidInputError):
        await pg.vectors.search(ns, [1.0, 0.0], limit=3)


async def test_vector_search_uses_hnsw_index_with_ef_search(pg: Pg) -> None:
    ns = await new_namespace(pg)
    rng = np.random.default_rng(7)
    points = rng.normal(size=(300, DIM)).astype(np.float32)
    for start in range(0, 300, 100):
        await pg.docs.write_rows(
            ns, make_batch(ns, [(f"p{i}", points[i].tolist()) for i in range(start, start + 100)])
        )
    q = rng.normal(size=DIM)
    sims = points @ q / (np.linalg.norm(points, axis=1) * np.linalg.norm(q))
    exact = [f"p{i}" for i in np.argsort(-sims)[:10]]
    page = await pg.vectors.search(ns, q.tolist(), limit=10, ef_search=200)
    got = [h.chunk.content for h in page.hits]
    assert len(set(got) & set(exact)) >= 9  # HNSW is approximate; ef_search 200 over 300 points is near exact
    scores = [h.score for h in page.hits]
    assert scores == sorted(scores, reverse=True)

    async def plan(conn: asyncpg.Connection) -> str:
        async with conn.transaction():
            # A tiny table sorts faster than it walks HNSW; penalise sorting to see the index is usable.
            await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
            rows = await conn.fetch(
                "EXPLAIN SELECT id FROM khora_chunks c WHERE c.namespace_id = $1 "
                "ORDER BY c.embedding <=> $2 LIMIT 5",
                ns,
                np.asarray(q, dtype=np.float32),
            )
        return "\n".join(r[0] for r in rows)

    assert "ix_khora_chunks_embedding_hnsw" in await pg.pool.read(plan)


async def test_pooled_connections_keep_the_hnsw_settings_through_khoras_statements(pg: Pg) -> None:
    """A vector search at the default ef_search runs without a SET LOCAL: every pooled
    connection starts with the pool's HNSW settings. A released connection is not reset
    (no second round trip per statement), so no statement of Khora's may change a session
    setting: after searches with another ef_search (SET LOCAL), writes and deletes on every
    connection, each still shows the startup settings."""
    raw = pg.pool.raw
    size = pg.pool.config.pool_max_size
    expected = (str(pg.pool.config.hnsw_ef_search), "strict_order" if pg.pool.iterative_scan else "off")
    assert pg.pool.session_ef_search == pg.pool.config.hnsw_ef_search

    async def settings_of_every_connection() -> list[tuple[str, str]]:
        held = [await raw.acquire() for _ in range(size)]  # all of them at once
        try:
            return [
                (await c.fetchval("SHOW hnsw.ef_search"), await c.fetchval("SHOW hnsw.iterative_scan"))
                for c in held
            ]
        finally:
            for c in held:
                await raw.release(c)

    assert await settings_of_every_connection() == [expected] * size
    ns = await new_namespace(pg)
    batch = make_batch(ns, [("a", vec(1)), ("b", vec(0, 1))])
    await pg.docs.write_rows(ns, batch)
    searches = [pg.vectors.search(ns, vec(1), limit=2, ef_search=7) for _ in range(2 * size)]
    pages = await asyncio.gather(*searches)
    assert all([h.chunk.content for h in page.hits] == ["a", "b"] for page in pages)
    await asyncio.gather(*(pg.docs.get_documents(ns, [batch.document.id]) for _ in range(size)))
    assert await pg.docs.delete_document_rows(ns, batch.document.id) is True
    assert await settings_of_every_connection() == [expected] * size

    # What the missing reset means: a session SET (which Khora never runs) would outlive
    # the release. asyncpg still rolls back a transaction left open.
    async def change(conn: asyncpg.Connection) -> None:
        await conn.execute("SET hnsw.ef_search = 7")

    await pg.pool.read(change)
    changed = await settings_of_every_connection()
    assert ("7", expected[1]) in changed
    held = [await raw.acquire() for _ in range(size)]
    for c in held:
        await c.execute(f"SET hnsw.ef_search = {expected[0]}")
        await raw.release(c)
    assert await settings_of_every_connection() == [expected] * size


async def test_vector_search_ranks_exactly_when_the_index_walk_gives_up(pg: Pg) -> None:
    """A small namespace beside a crowd of nearer vectors: when the HNSW walk stops before
    finding ``limit`` of its rows (here ``hnsw.max_scan_tuples = 1`` on the connection), the
    search ranks the namespace exactly instead of returning fewer hits."""
    ours, crowd = await new_namespace(pg), await new_namespace(pg)
    rng = np.random.default_rng(11)
    q = rng.normal(size=DIM)
    near = q + 0.05 * rng.normal(size=(200, DIM))
    await pg.docs.write_rows(crowd, make_batch(crowd, [(f"c{i}", near[i].tolist()) for i in range(200)]))
    far = rng.normal(size=(4, DIM))
    await pg.docs.write_rows(ours, make_batch(ours, [(f"o{i}", far[i].tolist()) for i in range(4)]))
    sims = far @ q / (np.linalg.norm(far, axis=1) * np.linalg.norm(q))
    expected = [f"o{i}" for i in np.argsort(-sims)]
    # asyncpg passes unknown DSN keys as settings; a table this small would otherwise be
    # sorted rather than walked.
    dsn = f"{pg.dsn}&hnsw.max_scan_tuples=1&enable_seqscan=off&enable_sort=off"
    pool = await open_pool(StorageConfig(database_url=dsn, pool_max_size=1), dim=DIM)
    try:
        setting = await pool.read(lambda conn: conn.fetchval("SHOW hnsw.max_scan_tuples"))
        assert setting == "1"
        page = await PostgresVectorIndex(pool).search(
            ours, q.tolist(), limit=4, min_similarity=-1.0, ef_search=10
        )
        assert [h.chunk.content for h in page.hits] == expected
    finally:
        await pool.aclose()


# -- BM25 -----------------------------------------------------------------------------------


def test_tokenize() -> None:
    assert tokenize("The QUICK brown fox, and the Ünïcode café!") == [
        "quick",
        "brown",
        "fox",
        "ünïcode",
        "café",
    ]
    assert tokenize("of the and") == []


def test_tokenize_stems_as_the_embedded_store_does() -> None:
    assert tokenize("Painting, painted and paints!") == ["paint", "paint", "paint"]
    assert tokenize("running runs ran") == ["run", "run", "ran"]


async def test_terms_stored_before_stemming_are_stemmed_once(fresh_schema: str) -> None:
    """A database written by an older Khora holds unstemmed terms: opening it moves each
    term's postings to its Porter stem (merging tf where two words share a stem), keeps
    every chunk's length, and records that it did, so the next open does nothing."""
    texts = ["painting the painted fence", "paint paints", "a quiet harbour"]
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        store = PostgresDocumentStore(pool)
        await store.create_namespace(Namespace(namespace_id="ns", created_at=T0))
        batch = make_batch("ns", [(t, vec(1)) for t in texts], doc_id="d1")
        await store.write_rows("ns", batch)
        stemmed = sorted(
            tuple(r) for r in await pool.fetch("SELECT term, chunk_id, tf, chunk_terms FROM khora_terms")
        )
        lengths = await pool.fetch("SELECT id, term_count FROM khora_chunks ORDER BY id")
    finally:
        await pool.aclose()
    # What an older Khora stored: the same tokens, not stemmed.
    conn = await asyncpg.connect(fresh_schema)
    try:
        await conn.execute("DELETE FROM khora_terms")
        for c in batch.chunks:
            words = [w for w in re.findall(r"\w+", c.search_text.lower()) if w not in STOPWORDS]
            await conn.executemany(
                "INSERT INTO khora_terms (namespace_id, term, chunk_id, tf, chunk_terms) "
                "VALUES ('ns', $1, $2, $3, $4)",
                [(term, c.id, tf, len(words)) for term, tf in Counter(words).items()],
            )
        await conn.execute("DELETE FROM khora_settings WHERE key = 'bm25_terms'")
    finally:
        await conn.close()

    await migrate(fresh_schema, DIM)
    pool = await open_pool(StorageConfig(database_url=fresh_schema), dim=DIM)
    try:
        restemmed = await pool.fetch("SELECT term, chunk_id, tf, chunk_terms FROM khora_terms")
        assert sorted(tuple(r) for r in restemmed) == stemmed
        assert await pool.fetch("SELECT id, term_count FROM khora_chunks ORDER BY id") == lengths
        assert await pool.fetchval("SELECT value FROM khora_settings WHERE key = 'bm25_terms'") == "porter"
        page = await PostgresKeywordIndex(pool).search("ns", "paints", limit=5)
        assert {h.chunk.content for h in page.hits} == {texts[0], texts[1]}
    finally:
        await pool.aclose()


def bm25(
    corpus: dict[str, list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    """Okapi BM25 with Lucene's idf, written out independently of the SQL."""
    n = len(corpus)
    avg = sum(len(t) for t in corpus.values()) / n
    scores: dict[str, float] = {}
    for cid, terms in corpus.items():
        tf = Counter(terms)
        s = 0.0
        for q in set(query):
            if tf[q] == 0:
                continue
            df = sum(1 for t in corpus.values() if q in t)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf[q] * (k1 + 1) / (tf[q] + k1 * (1 - b + b * len(terms) / avg))
        if s > 0:
            scores[cid] = s
    return scores


async def test_bm25_matches_hand_computed_scores(pg: Pg) -> None:
    ns, noise = await new_namespace(pg), await new_namespace(pg)
    texts = [
        "apple banana apple cherry",
        "banana cherry durian",
        "zebra banana",
        "cherry cherry cherry elderberry fig",
        "the and of",  # stopwords only: length 0, still counted in N
    ]
    batch = make_batch(ns, [(t, vec(1)) for t in texts])
    await pg.docs.write_rows(ns, batch)
    # Another namespace full of the rare term must not change this namespace's statistics.
    await pg.docs.write_rows(
        noise, make_batch(noise, [("zebra zebra zebra", vec(1))] * 1 + [("zebra", vec(1))])
    )
    corpus = {c.id: tokenize(c.content) for c in batch.chunks}
    assert corpus[batch.chunks[0].id] == ["appl", "banana", "appl", "cherri"]  # Porter stems

    page = await pg.keywords.search(ns, "Zebra banana?", limit=10)
    expected = bm25(corpus, tokenize("zebra banana"))
    assert page.hits[0].chunk.content == "zebra banana"  # the rare term wins
    assert [h.chunk.id for h in page.hits] == sorted(expected, key=lambda k: (-expected[k], k))
    for hit in page.hits:
        assert hit.score == pytest.approx(expected[hit.chunk.id], rel=1e-9)
    assert [h.rank for h in page.hits] == list(range(1, len(page.hits) + 1))

    page = await pg.keywords.search(ns, "cherry", limit=2)
    expected = bm25(corpus, tokenize("cherry"))
    assert [h.chunk.id for h in page.hits] == sorted(expected, key=lambda k: -expected[k])[:2]
    assert page.hits[0].chunk.content.startswith("cherry cherry cherry")
    assert (await pg.keywords.search(ns, "the of", limit=5)).hits == []
    assert (await pg.keywords.search(ns, "unknownword", limit=5)).hits == []


async def test_custom_bm25_parameters(pg: Pg) -> None:
    ns = await new_namespace(pg)
    batch = make_batch(ns, [("cat cat cat dog", vec(1)), ("cat bird", vec(1)), ("dog", vec(1))])
    await pg.docs.write_rows(ns, batch)
    corpus = {c.id: tokenize(c.content) for c in batch.chunks}
    index = PostgresKeywordIndex(pg.pool, StorageConfig(bm25_k1=2.0, bm25_b=0.3))
    page = await index.search(ns, "cat", limit=5)
    expected = bm25(corpus, ["cat"], k1=2.0, b=0.3)
    assert {h.chunk.id: h.score for h in page.hits} == pytest.approx(expected, rel=1e-9)


# -- filters --------------------------------------------------------------------------------


async def test_filter_pushdown_in_vector_and_keyword_search(pg: Pg) -> None:
    ns = await new_namespace(pg)
    for i in range(12):
        await pg.docs.write_rows(
            ns,
            make_batch(
                ns,
                [(f"quarterly report number {i}", vec(1, i / 10))],
                source_type="email" if i % 3 == 0 else "slack",
                occurred_at=T0 + timedelta(days=i),
                metadata={"tier": i % 4},
            ),
        )
    f = RecallFilter.parse({"source_type": {"$eq": "email"}, "occurred_at": {"$gte": T0 + timedelta(days=1)}})
    for page in (
        await pg.vectors.search(ns, vec(1), limit=10, filter=f),
        await pg.keywords.search(ns, "quarterly report", limit=10, filter=f),
    ):
        got = sorted(h.chunk.content for h in page.hits)
        assert got == sorted(f"quarterly report number {i}" for i in (3, 6, 9))
        assert all(f.matches(h.chunk.filter_record()) for h in page.hits)
        assert set(page.pushed_keys) == {"source_type", "occurred_at"}

    f = RecallFilter.parse({"metadata.tier": {"$in": [1, 2]}})
    page = await pg.vectors.search(ns, vec(1), limit=3, filter=f)
    assert len(page.hits) == 3
    assert all(h.chunk.metadata["tier"] in (1, 2) for h in page.hits)
    assert set(page.pushed_keys) | set(page.post_filtered_keys) == {"metadata.tier"}


async def test_pushed_filters_agree_with_the_in_memory_evaluator(pg: Pg) -> None:
    ns = await new_namespace(pg)
    written: list[Chunk] = []
    for i in range(10):
        batch = make_batch(
            ns,
            [(f"status update {i}", vec(1, i / 10))],
            source_type=[None, "email", "slack"][i % 3],
            occurred_at=None if i == 4 else T0 + timedelta(days=i),
            metadata={
                "tier": i % 4,
                "when": datetime(2024, 1, 10 + i, tzinfo=UTC),
                "team": {"name": f"t{i % 2}"},
            },
        )
        await pg.docs.write_rows(ns, batch)
        written += batch.chunks
    records = {c.id: (await pg.docs.get_chunks(ns, [c.id]))[0].filter_record() for c in written}
    filters = [
        {"source_type": {"$ne": "email"}},
        {"occurred_at": {"$lt": T0 + timedelta(days=5)}},
        {"$or": [{"metadata.tier": {"$gte": 3}}, {"metadata.team.name": {"$eq": "t0"}}]},
        {"metadata.when": {"$gte": {"$date": "2024-01-15T00:00:00Z"}}},  # needs the 0002 SQL function
        {"$not": {"source_type": {"$in": ["email", "slack"]}}},
    ]
    for spec in filters:
        f = RecallFilter.parse(spec)
        expected = sorted(cid for cid, rec in records.items() if f.matches(rec))
        vpage = await pg.vectors.search(ns, vec(1), limit=50, filter=f, min_similarity=-1.0)
        kpage = await pg.keywords.search(ns, "status update", limit=50, filter=f)
        assert sorted(h.chunk.id for h in vpage.hits) == expected, spec
        assert sorted(h.chunk.id for h in kpage.hits) == expected, spec


# -- connection failures --------------------------------------------------------------------


async def test_bad_password_is_config_error_fast(postgres_dsn: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        await PostgresDocumentStore.connect(
            StorageConfig(database_url=with_password(postgres_dsn, "wrong-password")), dim=DIM
        )
    assert time.monotonic() - t0 < 5
    assert info.value.setting == "KHORA_DATABASE_URL"
    assert "KHORA_DATABASE_URL" in str(info.value) and "wrong-password" not in str(info.value)


async def test_unknown_database_is_config_error(postgres_dsn: str) -> None:
    parts = urlsplit(postgres_dsn)
    dsn = urlunsplit(parts._replace(path="/no_such_database_khora"))
    with pytest.raises(ConfigError, match="KHORA_DATABASE_URL"):
        await open_pool(StorageConfig(database_url=dsn), dim=DIM)


async def test_refused_port_is_unavailable_fast(postgres_dsn: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError) as info:
        await open_pool(StorageConfig(database_url=with_port(postgres_dsn, free_port())), dim=DIM)
    assert time.monotonic() - t0 < 5
    assert info.value.setting == "KHORA_DATABASE_URL" and "KHORA_DATABASE_URL" in str(info.value)


async def test_unroutable_host_times_out_as_unavailable(postgres_dsn: str) -> None:
    parts = urlsplit(postgres_dsn)
    creds = parts.netloc.rsplit("@", 1)[0]
    dsn = urlunsplit(parts._replace(netloc=f"{creds}@10.255.255.1:5432"))
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError):
        await open_pool(StorageConfig(database_url=dsn, connect_timeout_s=1.0), dim=DIM)
    assert time.monotonic() - t0 < 4


async def test_missing_pgvector_privilege_is_config_error(postgres_dsn: str) -> None:
    admin = await asyncpg.connect(postgres_dsn)
    name = f"khora_noext_{uuid.uuid4().hex[:8]}"
    try:
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        except asyncpg.InsufficientPrivilegeError:
            pytest.skip("the test role may not create databases")
        is_super = await admin.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if is_super:
            pytest.skip("a superuser can always create the extension")
        dsn = urlunsplit(urlsplit(postgres_dsn)._replace(path=f"/{name}"))
        with pytest.raises(ConfigError, match="CREATE EXTENSION vector"):
            await open_pool(StorageConfig(database_url=dsn), dim=DIM)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.close()


async def test_read_survives_a_killed_connection(pg: Pg, postgres_dsn: str) -> None:
    ns = await new_namespace(pg)
    await pg.docs.write_rows(ns, make_batch(ns, [("still readable", vec(1))]))
    for _ in range(2):
        pids = [await pg.pool.fetchval("SELECT pg_backend_pid()") for _ in range(3)]
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", pids)
        finally:
            await conn.close()
        assert await pg.docs.count_chunks(ns) == 1  # a dead pooled connection is retried once


async def test_reconnects_after_server_restart(pg: Pg, postgres_server: Any) -> None:
    if not postgres_server.managed:
        pytest.skip("the server comes from KHORA_DATABASE_URL; this session cannot restart it")
    ns = await new_namespace(pg)
    await pg.docs.write_rows(ns, make_batch(ns, [("survives a restart", vec(1))]))
    await asyncio.to_thread(postgres_server.stop)
    try:
        t0 = time.monotonic()
        with pytest.raises(StorageUnavailableError):
            await pg.docs.count_chunks(ns)
        with pytest.raises(StorageUnavailableError):
            await pg.docs.write_rows(ns, make_batch(ns, [("while down", vec(1))]))
        assert time.monotonic() - t0 < 10
    finally:
        await asyncio.to_thread(postgres_server.start)
    assert await pg.docs.count_chunks(ns) == 1
    page = await pg.vectors.search(ns, vec(1), limit=5)
    assert [h.chunk.content for h in page.hits] == ["survives a restart"]
