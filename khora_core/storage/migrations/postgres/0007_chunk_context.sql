-- Khora schema 7: each chunk keeps its search context (``Chunk.context``: what ``remember``
-- was given as ``context=``, its document's title and, in Markdown, the heading path above
-- it), which BM25 has always indexed with the chunk. Reads return it, so a keyword hit can
-- be weighed by the text it was found in. Chunks written before this read back ``NULL``.
ALTER TABLE khora_chunks ADD COLUMN IF NOT EXISTS context text;
