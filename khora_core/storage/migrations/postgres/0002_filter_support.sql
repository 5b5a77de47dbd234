-- Khora schema 2: SQL support functions of the recall-filter compiler
-- (khora_core.filters.sql_postgres.POSTGRES_SUPPORT_DDL: khora_filter_iso_us, used by
-- `$date` comparisons on metadata). The DDL is CREATE OR REPLACE; migrate re-applies it
-- whenever the compiler's copy changes (its sha256 is kept in khora_settings).

{{filters_support_ddl}}
