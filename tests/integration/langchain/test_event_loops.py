"""An async ``Khora`` used by the LangChain vector store from other event loops.

On PostgreSQL + Neo4j a connection pool belongs to the loop that opened it. A Khora opened
in one ``asyncio.run`` and then used from sync code, from a later ``asyncio.run``, or from
sync code inside the loop that opened it, must still serve the store (on every stack).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain_core.documents import Document

from khora_core import Khora, KhoraConfig
from khora_integrations.langchain import KhoraVectorStore

TEXT = "Ada Lovelace wrote the first published algorithm."


def _open_in_a_finished_loop(config: KhoraConfig, embedder: Any, ns: str) -> Khora:
    kb = Khora(config=config, embedder=embedder)

    async def setup() -> None:
        await kb.open()
        await kb.create_namespace("loops", namespace=ns)
        await kb.remember(TEXT, namespace=ns, external_id="ada", metadata={"who": "ada"})

    asyncio.run(setup())  # the loop that opened kb is closed now
    return kb


def test_a_khora_from_a_finished_loop_serves_sync_and_later_async_calls(
    khora_config: KhoraConfig, embedder: Any
) -> None:
    ns = f"loops-{uuid.uuid4().hex[:10]}"
    kb = _open_in_a_finished_loop(khora_config, embedder, ns)
    store = KhoraVectorStore(kb, namespace=ns)
    expected = [Document(id="ada", page_content=TEXT, metadata={"who": "ada"})]
    try:
        assert store.get_by_ids(["ada"]) == expected
        assert [d.id for d in store.similarity_search("algorithm", k=1)] == ["ada"]

        async def later() -> list[Document]:
            return await store.aget_by_ids(["ada"])

        assert asyncio.run(later()) == expected
    finally:
        store.delete()  # the namespace
        store.close()


def test_sync_calls_inside_the_loop_that_opened_the_khora(khora_config: KhoraConfig, embedder: Any) -> None:
    ns = f"loops-{uuid.uuid4().hex[:10]}"

    async def main() -> tuple[list[Document], list[Document]]:
        async with Khora(config=khora_config, embedder=embedder) as kb:
            await kb.create_namespace("loops", namespace=ns)
            store = KhoraVectorStore(kb, namespace=ns)
            store.add_texts([TEXT], [{"who": "ada"}], ids=["ada"])  # sync, inside this loop
            got_sync = store.get_by_ids(["ada"])
            got_async = await store.aget_by_ids(["ada"])
            await store.adelete()
            store.close()
            return got_sync, got_async

    got_sync, got_async = asyncio.run(main())
    expected = [Document(id="ada", page_content=TEXT, metadata={"who": "ada"})]
    assert got_sync == expected and got_async == expected
