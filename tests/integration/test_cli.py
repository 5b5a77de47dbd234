"""The ``khora`` command end to end, in-process, on a temporary embedded store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from khora_core.cli import collect_files, main

pytestmark = pytest.mark.slow


@pytest.fixture()
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "orchard.md").write_text(
        "# Juniper Orchard\n\n## People\n\nMira Castell runs Juniper Orchard in the Vale of Ember. "
        "She grows heirloom apples and presses cider every October with her brother Teodor Castell.\n",
        encoding="utf-8",
    )
    (folder / "sub" / "harbour.txt").write_text(
        "The Saltmarsh Harbour ferry leaves at dawn. Captain Ilsa Varga has sailed it for twenty years "
        "and knows every sandbank between Saltmarsh Harbour and Gull Island.\n",
        encoding="utf-8",
    )
    (folder / "picture.png").write_bytes(b"\x89PNG not text")
    monkeypatch.chdir(tmp_path)
    return folder


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_collect_files_walks_folders_and_skips_other_types(notes: Path):
    files = collect_files([notes, notes / "orchard.md"])
    assert [f.name for f in files] == ["orchard.md", "harbour.txt"]


def test_remember_recall_stats_namespaces_forget(notes: Path, tmp_path: Path, capsys):
    store = ["--data-dir", str(tmp_path / "store")]

    code, out, _ = _run(capsys, *store, "remember", "notes", "--tag", "cli-test")
    assert code == 0, out
    assert "stored 2 document(s)" in out
    assert "failed: 0" in out

    code, out, _ = _run(capsys, *store, "remember", "notes", "-q")
    assert code == 0
    assert "duplicates: 2" in out

    code, out, _ = _run(capsys, *store, "stats", "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["namespace_id"] == "default"
    assert stats["documents"] == 2
    assert stats["chunks"] >= 2

    flt = json.dumps({"content_type": "text/markdown"})
    code, out, _ = _run(
        capsys, *store, "recall", "Who presses cider?", "--filter", flt, "--json", "--limit", "3"
    )
    assert code == 0
    result = json.loads(out)
    assert result["query"] == "Who presses cider?"
    assert result["chunks"], "the markdown note should be found"
    assert {d["external_id"] for d in result["documents"]} == {"notes/orchard.md"}
    assert {d["content_type"] for d in result["documents"]} == {"text/markdown"}
    assert all("cli-test" in d["tags"] for d in result["documents"])
    assert result["engine_info"]["filter"]["unenforced_keys"] == []
    assert "abstention_signals" in result["engine_info"]

    since = json.dumps({"occurred_at": {"$gte": {"$date": "2000-01-01T00:00:00Z"}}, "title": "harbour"})
    code, out, _ = _run(capsys, *store, "recall", "ferry", "--filter", since, "--json")
    assert code == 0
    dated = json.loads(out)
    assert [d["external_id"] for d in dated["documents"]] == ["notes/sub/harbour.txt"]
    assert dated["documents"][0]["occurred_at"] is not None

    code, out, _ = _run(capsys, *store, "recall", "Who captains the ferry to Gull Island?")
    assert code == 0
    assert "chunks (" in out and "routing:" in out and "abstention:" in out
    assert "harbour" in out

    code, out, _ = _run(capsys, *store, "-n", "other", "stats")
    assert code == 0
    assert "namespace other: 0 documents" in out

    code, out, _ = _run(capsys, *store, "namespaces", "--json")
    assert code == 0
    assert {ns["namespace_id"] for ns in json.loads(out)} == {"default", "other"}

    code, out, _ = _run(capsys, *store, "repair", "--json")  # one transaction: nothing to repair
    assert code == 0, out
    assert json.loads(out) == {
        "namespace_id": "default",
        "documents_checked": 2,
        "stranded_graphs": [],
        "rebuilt": [],
        "failed": {},
    }

    code, out, _ = _run(capsys, *store, "forget", "--external-id", "notes/orchard.md")
    assert code == 0, out
    code, _, err = _run(capsys, *store, "forget", "--external-id", "notes/orchard.md")
    assert code == 1
    assert "nothing to forget" in err

    code, out, _ = _run(capsys, *store, "recall", "ferry captain", "--json")
    harbour_id = next(
        d["id"] for d in json.loads(out)["documents"] if d["external_id"] == "notes/sub/harbour.txt"
    )
    code, out, _ = _run(capsys, *store, "forget", harbour_id)
    assert code == 0
    code, out, _ = _run(capsys, *store, "stats", "--json")
    assert json.loads(out)["documents"] == 0


def test_user_errors_exit_2_with_one_line(notes: Path, tmp_path: Path, capsys):
    store = ["--data-dir", str(tmp_path / "store")]

    code, out, err = _run(capsys, *store, "recall", "anything", "--filter", "{not json")
    assert code == 2
    assert err.startswith("error: --filter is not valid JSON")
    assert "Traceback" not in err and out == ""

    code, _, err = _run(capsys, *store, "recall", "anything", "--filter", '{"no_such_key": 1}')
    assert code == 2
    assert err.startswith("error: Invalid recall filter")
    assert len(err.strip().splitlines()) == 1

    code, _, err = _run(capsys, *store, "remember", "missing-folder")
    assert code == 2
    assert "does not exist" in err

    code, _, err = _run(capsys, *store, "-n", "nowhere", "forget", "--external-id", "x")
    assert code == 2
    assert err.startswith("error: ")
