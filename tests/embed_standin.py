"""A stand-in for what the `embed` branch of issue #29 adds to the pure judges (`judgments.judges.embedders`,
`judgments.judges.embedding_cache`, the semantic judge's ``backend`` setting and its ``embedder=`` and
``embedding_cache=`` arguments), written to the agreed interfaces so that the app side can be tested before
that branch lands. `install()` does nothing when the real modules exist: after the merge this file is dead and
is deleted with its call in tests/conftest.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


def install() -> None:
    if importlib.util.find_spec("judgments.judges.embedders") is not None:
        return
    from judgments import judges, outbound
    from judgments.judges import minilm, semantic
    from judgments.judges.base import (EMPTY_DOCUMENT, NO_REFERENCES, Availability, JudgeSettingsError, JudgeUnavailable,
                                       Setting, could_not_judge, one_of)

    cache = types.ModuleType("judgments.judges.embedding_cache")

    class EmbeddingKey(NamedTuple):
        model: str
        max_length: int
        text_sha256: str

    class MemoryEmbeddingCache(dict):
        def get_many(self, keys):
            return {key: self[key] for key in keys if key in self}

        def put_many(self, vectors):
            self.update(vectors)

    @dataclass
    class EmbedCount:
        embedded: int = 0
        cached: int = 0

    def text_sha256(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def embed(embedder, texts, store, count=None):
        texts = list(texts)
        keys = {text: EmbeddingKey(embedder.cache_model, embedder.max_length, text_sha256(text)) for text in texts}
        found = dict(store.get_many(list(dict.fromkeys(keys.values())))) if store is not None else {}
        missing = [text for text in dict.fromkeys(texts) if keys[text] not in found]
        new = dict(zip((keys[text] for text in missing), embedder.encode(missing))) if missing else {}
        if store is not None and new:
            store.put_many(new)
        if count is not None:
            count.embedded += len(missing)
            count.cached += len(set(keys.values())) - len(missing)
        vectors = {**found, **new}
        return np.array([vectors[keys[text]] for text in texts], dtype=np.float32).reshape(len(texts), -1)

    cache.__dict__.update(EmbeddingKey=EmbeddingKey, MemoryEmbeddingCache=MemoryEmbeddingCache, EmbedCount=EmbedCount,
                          text_sha256=text_sha256, embed=embed)

    embedders = types.ModuleType("judgments.judges.embedders")
    BACKENDS = ("numpy", "sentence-transformers", "endpoint")

    class EmbeddingEndpointError(RuntimeError):
        pass

    @dataclass(frozen=True)
    class EmbeddingEndpointConfig:
        base_url: str
        model: str
        api_key: str | None = None
        timeout: float = 30.0
        deadline: float = 120.0
        max_retries: int = 3
        batch_size: int = 64
        max_length: int = 0

    class NumpyEmbedder:
        backend, model, max_length = "numpy", semantic.MODEL, 256
        cache_model = f"numpy:{semantic.MODEL}"

        def encode(self, texts):
            return minilm.load().encode(list(texts))

        def describe(self):
            return {"backend": self.backend, "model": self.model, "max_length": self.max_length}

    class EndpointEmbedder:
        backend = "endpoint"

        def __init__(self, config, policy):
            self.config, self.policy = config, policy
            self.model, self.max_length = config.model, config.max_length
            parts = outbound.split_url(config.base_url)
            self.cache_model = f"endpoint:{parts.netloc.rpartition('@')[2]}/{config.model}"

        def encode(self, texts):
            texts = list(texts)
            headers = {"Content-Type": "application/json"}
            if self.config.api_key:
                headers["Authorization"] = f"Bearer {self.config.api_key}"
            connection = outbound.Connection(self.config.base_url, self.policy, timeout=self.config.timeout)
            path = outbound.split_url(self.config.base_url).path.rstrip("/") + "/embeddings"
            vectors = []
            try:
                for start in range(0, len(texts), self.config.batch_size):
                    body = json.dumps({"model": self.model, "input": texts[start:start + self.config.batch_size]}).encode()
                    answer = connection.request("POST", path, body=body, headers=headers, deadline=self.config.deadline,
                                                max_bytes=1 << 26)
                    if answer.status != 200:
                        raise EmbeddingEndpointError(f"{self.config.base_url} refused the request with HTTP {answer.status}")
                    rows = sorted(json.loads(answer.body)["data"], key=lambda row: row["index"])
                    vectors += [row["embedding"] for row in rows]
            finally:
                connection.close()
            found = np.array(vectors, dtype=np.float32).reshape(len(texts), -1)
            return found / np.maximum(np.linalg.norm(found, axis=1, keepdims=True), 1e-12)

        def describe(self):
            return {"backend": self.backend, "model": self.model, "max_length": self.max_length,
                    "base_url": self.config.base_url}

    def availability(backend: str) -> Availability:
        if backend == "sentence-transformers" and importlib.util.find_spec("sentence_transformers") is None:
            return Availability(False, "the sentence-transformers backend needs torch and sentence-transformers",
                                "pip install -r requirements-torch.txt")
        if backend == "numpy" and minilm.missing_packages():
            return Availability(False, f"the numpy backend needs {', '.join(minilm.missing_packages())}", minilm.INSTALL)
        return Availability(True)

    def make_embedder(backend: str, *, device: str = "auto", endpoint=None, policy=None):
        if backend not in BACKENDS:
            raise JudgeSettingsError(f"backend: must be one of {', '.join(BACKENDS)}")
        if not availability(backend).available:
            raise JudgeUnavailable(availability(backend).reason)
        if backend == "endpoint":
            if endpoint is None:
                raise JudgeSettingsError("backend: the endpoint backend needs an endpoint")
            return EndpointEmbedder(endpoint, policy or outbound.Policy())
        if backend == "numpy":
            return NumpyEmbedder()
        raise JudgeUnavailable("the stand-in has no sentence-transformers backend")

    embedders.__dict__.update(MODEL=semantic.MODEL, BACKENDS=BACKENDS, EmbeddingEndpointError=EmbeddingEndpointError,
                              EmbeddingEndpointConfig=EmbeddingEndpointConfig, availability=availability,
                              make_embedder=make_embedder)

    class StandInSemanticJudge(semantic.SemanticJudge):
        SETTINGS = (*semantic.SemanticJudge.SETTINGS,
                    Setting("backend", str, None, "numpy, sentence-transformers or endpoint; empty: the project's default.",
                            one_of(*BACKENDS), optional=True))

        def __init__(self, settings: dict[str, Any] | None = None, /, embedder=None, embedding_cache=None, **overrides):
            super().__init__(settings, **overrides)
            self.embedder = embedder or make_embedder(self.settings["backend"] or "numpy")
            self.embedding_cache = embedding_cache
            self.embed_count = EmbedCount()

        def describe(self):
            return {**super().describe(), "embedder": self.embedder.describe()}

        def _judge_chunk(self, contexts):
            wanted = [c for c in contexts if c.usable_references and c.document.strip()]
            references = sorted({text for c in wanted for text in c.usable_references})
            vectors = embed(self.embedder, references + [c.document for c in wanted], self.embedding_cache, self.embed_count)
            reference_vectors = dict(zip(references, vectors[:len(references)]))
            documents = iter(vectors[len(references):])
            return [could_not_judge(NO_REFERENCES, "no references") if not c.usable_references
                    else could_not_judge(EMPTY_DOCUMENT, "empty document") if not c.document.strip()
                    else self._verdict(c, next(documents), reference_vectors) for c in contexts]

    sys.modules[cache.__name__] = cache
    sys.modules[embedders.__name__] = embedders
    judges.embedders, judges.embedding_cache = embedders, cache
    judges.KINDS["semantic"] = StandInSemanticJudge
