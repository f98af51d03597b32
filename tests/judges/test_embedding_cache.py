"""The embedding cache: each distinct text embedded once per model and maximum length, across runs and judges."""

import hashlib

import numpy as np
import pytest

from judgments.judges import (EmbedCount, EmbeddingKey, MemoryEmbeddingCache, SemanticJudge, embed, make_judge,
                              text_sha256)

from .conftest import context


class CountingEmbedder:
    """Vectors drawn from each text's hash (dimension 4); records every text it was asked to encode."""

    def __init__(self, backend: str = "numpy", model: str = "m", max_length: int = 256) -> None:
        self.backend, self.model, self.max_length = backend, model, max_length
        self.cache_model = f"{backend}:{model}"
        self.asked: list[str] = []

    def encode(self, texts):
        self.asked += texts
        rows = [np.random.default_rng(int(text_sha256(text)[:12], 16)).normal(size=4) for text in texts]
        return np.array([row / np.linalg.norm(row) for row in rows], dtype=np.float32).reshape(len(texts), 4)

    def describe(self):
        return {"backend": self.backend, "model": self.model, "max_length": self.max_length}


def test_the_key_is_the_sha256_of_the_utf8_text_as_given():
    assert text_sha256("Café ") == hashlib.sha256("Café ".encode("utf-8")).hexdigest()
    assert text_sha256("Café") != text_sha256("Café ") != text_sha256("café ")


def test_each_distinct_text_is_embedded_once_and_rows_come_in_order():
    embedder, cache, count = CountingEmbedder(), MemoryEmbeddingCache(), EmbedCount()
    vectors = embed(embedder, ["b", "a", "b", "c", "a"], cache, count)

    assert embedder.asked == ["b", "a", "c"]
    assert np.array_equal(vectors, embedder.encode(["b", "a", "b", "c", "a"]))
    assert (count.embedded, count.cached, len(cache)) == (3, 0, 3)
    assert EmbeddingKey("numpy:m", 256, text_sha256("a")) in cache.vectors

    embedder.asked.clear()
    again = embed(embedder, ["c", "d", "a"], cache, count)
    assert embedder.asked == ["d"]
    assert np.array_equal(again, embedder.encode(["c", "d", "a"]))
    assert (count.embedded, count.cached) == (4, 2)
    assert str(count) == "4 texts embedded, 2 from the cache"


def test_without_a_cache_texts_are_still_embedded_once_per_call():
    embedder = CountingEmbedder()
    assert embed(embedder, ["x", "x", "y"], None).shape == (3, 4)
    assert embedder.asked == ["x", "y"]
    assert embed(embedder, [], None).shape[0] == 0


def pool(documents):
    reference = "Retrieval-augmented generation grounds answers in documents."
    return [context(document, reference) for document in documents]


def test_a_second_run_of_the_judge_over_the_same_pool_embeds_nothing():
    embedder, cache = CountingEmbedder(), MemoryEmbeddingCache()
    documents = [f"document {i % 7}" for i in range(40)]  # 7 distinct documents over 40 pairs
    first = SemanticJudge(embedder=embedder, embedding_cache=cache)
    verdicts = first.batch_judge(pool(documents))
    # 7 documents and the reference; the pairs go 32 to a step, and the second step finds its 8 texts cached
    assert (first.embed_count.embedded, first.embed_count.cached) == (8, 8)

    embedder.asked.clear()
    second = make_judge("semantic", {}, embedder=embedder, embedding_cache=cache)  # a new run, the same cache
    again = second.batch_judge(pool(documents))

    assert embedder.asked == []
    assert (second.embed_count.embedded, second.embed_count.cached) == (0, 16)
    assert [v.score for v in again] == [v.score for v in verdicts]


def test_a_changed_document_is_embedded_again():
    embedder, cache = CountingEmbedder(), MemoryEmbeddingCache()
    SemanticJudge(embedder=embedder, embedding_cache=cache).batch_judge(pool(["one", "two"]))
    embedder.asked.clear()
    judge = SemanticJudge(embedder=embedder, embedding_cache=cache)
    judge.batch_judge(pool(["one", "two, edited"]))

    assert embedder.asked == ["two, edited"]
    assert (judge.embed_count.embedded, judge.embed_count.cached) == (1, 2)


def test_two_backends_or_lengths_never_share_vectors():
    cache = MemoryEmbeddingCache()
    numpy_side, torch_side = CountingEmbedder("numpy"), CountingEmbedder("sentence-transformers")
    longer = CountingEmbedder("numpy", max_length=512)
    for embedder in (numpy_side, torch_side, longer):
        SemanticJudge(embedder=embedder, embedding_cache=cache).batch_judge(pool(["one", "two"]))

    assert numpy_side.asked == torch_side.asked == longer.asked  # each embedded all three texts itself
    assert len(numpy_side.asked) == 3 and len(cache) == 9
    assert {key.model for key in cache.vectors} == {"numpy:m", "sentence-transformers:m"}


def test_the_provenance_names_the_embedder_so_grades_are_per_backend():
    numpy_judge = SemanticJudge(embedder=CountingEmbedder("numpy"))
    torch_judge = SemanticJudge(embedder=CountingEmbedder("sentence-transformers"))
    assert numpy_judge.describe()["embedder"]["backend"] == "numpy"
    assert numpy_judge.describe() != torch_judge.describe()
    assert SemanticJudge().describe()["embedder"] == {"backend": "numpy", "max_length": 256,
                                                      "model": "sentence-transformers/all-MiniLM-L6-v2"}


def test_a_judge_embeds_references_and_documents_with_the_real_model_once(semantic_available):
    judge = SemanticJudge()
    pairs = pool(["RAG grounds answers in retrieved documents."] * 3 + ["Bananas are yellow."])
    first = judge.batch_judge(pairs)
    second = judge.batch_judge(pairs)

    assert (judge.embed_count.embedded, judge.embed_count.cached) == (3, 3)
    assert [v.score for v in first] == [v.score for v in second]
    assert first[0].score == pytest.approx(first[1].score) and first[0].score > first[3].score
