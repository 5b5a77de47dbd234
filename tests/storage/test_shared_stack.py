"""One embedded data folder, many openers in one process: they share one open store.

A second *process* still gets the writer lock's typed ``StorageError``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from khora_core import Khora, KhoraConfig, KhoraSync
from khora_core.errors import ConfigError, StorageError
from khora_core.storage.shared import shared_folders
from tests.fixtures.embedders import RecordingEmbedder


def _under(root: Path) -> dict[str, int]:
    """The shared stores open under ``root`` (other tests of the session may hold their own)."""
    prefix = str(root.resolve())
    return {k: n for k, n in shared_folders().items() if k.startswith(prefix)}


def _config(folder: Path) -> KhoraConfig:
    return KhoraConfig(storage={"data_dir": str(folder), "database_url": None})


def _second_process_opens(folder: Path) -> str:
    script = textwrap.dedent(
        f"""
        import asyncio
        from khora_core import Khora, KhoraConfig
        from khora_core.errors import StorageError
        from tests.fixtures.embedders import RecordingEmbedder

        async def main():
            cfg = KhoraConfig(storage={{"data_dir": {str(folder)!r}, "database_url": None}})
            try:
                async with Khora(config=cfg, embedder=RecordingEmbedder()) as kb:
                    print("OPENED", [n.namespace_id for n in await kb.list_namespaces()])
            except StorageError as exc:
                print("REFUSED", exc)

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path.cwd()
    )
    return out.stdout + out.stderr


async def test_two_khoras_on_one_folder_share_the_store(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    a = await Khora(config=_config(folder), embedder=RecordingEmbedder()).open()
    b = await Khora(config=_config(folder), embedder=RecordingEmbedder()).open()
    try:
        assert _under(tmp_path) == {str(folder.resolve()): 2}
        ns = (await a.create_namespace("shared", namespace="shared-ns")).namespace_id
        await a.remember("Ada Lovelace wrote the first algorithm.", namespace=ns, external_id="ada")
        # b sees a's write at once: one store, one set of caches
        assert [n.namespace_id for n in await b.list_namespaces()] == [ns]
        await b.remember("Charles Babbage designed the Analytical Engine.", namespace=ns)
        assert (await a.stats(ns)).documents == 2
        # a second process is still refused while this one holds the folder
        out = await asyncio.to_thread(_second_process_opens, folder)
        assert "REFUSED" in out and "already open for writing by another process" in out, out
    finally:
        await a.aclose()
    # closing one Khora leaves the other working
    assert _under(tmp_path) == {str(folder.resolve()): 1}
    assert (await b.stats("shared-ns")).documents == 2
    await b.aclose()
    await b.aclose()  # a second close does nothing
    assert _under(tmp_path) == {}
    # the last close released the folder: another process can open it now
    out = await asyncio.to_thread(_second_process_opens, folder)
    assert "OPENED ['shared-ns']" in out, out


async def test_sync_and_async_khoras_share_a_folder_across_event_loops(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    sync_kb = KhoraSync(config=_config(folder), embedder=RecordingEmbedder()).open()
    try:
        async with Khora(config=_config(folder), embedder=RecordingEmbedder()) as kb:
            ns = (await kb.create_namespace(namespace="loops")).namespace_id
            # writes from the bridge's loop and from this loop at the same time
            await asyncio.gather(
                asyncio.to_thread(sync_kb.remember, "Marie Curie discovered polonium.", namespace=ns),
                kb.remember("Alan Turing described the Turing machine.", namespace=ns),
                asyncio.to_thread(sync_kb.remember, "Grace Hopper wrote a compiler.", namespace=ns),
            )
            assert (await kb.stats(ns)).documents == 3
        assert sync_kb.stats(ns).documents == 3  # the async Khora's close left the store open
    finally:
        sync_kb.close()
    assert _under(tmp_path) == {}


async def test_reopening_after_the_last_close_opens_a_fresh_store(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    for round_ in range(3):
        async with Khora(config=_config(folder), embedder=RecordingEmbedder()) as kb:
            await kb.create_namespace(namespace=f"round-{round_}")
            assert len(await kb.list_namespaces()) == round_ + 1
    assert _under(tmp_path) == {}


async def test_concurrent_first_opens_open_the_store_once(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    kbs = [Khora(config=_config(folder), embedder=RecordingEmbedder()) for _ in range(4)]
    await asyncio.gather(*(kb.open() for kb in kbs))
    try:
        assert _under(tmp_path) == {str(folder.resolve()): 4}
        stacks = {id(kb.engine.stack.shared) for kb in kbs}
        assert len(stacks) == 1
    finally:
        await asyncio.gather(*(kb.aclose() for kb in kbs))
    assert _under(tmp_path) == {}


async def test_another_dimension_on_an_open_folder_is_a_config_error(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with Khora(config=_config(folder), embedder=RecordingEmbedder(16)):
        with pytest.raises(ConfigError, match="16-dimension embeddings, not 8"):
            await Khora(config=_config(folder), embedder=RecordingEmbedder(8)).open()
        assert _under(tmp_path) == {str(folder.resolve()): 1}  # the refused open holds nothing
    assert _under(tmp_path) == {}


async def test_a_failed_first_open_leaves_nothing_registered(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(ConfigError, match="Cannot create the Khora data folder"):
        await Khora(config=_config(blocker / "data"), embedder=RecordingEmbedder()).open()
    assert _under(tmp_path) == {}


async def test_a_second_stack_object_in_process_is_refused_with_the_way_to_share(tmp_path: Path) -> None:
    from khora_core.storage.sqlite_lance import SqliteLanceStack

    config = _config(tmp_path / "data").storage
    async with SqliteLanceStack(config, dim=16):
        with pytest.raises(StorageError, match="another SqliteLanceStack in this process"):
            await SqliteLanceStack(config, dim=16).open()
