-- Khora schema 3: chunk vectors stay in the table row (storage MAIN) instead of pgvector's
-- default EXTERNAL, which moves the vector of every wide row to the TOAST table. Exact
-- scans (a filtered search, or a namespace the planner does not send through HNSW) and
-- per-chunk similarity reads then read the row's page, not one TOAST fetch per row: an
-- exact top-100 scan of a 2,953-chunk namespace went from 12.5 ms to 4.3 ms (median).
-- MAIN still moves a vector out when its row cannot fit a page (very wide models).
-- Rows written before this migration keep out-of-line vectors until they are rewritten.
ALTER TABLE khora_chunks ALTER COLUMN embedding SET STORAGE MAIN;
