"""What the fake endpoints (fake_llm.py, fake_embeddings.py) share: a real HTTP server on a loopback port, in a
thread, that answers scripted answers first, one per request, then whatever its ``answer(request)`` decides, and
keeps every request it saw."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints
    # Headers and body go out in two writes: with Nagle's algorithm on, the body would wait for the
    # client's delayed ACK (40 ms on Linux), as no real endpoint's answer does.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def send_json(self, status: int, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class FakeServer:
    name = "fake-server"

    def __init__(self, answer: Callable[[Any], Any]) -> None:
        self.answer = answer  # when nothing is scripted
        self.requests: list = []
        self._scripted: deque = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.name, daemon=True)

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def script(self, *answers: Any) -> None:
        """Answer the next requests with these, in order."""
        with self._lock:
            self._scripted.extend(answers)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: Any) -> Any:
        with self._lock:
            if self._scripted:
                return self._scripted.popleft()
        return self.answer(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError
