"""A fake embeddings server for tests: real HTTP on a loopback port, answering like OpenAI's ``/v1/embeddings``
(which text-embeddings-inference, vLLM and Ollama serve too, in the same shape) and like text-embeddings-inference's
own ``/embed`` (a list of vectors). Any other path gets TEI's 404 error.

    with FakeEmbeddings() as server:
        server.script(Answer.status(503, retry_after="0"), Answer.shuffled())   # the next two requests
        embedder = EndpointEmbedder(EmbeddingEndpointConfig(server.base_url, "fake-embed"), Policy.of(networks=[...]))
        server.requests   # every request: path, headers, JSON body

A text's vector is `vector_for(text)`: 8 numbers drawn from its sha256, not normalised (the client must). Scripted
answers are used first, one per request, then ``answer(request)`` decides; an answer can change the vectors (drop one, repeat an index, change a
dimension), shuffle the ``data`` items, answer any status with Retry-After, or be a raw body.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from tests.judges.fake_server import FakeServer, JsonHandler

DIMENSION = 8


def vector_for(text: str, dimension: int = DIMENSION) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    return (np.random.default_rng(seed).normal(size=dimension) * 3).tolist()


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes | None = None  # sent as is
    headers: tuple[tuple[str, str], ...] = ()
    change: Callable[[list[list[float]]], list[list[float]]] | None = None  # applied to the vectors
    shuffle: bool = False
    indexes: Callable[[int], list[int]] | None = None  # the "index" of each data item, from the count
    delay: float = 0.0  # seconds before answering

    @classmethod
    def status_code(cls, status: int, *, retry_after: str | None = None,
                    body: bytes = b'{"error": {"message": "busy"}}') -> Answer:
        return cls(status, body=body, headers=(("Retry-After", retry_after),) if retry_after is not None else ())

    @classmethod
    def shuffled(cls) -> Answer:
        return cls(shuffle=True)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    json: Any = field(default=None)

    @property
    def texts(self) -> list[str]:
        return self.json.get("input") or self.json.get("inputs") or []


class FakeEmbeddings(FakeServer):
    name = "fake-embeddings"

    def __init__(self) -> None:
        super().__init__(lambda request: Answer())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
                with fake._lock:
                    fake.requests.append(request)
                answer = fake._next(request)
                time.sleep(answer.delay)
                if self.path not in ("/embed", "/v1/embeddings") and answer.body is None:
                    answer = Answer(404, json.dumps({"error": f"no route {self.path}", "error_type": "Validation"})
                                    .encode())
                body = answer.body if answer.body is not None else self._body(request, answer)
                try:
                    self.send_json(answer.status, body, answer.headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a deadline test)

            def _body(self, request: Request, answer: Answer) -> bytes:
                vectors = [vector_for(text) for text in request.texts]
                if answer.change is not None:
                    vectors = answer.change(vectors)
                if self.path == "/embed":  # text-embeddings-inference's own route: the vectors, in order
                    return json.dumps(vectors).encode()
                indexes = answer.indexes(len(vectors)) if answer.indexes else list(range(len(vectors)))
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(indexes, vectors)]
                if answer.shuffle:
                    data.reverse()
                tokens = sum(len(text.split()) for text in request.texts)
                return json.dumps({"object": "list", "data": data, "model": request.json.get("model"),
                                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()

        return Handler
