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

-- One function for every trigger: it adds the rows of its transition table, times the sign
-- the trigger passes (1 for rows that arrive, -1 for rows that leave). An UPDATE is the old
-- rows leaving and the new ones arriving: two triggers.
CREATE OR REPLACE FUNCTION khora_chunk_totals_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sign bigint := TG_ARGV[0]::bigint;
BEGIN
    INSERT INTO khora_chunk_totals AS t (namespace_id, slot, chunks, terms)
    SELECT namespace_id, (pg_backend_pid() % 16)::smallint, sign * count(*), sign * coalesce(sum(term_count), 0)
    FROM khora_changed_chunks GROUP BY namespace_id
    ON CONFLICT (namespace_id, slot)
    DO UPDATE SET chunks = t.chunks + EXCLUDED.chunks, terms = t.terms + EXCLUDED.terms;
    RETURN NULL;
END $$;

-- Creating the triggers locks out concurrent writers until this transaction commits, so
-- the totals computed below are exact from the start.
DROP TRIGGER IF EXISTS khora_chunk_totals_on_insert ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_insert AFTER INSERT ON khora_chunks
    REFERENCING NEW TABLE AS khora_changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_apply('1');
DROP TRIGGER IF EXISTS khora_chunk_totals_on_delete ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_delete AFTER DELETE ON khora_chunks
    REFERENCING OLD TABLE AS khora_changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_apply('-1');
DROP TRIGGER IF EXISTS khora_chunk_totals_on_update_old ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_update_old AFTER UPDATE ON khora_chunks
    REFERENCING OLD TABLE AS khora_changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_apply('-1');
DROP TRIGGER IF EXISTS khora_chunk_totals_on_update_new ON khora_chunks;
CREATE TRIGGER khora_chunk_totals_on_update_new AFTER UPDATE ON khora_chunks
    REFERENCING NEW TABLE AS khora_changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION khora_chunk_totals_apply('1');

DELETE FROM khora_chunk_totals;
INSERT INTO khora_chunk_totals (namespace_id, slot, chunks, terms)
SELECT namespace_id, 0, count(*), coalesce(sum(term_count), 0) FROM khora_chunks GROUP BY namespace_id;
