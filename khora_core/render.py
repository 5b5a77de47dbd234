"""Plain-text rendering of Khora results for terminals (the ``khora`` command and the demo).

Every function returns a string and prints nothing, so the CLI, the demo and tests share
one rendering. Renderers read only the public models and the documented ``engine_info``
keys (``routing``, ``filter``, ``abstention_signals``, ``max_raw_vector_score``) and tolerate
missing ones.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from khora_core.models import (
    EntityProjection,
    Namespace,
    NamespaceStats,
    RecallResult,
    RelationshipProjection,
    RememberResult,
)

__all__ = [
    "format_abstention",
    "format_entities",
    "format_filter_report",
    "format_namespaces",
    "format_relationships",
    "format_result",
    "format_routing",
    "format_stats",
    "summarize_batch",
]

_INDENT = "   "
_WIDTH = 100


def _date(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else "undated"


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={_num(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return _num(value)


def excerpt(text: str, limit: int = 240) -> str:
    """Collapse whitespace and cut ``text`` at a word boundary near ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit].rsplit(" ", 1)[0] + " ..."


def format_routing(routing: Any) -> str:
    """One line for ``engine_info["routing"]``: complexity first, then the other fields."""
    if routing is None:
        return "routing: (not reported)"
    if not isinstance(routing, Mapping):
        return f"routing: {routing}"
    first = [k for k in ("complexity", "depth", "use_graph") if k in routing]
    rest = [k for k in routing if k not in first]
    parts = [f"{k}={_scalar(routing[k])}" for k in first + rest]
    return "routing: " + "  ".join(parts)


def format_filter_report(report: Any) -> str:
    """A few lines for ``engine_info["filter"]`` (a ``FilterPushdownReport`` or its dict)."""
    if report is None:
        return "filter: none"
    if hasattr(report, "model_dump"):
        report = report.model_dump(mode="json")
    elif not isinstance(report, Mapping):
        return f"filter: {report}"
    lines = [
        "filter pushdown: "
        f"pushed_down={report.get('pushed_down')}  post_filtered={report.get('post_filtered')}",
        f"{_INDENT}pushed_keys={_scalar(report.get('pushed_keys', []))}  "
        f"post_filtered_keys={_scalar(report.get('post_filtered_keys', []))}  "
        f"unenforced_keys={_scalar(report.get('unenforced_keys', []))}",
    ]
    for name, channel in (report.get("channels") or {}).items():
        if isinstance(channel, Mapping):
            lines.append(
                f"{_INDENT}{name}: pushed={_scalar(channel.get('pushed_keys', []))} "
                f"post_filtered={_scalar(channel.get('post_filtered_keys', []))}"
            )
    return "\n".join(lines)


def format_abstention(engine_info: Mapping[str, Any]) -> str:
    """The abstention verdict with ``combined_score`` and the flags that are set."""
    signals = engine_info.get("abstention_signals")
    if not isinstance(signals, Mapping):
        return "abstention: (not reported)"
    verdict = "ABSTAIN (memory does not cover this)" if signals.get("should_abstain") else "answer"
    flags = [k for k, v in signals.items() if v is True and k != "should_abstain"]
    score = signals.get("combined_score")
    line = f"abstention: {verdict}  combined_score={_num(score)}"
    top = engine_info.get("max_raw_vector_score")
    if top is not None:
        line += f"  max_raw_vector_score={_num(top)}"
    if flags:
        line += f"  flags={', '.join(flags)}"
    return line


def format_entities(entities: Sequence[EntityProjection], *, limit: int | None = None) -> str:
    """A comma-separated ``Name (TYPE)`` list, most relevant first as given."""
    shown = list(entities)[: limit or None]
    text = ", ".join(f"{e.name} ({e.type})" for e in shown)
    more = len(entities) - len(shown)
    return text + (f", ... (+{more} more)" if more > 0 else "") if shown else "(none)"


def format_relationships(
    relationships: Iterable[RelationshipProjection],
    *,
    names: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> str:
    """One ``source -[TYPE]-> target`` line per distinct relationship, in the order given.

    The same edge learned from several documents is shown once, with ``(xN)``.
    """
    names = names or {}
    counts: dict[str, int] = {}
    for r in relationships:
        src = r.source_name or names.get(r.source_id, r.source_id)
        dst = r.target_name or names.get(r.target_id, r.target_id)
        line = f"{src} -[{r.type}]-> {dst}"
        counts[line] = counts.get(line, 0) + 1
    lines = [f"{line} (x{n})" if n > 1 else line for line, n in counts.items()]
    shown = lines[: limit or None]
    if len(lines) > len(shown):
        shown.append(f"... (+{len(lines) - len(shown)} more)")
    return "\n".join(shown) if shown else "(none)"


def format_result(
    result: RecallResult,
    *,
    excerpt_chars: int = 240,
    max_entities: int = 15,
    max_relationships: int = 12,
    max_chunk_entities: int = 8,
) -> str:
    """Render a ``RecallResult`` for a terminal.

    Shows the numbered chunks (score, title, date, channels, an excerpt, entities), the
    result's entities and relationships, the routing decision, the filter pushdown report
    when a filter ran, and the abstention verdict.

    Args:
        result: what ``recall()`` returned.
        excerpt_chars: the most characters of each chunk to show.
        max_entities: the most entities to list.
        max_relationships: the most distinct relationships to list.
        max_chunk_entities: the most entity names to list under each chunk.

    Returns:
        A multi-line string without a trailing newline.
    """
    info = result.engine_info or {}
    titles = {d.id: d.title for d in result.documents}
    dates = {d.id: d.occurred_at for d in result.documents}
    out = [f"query: {result.query}", format_routing(info.get("routing"))]
    if info.get("filter") is not None:
        out.append(format_filter_report(info["filter"]))
    out.append("")
    out.append(f"chunks ({len(result.chunks)}):")
    if not result.chunks:
        out.append(f"{_INDENT}(none)")
    for n, chunk in enumerate(result.chunks, start=1):
        title = chunk.title or titles.get(chunk.document_id) or chunk.document_id
        when = _date(chunk.occurred_at or dates.get(chunk.document_id))
        via = ", ".join(chunk.channels) or "-"
        head = f"{n:>2}. [{chunk.score:.3f}] {title}  ({when})  via {via}"
        if chunk.vector_similarity is not None:
            head += f"  cos={chunk.vector_similarity:.3f}"
        out.append(head)
        body = textwrap.fill(
            excerpt(chunk.content, excerpt_chars),
            width=_WIDTH,
            initial_indent=_INDENT + " ",
            subsequent_indent=_INDENT + " ",
        )
        out.append(body)
        if chunk.entity_names:
            shown, more = (
                chunk.entity_names[:max_chunk_entities],
                len(chunk.entity_names) - max_chunk_entities,
            )
            out.append(
                f"{_INDENT} entities: {', '.join(shown)}" + (f", ... (+{more} more)" if more > 0 else "")
            )
    out.append("")
    out.append(f"entities ({len(result.entities)}): {format_entities(result.entities, limit=max_entities)}")
    names = {e.id: e.name for e in result.entities}
    out.append(f"relationships ({len(result.relationships)}):")
    rel_text = format_relationships(result.relationships, names=names, limit=max_relationships)
    out.extend(_INDENT + line for line in rel_text.splitlines())
    out.append(format_abstention(info))
    return "\n".join(out)


def format_stats(stats: NamespaceStats) -> str:
    """``namespace X: N documents, N chunks, N entities, N relationships``."""
    return (
        f"namespace {stats.namespace_id}: {stats.documents} documents, {stats.chunks} chunks, "
        f"{stats.entities} entities, {stats.relationships} relationships"
    )


def format_namespaces(namespaces: Sequence[Namespace]) -> str:
    """One line per namespace: id, name and creation time."""
    if not namespaces:
        return "(no namespaces)"
    lines = []
    for ns in sorted(namespaces, key=lambda n: n.namespace_id):
        name = f"  name={ns.name}" if ns.name and ns.name != ns.namespace_id else ""
        lines.append(f"{ns.namespace_id}{name}  created {ns.created_at.isoformat(timespec='seconds')}")
    return "\n".join(lines)


def _outcome(entry: Any) -> tuple[RememberResult | None, str | None]:
    """One batch entry as ``(result, error message)``; exactly one of them is set."""
    if isinstance(entry, RememberResult):
        return entry, None
    if isinstance(entry, BaseException):
        return None, str(entry) or type(entry).__name__
    result = getattr(entry, "result", None)
    error = getattr(entry, "error", None)
    if isinstance(result, RememberResult):
        return result, None
    if error is not None:
        return None, str(error) or type(error).__name__
    return None, "no result"


def _entries(batch: Any) -> list[Any]:
    for attr in ("items", "results", "outcomes"):
        value = getattr(batch, attr, None)
        if isinstance(value, (list, tuple)):
            return list(value)
    return list(batch)


def summarize_batch(batch: Any, labels: Sequence[str]) -> tuple[str, int]:
    """Summarise a ``BatchResult``: stored / duplicates / failed (with reasons).

    Args:
        batch: what ``Khora.remember_batch`` returned.
        labels: one label per submitted item (a file path), in order.

    Returns:
        The summary text and the number of failed items.
    """
    stored = duplicates = chunks = entities = relationships = replaced = 0
    failures: list[str] = []
    for label, entry in zip(labels, _entries(batch), strict=True):
        result, error = _outcome(entry)
        if result is None:
            failures.append(f"  {label}: {error}")
        elif result.duplicate:
            duplicates += 1
        else:
            stored += 1
            chunks += len(result.chunk_ids)
            entities += result.entity_count
            relationships += result.relationship_count
            replaced += len(result.replaced_document_ids)
    lines = [
        f"stored {stored} document(s) in {chunks} chunks"
        + (f", replacing {replaced} older version(s)" if replaced else ""),
        f"extracted {entities} entities and {relationships} relationships (counted per document,"
        " before merging across documents)",
        f"duplicates: {duplicates} (same content already stored)",
        f"failed: {len(failures)}",
        *failures,
    ]
    return "\n".join(lines), len(failures)
