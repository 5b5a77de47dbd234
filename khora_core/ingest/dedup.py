"""Content hashing for deduplication within a namespace."""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["content_hash", "normalise_content"]

_WHITESPACE = re.compile(r"\s+")


def normalise_content(text: str) -> str:
    """The form two texts must share to count as the same content.

    Unicode NFC (so composed and decomposed accents match), surrounding whitespace
    stripped, and every run of whitespace (including newlines) collapsed to one space.
    Case and punctuation are kept: they can change meaning.
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalise_content` (UTF-8)."""
    return hashlib.sha256(normalise_content(text).encode("utf-8")).hexdigest()
