"""The write path: chunking, dedup, skeleton selection, extraction, resolution, and the
``IngestPipeline`` that lands a document in one atomic write."""

from __future__ import annotations

from khora_core.ingest.chunking import TextSpan, chunk_text, count_tokens, split_sentences
from khora_core.ingest.dedup import content_hash
from khora_core.ingest.extract_base import ChunkExtraction, ExtractedEntity, ExtractedRelation, Extractor
from khora_core.ingest.extract_llm import LLMExtractor
from khora_core.ingest.extract_offline import OfflineExtractor
from khora_core.ingest.keywords import KeywordMatcher, keyword_links
from khora_core.ingest.pipeline import BatchOutcome, IngestPipeline
from khora_core.ingest.resolve import EntityResolver, entity_id, normalise_name
from khora_core.ingest.skeleton import select_core_chunks

__all__ = [
    "BatchOutcome",
    "ChunkExtraction",
    "EntityResolver",
    "ExtractedEntity",
    "ExtractedRelation",
    "Extractor",
    "IngestPipeline",
    "KeywordMatcher",
    "LLMExtractor",
    "OfflineExtractor",
    "TextSpan",
    "chunk_text",
    "content_hash",
    "count_tokens",
    "entity_id",
    "keyword_links",
    "normalise_name",
    "select_core_chunks",
    "split_sentences",
]
