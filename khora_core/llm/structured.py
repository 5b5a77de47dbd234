"""Robust parsing of JSON objects out of raw LLM text.

Models wrap JSON in Markdown code fences, add a sentence before it, or stop mid-object
when they hit ``max_tokens``. :func:`parse_json_object` copes with all three:

1. strip code fences;
2. take the first balanced ``{...}`` object (string-aware, so braces inside strings
   do not count);
3. if the object never closes (truncated output), cut back to the last complete value
   and close the open brackets, salvaging every complete item (a half-written list item
   is dropped rather than kept with missing fields).
"""

from __future__ import annotations

import json
import re
from typing import Any

from khora_core.errors import LLMError

__all__ = ["MalformedOutputError", "parse_json_object", "repair_truncated_json", "strip_code_fences"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
#: How many cut points the truncation repair tries before giving up (keeps it O(n * k)).
_MAX_REPAIR_TRIES = 200


class MalformedOutputError(LLMError):
    """The model answered, but not with the JSON object that was asked for.

    Attributes:
        raw: the model's text (truncated to 2,000 characters).
    """

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw[:2000]


def strip_code_fences(text: str) -> str:
    """Return the content of the first Markdown code fence, or the text unchanged.

    An unclosed fence (truncated output) yields everything after the opening fence.
    """
    match = _FENCE.search(text)
    if match is None:
        return text
    return match.group(1)


def _scan(text: str, start: int) -> tuple[int | None, list[tuple[int, str, tuple[str, ...]]]]:
    """Scan a JSON object starting at ``text[start] == "{"``.

    Returns the end index (exclusive) of the balanced object, or None when it never
    closes, plus the candidate cut points ``(index, char, open_stack)`` seen on the way.
    """
    stack: list[str] = []
    cuts: list[tuple[int, str, tuple[str, ...]]] = []
    in_string = False
    escape = False
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
            cuts.append((i, ch, tuple(stack)))
        elif ch in "}]":
            if not stack:
                return None, cuts
            stack.pop()
            if not stack:
                return i + 1, cuts
            cuts.append((i, ch, tuple(stack)))
        elif ch == ",":
            cuts.append((i, ch, tuple(stack)))
        i += 1
    return None, cuts


def _closing(stack: tuple[str, ...]) -> str:
    return "".join("}" if c == "{" else "]" for c in reversed(stack))


def _inside_array_item(stack: tuple[str, ...]) -> bool:
    return any(stack[k] == "{" and stack[k - 1] == "[" for k in range(1, len(stack)))


def repair_truncated_json(fragment: str) -> Any | None:
    """Close a truncated JSON object, dropping the incomplete tail.

    Args:
        fragment: text starting with ``{`` that never closes.

    Returns:
        The parsed value, or None when no prefix can be completed into valid JSON.
    """
    _, cuts = _scan(fragment, 0)
    tries = 0
    for idx, ch, stack in reversed(cuts):
        if _inside_array_item(stack):
            continue  # a half-written list item would look complete but miss fields
        tries += 1
        if tries > _MAX_REPAIR_TRIES:
            break
        if ch == ",":
            # Drop the comma and whatever incomplete value follows it.
            candidate = fragment[:idx] + _closing(stack)
        elif ch in "{[":
            # Keep the just-opened container, empty.
            candidate = fragment[: idx + 1] + _closing(stack)
        else:
            # A nested container just closed: everything before it is complete.
            candidate = fragment[: idx + 1] + _closing(stack)
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse the first JSON object found in raw model output.

    Args:
        text: the model's answer.

    Returns:
        The parsed object.

    Raises:
        MalformedOutputError: no JSON object could be recovered.
    """
    if text is None or not str(text).strip():
        raise MalformedOutputError("The model returned an empty answer where a JSON object was expected.")
    raw = str(text)
    body = strip_code_fences(raw).strip()
    try:
        value = json.loads(body)
        if isinstance(value, dict):
            return value
    except json.JSONDecodeError:
        pass
    # Try each "{" in turn: prose before the object may itself contain braces.
    for match in re.finditer(r"\{", body):
        start = match.start()
        end, _ = _scan(body, start)
        if end is not None:
            try:
                value = json.loads(body[start:end])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
            continue
        repaired = repair_truncated_json(body[start:])
        if isinstance(repaired, dict) and repaired:  # "{" followed by junk is not an answer
            return repaired
        break
    raise MalformedOutputError(
        "The model's answer holds no parseable JSON object: " + raw[:200].replace("\n", " "), raw=raw
    )
