-- Khora schema 5: BM25 scores from indexes alone. A keyword search reads every posting of
-- the question's terms with its tf, and each posting's chunk length. With tf in the terms'
-- primary key (INCLUDE) and a narrow (namespace_id, id) INCLUDE (term_count) index on the
-- chunks, both are index-only scans once VACUUM has marked the pages all-visible (Khora's
-- settle runs VACUUM (ANALYZE) after large writes), instead of a random heap read per
-- posting and a scan of the namespace's wide chunk rows (which carry the embeddings).
-- On a 40,000-chunk store: median keyword search 29.6 -> 14.2 ms (docs/benchmarks.md).
CREATE INDEX IF NOT EXISTS ix_khora_chunks_term_count ON khora_chunks (namespace_id, id) INCLUDE (term_count);
ALTER TABLE khora_terms DROP CONSTRAINT IF EXISTS khora_terms_pkey;
ALTER TABLE khora_terms ADD CONSTRAINT khora_terms_pkey PRIMARY KEY (namespace_id, term, chunk_id) INCLUDE (tf);
