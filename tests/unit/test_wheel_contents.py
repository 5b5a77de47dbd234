"""The wheel carries every file of the packages: code, migrations, the sample corpus, ``py.typed``.

A data file added to ``khora_core`` without a ``package-data`` entry would work from the
checkout and fail for every user who installs the wheel; this test builds the wheel and
compares.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("khora_core", "khora_integrations")


def _package_files() -> set[str]:
    out: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(path.relative_to(ROOT).as_posix())
    return out


@pytest.mark.slow
def test_the_wheel_holds_every_package_file(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("khora_memory-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = _package_files()
    for required in (
        "khora_core/py.typed",
        "khora_integrations/py.typed",
        "khora_core/sample/corpus.json",
        "khora_core/storage/migrations/postgres/0001_init.sql",
    ):
        assert required in expected, required  # the checkout itself still has them
    missing = sorted(expected - names)
    assert not missing, f"files of the packages missing from the wheel: {missing}"
