"""The semantic judge's embedding cache: each distinct text is embedded once per model and maximum length.

A vector is keyed by the embedder's ``cache_model`` (its backend and model, never a key: vectors of two backends
differ slightly and are never mixed), the model's maximum length in word pieces (a text cut at 256 and one cut at
512 are different vectors) and the sha256 of the text exactly as given. `embed` reads what the cache holds, embeds
each distinct missing text once and stores it, so a re-run over the same pool embeds nothing and a changed
document is embedded again (its hash changed).

`EmbeddingCache` is the protocol; `MemoryEmbeddingCache` keeps vectors for the life of the object (tests,
benchmarks, a judge given no cache). The app plugs in a database-backed one. Twin of `cache.py`, the LLM judge's
reply cache. Called from the thread that called ``batch_judge`` only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from .embedders import Embedder


class EmbeddingKey(NamedTuple):
    model: str  # Embedder.cache_model: "numpy:sentence-transformers/all-MiniLM-L6-v2", "endpoint:host:port/model"
    max_length: int
    text_sha256: str


def text_sha256(text: str) -> str:
    """The sha256 hex of `text`'s UTF-8 bytes, exactly as given (no normalising: another text is another vector)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache(Protocol):
    def get_many(self, keys: Sequence[EmbeddingKey]) -> Mapping[EmbeddingKey, np.ndarray]:
        """The stored vectors among `keys` (missing keys are simply absent)."""

    def put_many(self, vectors: Mapping[EmbeddingKey, np.ndarray]) -> None:
        """Store vectors (replacing any under the same keys)."""


class MemoryEmbeddingCache:
    """An `EmbeddingCache` in a dict."""

    def __init__(self) -> None:
        self.vectors: dict[EmbeddingKey, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.vectors)

    def get_many(self, keys: Sequence[EmbeddingKey]) -> dict[EmbeddingKey, np.ndarray]:
        return {key: self.vectors[key] for key in keys if key in self.vectors}

    def put_many(self, vectors: Mapping[EmbeddingKey, np.ndarray]) -> None:
        self.vectors.update(vectors)


@dataclass
class EmbedCount:
    """Distinct texts embedded (sent to the model) and taken from the cache."""

    embedded: int = 0
    cached: int = 0

    def __str__(self) -> str:
        return f"{self.embedded:,} texts embedded, {self.cached:,} from the cache"


def embed(embedder: Embedder, texts: Sequence[str], cache: EmbeddingCache | None,
          count: EmbedCount | None = None) -> np.ndarray:
    """One row per text of `texts`, in order (float32, L2-normalised): each distinct text embedded once, those
    `cache` holds read from it, the new ones stored in it; `count` gains the distinct texts embedded and cached."""
    texts = list(texts)
    distinct = list(dict.fromkeys(texts))
    keys = {text: EmbeddingKey(embedder.cache_model, embedder.max_length, text_sha256(text)) for text in distinct}
    stored = dict(cache.get_many(list(keys.values()))) if cache is not None and distinct else {}
    missing = [text for text in distinct if keys[text] not in stored]
    vectors = {text: stored[keys[text]] for text in distinct if keys[text] in stored}
    if missing:
        fresh = np.asarray(embedder.encode(missing), dtype=np.float32)
        if fresh.shape[0] != len(missing):
            raise ValueError(f"the embedder gave {fresh.shape[0]} vectors for {len(missing)} texts")
        vectors.update(zip(missing, fresh))
        if cache is not None:
            cache.put_many({keys[text]: vector for text, vector in zip(missing, fresh)})
    if count is not None:
        count.embedded += len(missing)
        count.cached += len(distinct) - len(missing)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack([np.asarray(vectors[text], dtype=np.float32) for text in texts])
