-- Khora schema 6: each BM25 posting carries its chunk's length. BM25 weighs a term's
-- frequency by the chunk's length (term_count); with that length in the postings' primary
-- key (INCLUDE, beside tf), a keyword search reads the postings of the question's terms
-- and nothing else, instead of looking each posting's chunk up in a second index (a
-- random B-tree probe per posting, most of a keyword search's time once common terms
-- have tens of thousands of postings). Chunks are written once, so the copy never goes
-- stale. The chunks' (namespace_id, id) INCLUDE (term_count) index of schema 5 served
-- only that lookup and is dropped.
ALTER TABLE khora_terms ADD COLUMN IF NOT EXISTS chunk_terms integer;
UPDATE khora_terms t SET chunk_terms = c.term_count
FROM khora_chunks c
WHERE c.namespace_id = t.namespace_id AND c.id = t.chunk_id AND t.chunk_terms IS NULL;
ALTER TABLE khora_terms ALTER COLUMN chunk_terms SET NOT NULL;
ALTER TABLE khora_terms DROP CONSTRAINT IF EXISTS khora_terms_pkey;
ALTER TABLE khora_terms ADD CONSTRAINT khora_terms_pkey PRIMARY KEY (namespace_id, term, chunk_id) INCLUDE (tf, chunk_terms);
DROP INDEX IF EXISTS ix_khora_chunks_term_count;
