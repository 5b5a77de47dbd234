-- Khora schema 1: namespaces, documents, chunks (pgvector) and the BM25 term table.
-- Placeholders filled by khora_core.storage.postgres.migrate: {{dim}} (embedding
-- dimension, recorded in khora_settings), {{hnsw_m}}, {{hnsw_ef_construction}}.
-- Every statement is idempotent (IF NOT EXISTS) so a half-known database is safe.

CREATE TABLE IF NOT EXISTS khora_namespaces (
    namespace_id  text PRIMARY KEY,
    name          text,
    created_at    timestamptz NOT NULL,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb
);

CREATE TABLE IF NOT EXISTS khora_documents (
    namespace_id      text NOT NULL REFERENCES khora_namespaces (namespace_id) ON DELETE CASCADE,
    id                text NOT NULL,
    content           text NOT NULL,
    content_hash      text NOT NULL,
    occurred_at       timestamptz,
    created_at        timestamptz NOT NULL,
    source_timestamp  timestamptz,
    source_type       text,
    source_name       text,
    source_url        text,
    external_id       text,
    content_type      text NOT NULL DEFAULT 'text/plain',
    source            text,
    title             text,
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    tags              text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace_id, id)
);

CREATE INDEX IF NOT EXISTS ix_khora_documents_ns_hash ON khora_documents (namespace_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_khora_documents_ns_external ON khora_documents (namespace_id, external_id);
CREATE INDEX IF NOT EXISTS ix_khora_documents_ns_occurred ON khora_documents (namespace_id, occurred_at);

-- System columns are copied from the document so every channel filters without a join.
-- term_count is the chunk's BM25 length (tokens after stopword removal).
CREATE TABLE IF NOT EXISTS khora_chunks (
    namespace_id      text NOT NULL,
    id                text NOT NULL,
    document_id       text NOT NULL,
    idx               integer NOT NULL,
    content           text NOT NULL,
    start_char        integer NOT NULL,
    end_char          integer NOT NULL,
    token_count       integer NOT NULL DEFAULT 0,
    term_count        integer NOT NULL DEFAULT 0,
    embedding         vector({{dim}}),
    needs_extraction  boolean NOT NULL DEFAULT false,
    is_core           boolean NOT NULL DEFAULT false,
    occurred_at       timestamptz,
    created_at        timestamptz NOT NULL,
    source_timestamp  timestamptz,
    source_type       text,
    source_name       text,
    source_url        text,
    external_id       text,
    content_type      text NOT NULL DEFAULT 'text/plain',
    source            text,
    title             text,
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    tags              text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace_id, id),
    FOREIGN KEY (namespace_id, document_id)
        REFERENCES khora_documents (namespace_id, id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS ix_khora_chunks_ns_document ON khora_chunks (namespace_id, document_id, idx);
CREATE INDEX IF NOT EXISTS ix_khora_chunks_ns_occurred ON khora_chunks (namespace_id, occurred_at);
CREATE INDEX IF NOT EXISTS ix_khora_chunks_tags_gin ON khora_chunks USING gin (tags);
CREATE INDEX IF NOT EXISTS ix_khora_chunks_embedding_hnsw ON khora_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = {{hnsw_m}}, ef_construction = {{hnsw_ef_construction}});

-- BM25 postings: one row per (chunk, distinct term) with the term frequency. Document
-- frequency, chunk count and average length are computed per namespace at query time.
CREATE TABLE IF NOT EXISTS khora_terms (
    namespace_id  text NOT NULL,
    term          text NOT NULL,
    chunk_id      text NOT NULL,
    tf            integer NOT NULL,
    PRIMARY KEY (namespace_id, term, chunk_id),
    FOREIGN KEY (namespace_id, chunk_id)
        REFERENCES khora_chunks (namespace_id, id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS ix_khora_terms_ns_chunk ON khora_terms (namespace_id, chunk_id);
