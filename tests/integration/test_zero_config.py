"""Every adapter works with no arguments on the embedded default (``./.khora``), and many
of them share that one folder in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from khora_core.storage.shared import shared_folders


def _under(root: Path) -> dict[str, int]:
    """The shared stores open under ``root`` (other tests of the session may hold their own)."""
    prefix = str(root.resolve())
    return {k: n for k, n in shared_folders().items() if k.startswith(prefix)}


def test_adapters_need_no_arguments_and_share_the_default_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.documents import Document as LCDocument
    from llama_index.core.graph_stores.types import EntityNode
    from llama_index.core.schema import QueryBundle

    from khora_integrations.langchain import KhoraRetriever as LCRetriever
    from khora_integrations.langchain import KhoraVectorStore
    from khora_integrations.langgraph import KhoraStore
    from khora_integrations.llama_index import KhoraChatStore, KhoraPropertyGraphStore
    from khora_integrations.llama_index import KhoraRetriever as LIRetriever

    monkeypatch.chdir(tmp_path)
    for var in ("KHORA_DATABASE_URL", "KHORA_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    texts = ["Ada Lovelace wrote the first published algorithm.", "Charles Babbage designed the engine."]
    opened = []
    try:
        # a notebook cell run twice: the second store shares the first one's open folder
        first = KhoraVectorStore.from_texts(texts)
        again = KhoraVectorStore.from_texts(texts)
        opened += [first, again]
        assert again.similarity_search("Who wrote the first algorithm?", k=1)[0].page_content == texts[0]
        assert _under(tmp_path) == {str((tmp_path / ".khora").resolve()): 2}

        lc = LCRetriever()  # recalls where KhoraVectorStore writes by default
        opened.append(lc)
        assert lc.invoke("Who designed the engine?")[0].page_content == texts[1]

        li = LIRetriever()  # the "llama_index" namespace, created on first use: empty, not an error
        opened.append(li)
        assert li.retrieve(QueryBundle("anything")) == []

        graph = KhoraPropertyGraphStore()
        opened.append(graph)
        assert graph.get() == []
        graph.upsert_nodes([EntityNode(name="Ada Lovelace", label="PERSON")])
        assert [n.name for n in graph.get(ids=["Ada Lovelace"])] == ["Ada Lovelace"]  # type: ignore[attr-defined]

        store = KhoraStore()
        opened.append(store)
        store.put(("users", "ada"), "food", {"text": "Ada is vegetarian."})
        assert store.get(("users", "ada"), "food").value == {"text": "Ada is vegetarian."}  # type: ignore[union-attr]

        chats = KhoraChatStore()
        opened.append(chats)
        assert chats.get_keys() == []

        assert _under(tmp_path) == {str((tmp_path / ".khora").resolve()): 7}
        assert isinstance(
            first.get_by_ids([first.add_documents([LCDocument(page_content="x y z")])[0]])[0], LCDocument
        )
    finally:
        for obj in opened:
            obj.close()
    assert _under(tmp_path) == {}
