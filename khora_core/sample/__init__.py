"""Khora's sample corpus: a small invented world for demos, tutorials and smoke tests.

Thirty-six short documents (press releases, memos, meeting notes, emails, wiki pages)
about four fictional organisations (Northwind Robotics, Halcyon Bio, Parallax Labs and the
venture fund Meridian Ventures), their people and their projects from 2022 to 2025. Every
name and event is fictional and was written for this repository.

The world supports simple lookups, multi-hop questions joined through a shared entity,
filtered questions (by source type, date or metadata) and questions it cannot answer;
:func:`load_sample_questions` lists one or more of each kind::

    from khora_core.sample import load_sample_corpus, to_remember_items

    async with Khora() as kb:
        ns = await kb.create_namespace(namespace="sample")
        await kb.remember_batch(to_remember_items(load_sample_corpus()), namespace="sample")
"""

from __future__ import annotations

import copy
import functools
import json
from datetime import datetime, timezone
from importlib import resources
from typing import Any

__all__ = ["load_sample_corpus", "load_sample_questions", "parse_iso_datetime", "to_remember_items"]

_CORPUS_FILE = "corpus.json"


@functools.lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files(__name__).joinpath(_CORPUS_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def load_sample_corpus() -> list[dict[str, Any]]:
    """The sample documents, as JSON-ready dicts (a fresh copy on every call).

    Returns:
        One dict per document with ``content``, ``title``, ``occurred_at`` (an ISO-8601
        string ending in ``Z``), ``source_type``, ``source_name``, ``external_id``
        (``"sample-001"`` ...), ``content_type`` (``text/plain`` or ``text/markdown``),
        ``metadata`` (``team.name``, ``tier``, ``confidential``, ``score``) and ``tags``.
    """
    return copy.deepcopy(_raw()["documents"])


def load_sample_questions() -> list[dict[str, Any]]:
    """Questions about the sample corpus, one or more of each kind.

    Returns:
        Dicts with ``question``, ``kind`` (``"lookup"``, ``"multi-hop"``, ``"filtered"`` or
        ``"off-topic"``), ``filter`` (a recall filter dict or ``None``),
        ``expected_external_ids`` (the documents that answer it; empty when the corpus
        cannot), ``key_terms`` (names the question turns on) and, where the corpus holds
        one, ``answer``; multi-hop questions also name their ``bridge`` entity.
    """
    return copy.deepcopy(_raw()["questions"])


def parse_iso_datetime(value: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` allowed on Python 3.10) into an aware UTC datetime."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def to_remember_items(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turn sample documents into ``Khora.remember_batch`` items (``occurred_at`` as a datetime)."""
    items = []
    for doc in documents:
        item = dict(doc)
        if isinstance(item.get("occurred_at"), str):
            item["occurred_at"] = parse_iso_datetime(item["occurred_at"])
        items.append(item)
    return items
