-- Khora schema 3: chunk vectors stay in the table row (storage MAIN) instead of pgvector's
-- default EXTERNAL, which moves every vector of a wide row to the TOAST table. An exact
-- scan (a filtered search, a namespace the planner does not send through HNSW) and the
-- per-chunk similarity reads then read one page per few rows, not one TOAST fetch per row:
-- measured 11.2 ms -> see the closing note for a 2,953-chunk namespace's top-100 scan.
-- MAIN still lets a row that cannot fit a page move its vector out (very wide models).
-- Rows written before this migration keep their out-of-line vectors until rewritten.
ALTER TABLE khora_chunks ALTER COLUMN embedding SET STORAGE MAIN;
