"""The ``khora`` command: remember files, recall, inspect and forget from a terminal.

Works on the embedded store (``--data-dir`` / ``KHORA_DATA_DIR``, default ``./.khora``) or
on PostgreSQL + Neo4j (``--url`` / ``KHORA_DATABASE_URL`` with ``KHORA_NEO4J_URL``)::

    khora remember notes/ README.md          # .txt and .md files, folders recursively
    khora recall "who leads Project Bluefin?" --filter '{"source_type": "meeting-notes"}'
    khora recall "..." --json                # RecallResult as JSON
    khora stats
    khora namespaces
    khora forget --external-id notes/old.md
    khora repair                             # finish documents a failed write left half-stored
    khora demo                               # the sample-corpus walkthrough

User errors (a bad filter, a missing namespace, an unreachable server) print one
``error: ...`` line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from khora_core.errors import InvalidInputError, KhoraError
from khora_core.models import SearchMode
from khora_core.render import summarize_batch

__all__ = ["collect_files", "main", "summarize_batch"]

TEXT_SUFFIXES = {".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown"}
EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2


# -- files ------------------------------------------------------------------------------------
def collect_files(paths: Sequence[str | Path]) -> list[Path]:
    """Expand files and folders into the ``.txt`` / ``.md`` files to remember, sorted, once each.

    Raises:
        InvalidInputError: a path does not exist, or a named file is not ``.txt`` / ``.md``.
    """
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix.lower() in TEXT_SUFFIXES:
                    found[child] = None
        elif path.is_file():
            if path.suffix.lower() not in TEXT_SUFFIXES:
                raise InvalidInputError(f"{str(path)!r} is not a .txt or .md file")
            found[path] = None
        else:
            raise InvalidInputError(f"{str(path)!r} does not exist")
    return list(found)


def _external_id(path: Path) -> str:
    # The path relative to the working directory names the file stably, so remembering
    # it again from the same place replaces the old version.
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def _file_item(path: Path, extra: dict[str, Any]) -> dict[str, Any]:
    # The file's modification time stands in for when its content happened, so date
    # filters and recency work on remembered files.
    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    return {
        "content": path.read_text(encoding="utf-8"),
        "title": path.stem,
        "external_id": _external_id(path),
        "content_type": TEXT_SUFFIXES[path.suffix.lower()],
        "source_type": "file",
        "source_name": "khora-cli",
        "source_url": path.resolve().as_uri(),
        "occurred_at": modified,
        "source_timestamp": modified,
        **extra,
    }


# -- arguments --------------------------------------------------------------------------------
def _json_arg(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{option} is not valid JSON ({exc.msg} at column {exc.colno}): {text}"
        ) from exc


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    # Subcommands repeat the connection options with SUPPRESS defaults, so they may be given
    # before or after the subcommand without one place overwriting the other.
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--url", default=default, help="postgresql:// URL (default: KHORA_DATABASE_URL, else embedded)"
    )
    parser.add_argument(
        "--data-dir", default=default, help="embedded store folder (default: KHORA_DATA_DIR or ./.khora)"
    )
    parser.add_argument(
        "--namespace",
        "-n",
        default=argparse.SUPPRESS if suppress else "default",
        help="namespace id (default: default)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``khora`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="khora", description="Khora: hybrid vector + graph memory for LLM apps."
    )
    _common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("remember", help="remember .txt/.md files and folders (recursively)")
    _common(p, suppress=True)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--tag", action="append", default=[], help="a tag for every file (repeatable)")
    p.add_argument("--metadata", help="JSON object stored as every file's metadata")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")

    p = sub.add_parser("recall", help="answer a question from memory")
    _common(p, suppress=True)
    p.add_argument("query")
    p.add_argument("--mode", choices=[m.value for m in SearchMode], default=SearchMode.HYBRID.value)
    p.add_argument("--filter", help='a recall filter as JSON, e.g. \'{"metadata.tier": "gold"}\'')
    p.add_argument(
        "--preset", default=None, help="read-path preset: default, memory, fast, ... (KHORA_PRESET)"
    )
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--min-similarity", type=float, default=0.0)
    p.add_argument("--json", action="store_true", help="print the RecallResult as JSON")

    p = sub.add_parser("stats", help="document, chunk, entity and relationship counts")
    _common(p, suppress=True)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("namespaces", help="list namespaces")
    _common(p, suppress=True)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("forget", help="remove a document by id or external id")
    _common(p, suppress=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("document_id", nargs="?", metavar="DOCUMENT_ID")
    target.add_argument("--external-id")

    p = sub.add_parser("repair", help="find and finish documents a failed write left half-stored")
    _common(p, suppress=True)
    p.add_argument("--json", action="store_true", help="print the RepairReport as JSON")

    p = sub.add_parser("demo", help="remember the sample corpus and answer its demo questions")
    _common(p, suppress=True)
    return parser


# -- commands ---------------------------------------------------------------------------------
def _open(args: argparse.Namespace) -> Any:
    from khora_core import Khora

    return Khora(args.url, data_dir=args.data_dir, preset=getattr(args, "preset", None))


async def _ensure_namespace(kb: Any, namespace: str) -> None:
    await kb.create_namespace(namespace, namespace=namespace)


async def _remember(args: argparse.Namespace) -> int:
    extra: dict[str, Any] = {}
    if args.metadata is not None:
        metadata = _json_arg(args.metadata, "--metadata")
        if not isinstance(metadata, dict):
            raise InvalidInputError("--metadata must be a JSON object")
        extra["metadata"] = metadata
    if args.tag:
        extra["tags"] = list(args.tag)
    files = collect_files(args.paths)
    if not files:
        raise InvalidInputError("no .txt or .md files found in " + ", ".join(args.paths))
    items, labels, unreadable = [], [], []
    for path in files:
        try:
            items.append(_file_item(path, extra))
            labels.append(str(path))
        except (OSError, UnicodeDecodeError) as exc:
            unreadable.append(f"  {path}: cannot read as UTF-8 text ({exc})")
    async with _open(args) as kb:
        await _ensure_namespace(kb, args.namespace)
        batch = await kb.remember_batch(items, namespace=args.namespace, progress=not args.quiet)
    summary, failed = summarize_batch(batch, labels)
    if unreadable:
        summary = summary.replace(f"failed: {failed}", f"failed: {failed + len(unreadable)}")
        summary += "\n" + "\n".join(unreadable)
    print(summary)
    return EXIT_OK if failed + len(unreadable) == 0 else EXIT_NOTHING


async def _recall(args: argparse.Namespace) -> int:
    from khora_core.render import format_result

    flt = _json_arg(args.filter, "--filter") if args.filter is not None else None
    if flt is not None and not isinstance(flt, dict):
        raise InvalidInputError("--filter must be a JSON object")
    async with _open(args) as kb:
        await _ensure_namespace(kb, args.namespace)
        result = await kb.recall(
            args.query,
            namespace=args.namespace,
            limit=args.limit,
            mode=args.mode,
            min_similarity=args.min_similarity,
            filter=flt,
        )
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(format_result(result))
    return EXIT_OK


async def _stats(args: argparse.Namespace) -> int:
    from khora_core.render import format_stats

    async with _open(args) as kb:
        await _ensure_namespace(kb, args.namespace)
        stats = await kb.stats(args.namespace)
    print(json.dumps(stats.model_dump(mode="json")) if args.json else format_stats(stats))
    return EXIT_OK


async def _namespaces(args: argparse.Namespace) -> int:
    from khora_core.render import format_namespaces

    async with _open(args) as kb:
        namespaces = await kb.list_namespaces()
    if args.json:
        print(json.dumps([ns.model_dump(mode="json") for ns in namespaces], indent=2))
    else:
        print(format_namespaces(namespaces))
    return EXIT_OK


async def _forget(args: argparse.Namespace) -> int:
    what = f"external id {args.external_id!r}" if args.external_id else f"document {args.document_id!r}"
    async with _open(args) as kb:
        removed = await kb.forget(args.document_id, namespace=args.namespace, external_id=args.external_id)
    if removed:
        print(f"forgot {what} in namespace {args.namespace!r}")
        return EXIT_OK
    print(f"nothing to forget: no {what} in namespace {args.namespace!r}", file=sys.stderr)
    return EXIT_NOTHING


async def _repair(args: argparse.Namespace) -> int:
    async with _open(args) as kb:
        report = await kb.repair(namespace=args.namespace)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(
            f"namespace {args.namespace!r}: {report.documents_checked} documents checked, "
            f"{len(report.stranded_graphs)} stranded graphs removed, {len(report.rebuilt)} documents rebuilt, "
            f"{len(report.failed)} failed"
        )
        for doc_id, why in report.failed.items():
            print(f"  {doc_id}: {why}", file=sys.stderr)
    return EXIT_OK if report.clean else EXIT_NOTHING


_COMMANDS = {
    "remember": _remember,
    "recall": _recall,
    "stats": _stats,
    "namespaces": _namespaces,
    "forget": _forget,
    "repair": _repair,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``khora`` command.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` when omitted.

    Returns:
        The exit status: 0 on success, 1 when there was nothing to do or some files
        failed, 2 on a user error (argparse also exits 2 on bad usage).
    """
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from khora_core.demo import main as demo_main

        return demo_main(["--data-dir", args.data_dir] if args.data_dir else [])
    try:
        if args.command == "recall" and args.limit < 1:
            raise InvalidInputError(f"--limit must be at least 1, got {args.limit}")
        return asyncio.run(_COMMANDS[args.command](args))
    except KhoraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
