"""The packaged all-MiniLM-L6-v2, loaded offline (slow: loads torch and the model)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from khora_core.embedding.local import SentenceTransformerEmbedder, default_model_path, resolve_model_path

pytestmark = pytest.mark.slow


def test_default_model_path_is_the_packaged_folder() -> None:
    path = default_model_path()
    assert (path / "config.json").is_file() and (path / "modules.json").is_file()
    assert resolve_model_path("all-MiniLM-L6-v2") == (str(path), True)
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")[0] == str(path)
    assert resolve_model_path(str(path)) == (str(path.resolve()), True)


async def test_embeds_offline_unit_length_and_semantic() -> None:
    embedder = SentenceTransformerEmbedder()
    docs = await embedder.embed_documents(
        ["The cat sat on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue rose by ten percent."]
    )
    arr = np.asarray(docs)
    assert arr.shape == (3, 384) and embedder.dimension == 384
    assert np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-5)
    assert arr[0] @ arr[1] > arr[0] @ arr[2] + 0.2
    query = np.asarray(await embedder.embed_query("Where is the cat?"))
    assert query @ arr[0] > query @ arr[2]
    assert await embedder.embed_documents([]) == []


async def test_model_is_loaded_once_and_shared() -> None:
    from khora_core.embedding import local

    a = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    b = SentenceTransformerEmbedder(str(default_model_path()))
    await a.embed_query("warm up")
    await b.embed_query("warm up")
    assert a._model()[0] is b._model()[0]
    assert len({id(m) for m, _ in local._CACHE.values()}) == len(local._CACHE)


async def test_unknown_model_fails_offline_with_a_clear_error() -> None:
    from khora_core.errors import ConfigError

    with pytest.raises(ConfigError, match="KHORA_EMBEDDING_MODEL"):
        await SentenceTransformerEmbedder("no-such-org/no-such-model-xyz").embed_query("x")


async def test_long_texts_in_smaller_batches_give_the_same_vectors() -> None:
    embedder = SentenceTransformerEmbedder()
    long = "The committee met in Geneva to review the treaty and its annexes. " * 40
    texts = [f"{i} {long[: 60 * (i + 1)]}" for i in range(12)] + ["Acme", "Maya Chen", "Lisbon"]
    got = np.asarray(await embedder.embed_documents(texts))
    model, _ = embedder._model()
    plain = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    assert got.shape == plain.shape and np.allclose(got, plain, atol=1e-5)


async def test_the_packaged_model_runs_traced_and_matches_encode() -> None:
    from khora_core.embedding import local
    from khora_core.embedding._traced import TracedEncoder

    embedder = SentenceTransformerEmbedder()
    texts = ["Acme", "Maya Chen joined Northwind Labs in 2021.", "Lisbon " * 300, "Where is the cat?"]
    got = np.asarray(await embedder.embed_documents(texts))
    model, _ = embedder._model()
    traced = local._TRACED[id(model)]
    assert isinstance(traced, TracedEncoder)  # the fast path is the one in use
    plain = model.encode(texts, batch_size=2, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(got, plain, atol=1e-5)
    # Batched with padding (two at a time) or one by one: the same rows, in input order.
    assert np.allclose(traced.encode(texts, 2), plain, atol=1e-5)
    assert np.allclose(np.asarray(await embedder.embed_query(texts[1])), plain[1], atol=1e-5)


async def test_a_small_call_runs_on_query_threads_and_restores_the_setting() -> None:
    import torch

    from khora_core.embedding import local

    embedder = SentenceTransformerEmbedder(query_threads=1)
    seen: list[int] = []
    embedder._model()  # loaded before the spy counts
    real = local._encode_in_passes

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    before = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local, "_encode_in_passes", spy)
        embedder._encode(["Where is the cat?"])  # small: one thread
        embedder._encode([f"passage {i}" for i in range(20)])  # large: unchanged
    assert seen == [1, local._usable_cores()]
    assert torch.get_num_threads() == before


async def test_names_in_bfloat16_stay_within_cosine_0_999_and_float32_names_are_documents() -> None:
    """``embed_names`` at ``bfloat16`` goes through a bfloat16 trace whose vectors stay
    within cosine 0.999 of ``encode``'s; at ``float32`` it is ``embed_documents``."""
    from khora_core.embedding import local
    from khora_core.embedding._traced import TracedEncoder

    names = ["Maya Chen", "Northwind Robotics", "Lisbon", "Barack Obama", "European Union", "IFFM"]
    exact = np.asarray(await SentenceTransformerEmbedder().embed_documents(names))
    as_documents = np.asarray(await SentenceTransformerEmbedder(name_precision="float32").embed_names(names))
    assert np.array_equal(as_documents, exact)
    embedder = SentenceTransformerEmbedder(name_precision="bfloat16")
    reduced = np.asarray(await embedder.embed_names(names))
    model, _ = embedder._model()
    assert isinstance(local._TRACED_BF16[id(model)], TracedEncoder)  # the bfloat16 path ran
    assert not np.array_equal(reduced, exact)
    assert np.allclose(np.linalg.norm(reduced, axis=1), 1.0, atol=1e-5)
    assert ((reduced * exact).sum(1) >= 0.999).all()
    assert await embedder.embed_names([]) == []


class _CountingEncoder:
    """Wraps a traced encoder and records ``label`` for each call."""

    def __init__(self, inner: Any, label: str, calls: list[str]) -> None:
        self.inner, self.label, self.calls = inner, label, calls

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(self.label)
        return self.inner.encode(*args, **kwargs)


async def test_chunks_and_questions_in_bfloat16_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``precision="bfloat16"`` encodes chunks (a large call) and a question (a small one)
    through the bfloat16 trace, within cosine 0.999 of float32; names keep their own
    setting; the default stays float32."""
    from khora_core.embedding import local

    texts = [
        f"Passage {i}: Maya Chen led the storage work at Northwind Robotics in {1990 + i}." for i in range(70)
    ]
    question = "Who led the storage work at Northwind Robotics?"
    names = ["Maya Chen", "Northwind Robotics"]
    default = SentenceTransformerEmbedder()
    assert default.precision == "float32"
    exact = np.asarray(await default.embed_documents(texts))
    exact_q = np.asarray(await default.embed_query(question))
    exact_names = np.asarray(await default.embed_documents(names))

    embedder = SentenceTransformerEmbedder(precision="bfloat16", name_precision="float32")
    model, locks = embedder._model()
    embedder._traced(model, locks, bf16=True)  # both traces built before they are watched
    calls: list[str] = []
    monkeypatch.setitem(
        local._TRACED, id(model), _CountingEncoder(local._TRACED[id(model)], "float32", calls)
    )
    monkeypatch.setitem(
        local._TRACED_BF16, id(model), _CountingEncoder(local._TRACED_BF16[id(model)], "bfloat16", calls)
    )
    reduced = np.asarray(await embedder.embed_documents(texts))
    reduced_q = np.asarray(await embedder.embed_query(question))
    assert calls and set(calls) == {"bfloat16"}
    calls.clear()
    assert np.array_equal(np.asarray(await embedder.embed_names(names)), exact_names)
    assert set(calls) == {"float32"}
    assert not np.array_equal(reduced, exact)
    assert ((reduced * exact).sum(1) >= 0.999).all()
    assert float(reduced_q @ exact_q) >= 0.999


def test_an_unknown_precision_is_a_config_error() -> None:
    from khora_core.config import KhoraConfig
    from khora_core.errors import ConfigError

    with pytest.raises(ConfigError, match="KHORA_EMBEDDING_NAME_PRECISION"):
        SentenceTransformerEmbedder(name_precision="float16")
    with pytest.raises(ConfigError, match="KHORA_EMBEDDING_PRECISION"):
        SentenceTransformerEmbedder(precision="float16")
    embedder = SentenceTransformerEmbedder.from_config(KhoraConfig(embedding={"precision": "auto"}).embedding)
    assert embedder.precision == "auto"


async def test_a_small_call_does_not_wait_for_a_large_one_and_concurrent_calls_agree() -> None:
    """A small call on the traced forward pass holds only the tokenizer lock: it finishes
    while the model's lock is held (as by a large call); a large call waits for it. Calls
    side by side give the vectors they give alone."""
    import concurrent.futures

    import torch

    from khora_core.embedding import local

    embedder = SentenceTransformerEmbedder(query_threads=1)
    question, mentions = "Where did Maya Chen study?", ["Maya Chen", "the university"]
    alone = [
        np.asarray(await embedder.embed_query(question)),
        np.asarray(await embedder.embed_documents(mentions)),
    ]
    _, locks = embedder._model()
    pool = concurrent.futures.ThreadPoolExecutor(4)
    try:
        with locks.model:  # a large call's hold
            small = pool.submit(embedder._encode, [question])
            large = pool.submit(embedder._encode, [f"passage {i}" for i in range(20)])
            assert np.allclose(small.result(timeout=60)[0], alone[0], atol=1e-6)
            await asyncio.sleep(0.2)
            assert not large.done()
        assert len(large.result(timeout=120)) == 20
        side_by_side = [pool.submit(embedder._encode, [question] if i % 2 else mentions) for i in range(8)]
        for i, fut in enumerate(side_by_side):
            expected = alone[0][None, :] if i % 2 else alone[1]
            assert np.allclose(np.asarray(fut.result(timeout=120)), expected, atol=1e-5)
        # Whatever those left behind, a large call afterwards runs on every core.
        seen: list[int] = []
        real = local._encode_in_passes

        def spy(*args: object, **kwargs: object) -> object:
            seen.append(torch.get_num_threads())
            return real(*args, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(local, "_encode_in_passes", spy)
            for fut in [pool.submit(embedder._encode, [f"passage {i}" for i in range(20)]) for _ in range(4)]:
                fut.result(timeout=120)
        assert seen == [local._usable_cores()] * 4
    finally:
        pool.shutdown(wait=True)
