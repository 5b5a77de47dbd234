-- Khora schema 4: each namespace's chunk count and total BM25 length, kept by triggers.
-- BM25 needs N (the namespace's chunks) and their mean length on every keyword search;
-- counting them is a scan of the namespace's chunk rows (27 ms at 40,000 chunks, growing
-- with the store). khora_chunk_totals holds both sums, updated by statement triggers on
-- khora_chunks in the writing transaction itself, so they are exact whatever writes the
-- rows. A namespace's totals are spread over slots (the writing backend's pid modulo 16) so
-- that concurrent writers to one namespace do not queue on one row; readers add the slots.
CREATE TABLE IF NOT EXISTS khora_chunk_totals (
    namespace_id  text     NOT NULL,
    slot          smallint NOT NULL,
    chunks        bigint   NOT NULL DEFAULT 0,
    terms         bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace_id, slot)
);

CREATE OR REPLACE FUNCTION khora_chunk_totals_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO khora_chunk_totals AS t (namespace_id, slot, chunks, terms)
    SELECT namespace_id, (pg_backend_pid() % 16)::smallint, count(*), coalesce(sum(term_count), 0)
    FROM khora_new_chunks GROUP BY namespace_id
    ON CONFLICT (namespace_id, slot)
    DO UPDATE SET chunks = t.chunks + EXCLUDED.chunks, terms = t.terms + EXCLUDED.terms;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION khora_chunk_totals_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO khora_chunk_totals AS t (namespace_id, slot, chunks, terms)
    SELECT namespace_id, (pg_backend_pid() % 16)::smallint, -count(*), -coalesce(sum(term_count), 0)
    FROM khora_old_chunks GROUP BY namespace_id
    ON CONFLICT (namespace_id, slot)
    DO UPDATE SET chunks = t.chunks + EXCLUDED.chunks, terms = t.terms + EXCLUDED.terms;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION khora_chunk_totals_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO khora_chunk_totals AS t (namespace_id, slot, chunks, terms)
    SELECT namespace_id, (pg_backend_pid() % 16)::smallint, sum(n), sum(len)
    FROM (
        SELECT namespace_id, 1 AS n, term_count AS len FROM khora_new_chunks
        UNION ALL
        SELECT namespace_id, -1, -term_count FROM khora_old_chunks
    ) AS delta
    GROUP BY namespace_id
    ON CONFLICT (namespace_id, slot)
    DO UPDATE SET chunks = t.chunks + EXCLUDED.chunks, terms = t.terms + EXCLUDED.terms;
    RETURN NULL;
END $$;

-- Creating the triggers locks out concurrent writers until this transaction commits, so
-- the totals computed below are exact from the start.
DROP TRIGGER IF EXISTS khora_chunk_totals_on_insert ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_insert AFTER INSERT ON khora_chunks
    REFERENCING NEW TABLE AS khora_new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_add();
DROP TRIGGER IF EXISTS khora_chunk_totals_on_delete ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_delete AFTER DELETE ON khora_chunks
    REFERENCING OLD TABLE AS khora_old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_remove();
DROP TRIGGER IF EXISTS khora_chunk_totals_on_update ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_update AFTER UPDATE ON khora_chunks
    REFERENCING OLD TABLE AS khora_old_chunks NEW TABLE AS khora_new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_change();

DELETE FROM khora_chunk_totals;
INSERT INTO khora_chunk_totals (namespace_id, slot, chunks, terms)
SELECT namespace_id, 0, count(*), coalesce(sum(term_count), 0) FROM khora_chunks GROUP BY namespace_id;
