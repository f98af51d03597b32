"""A fake OpenAI-compatible chat-completions server for tests and benchmarks: real HTTP on a loopback port.

    with FakeLLM() as server:                          # answers "Final grade: 2" by default
        server.script(Reply.status(429, retry_after="1"), Reply.text("YES"))   # the next two requests
        server.answer = lambda request: Reply.text("YES" if "cats" in request.user else "NO")
        judge = LLMJudge(base_url=server.base_url, model="fake", api_key="sk-test", policy=Policy.of(networks=["127.0.0.0/8"]))
        ...
        server.requests      # every request: headers, body, times
        server.max_in_flight # the most requests it was answering at once

Scripted replies are used first, in order, one per request; then ``answer(request)`` decides. A reply can be a
well-formed completion, a malformed body, an empty message, any status with a Retry-After header, a delay
(longer than the client's timeout, to test timeouts) or a fixed latency for every request (``latency``).

``GET /stats`` answers the counts as JSON (requests, distinct request bodies, most in flight, most in a second and
in any minute). Run as a process of
its own (a benchmark's client then has the interpreter to itself), it prints its base URL and serves until its
standard input closes:

    python -m tests.judges.fake_llm --latency 0.1 --reply "Final grade: 2"
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.judges.fake_server import FakeServer, JsonHandler


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request."""

    status: int = 200
    content: str | None = "Final grade: 2"
    body: bytes | None = None  # sent as is instead of a completion (a malformed reply)
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds before answering, on top of the server's latency
    prompt_tokens: int = 100
    completion_tokens: int = 5

    @classmethod
    def text(cls, content: str | None, **kwargs: Any) -> Reply:
        return cls(200, content, **kwargs)

    @classmethod
    def malformed(cls, body: bytes = b"<html>Bad gateway</html>") -> Reply:
        return cls(200, body=body)

    @classmethod
    def status_code(cls, status: int, *, retry_after: str | None = None, body: bytes = b'{"error": "busy"}') -> Reply:
        return cls(status, body=body, headers=(("Retry-After", retry_after),) if retry_after is not None else ())

    @classmethod
    def slow(cls, seconds: float, content: str = "Final grade: 2") -> Reply:
        return cls(200, content, delay=seconds)


@dataclass
class Request:
    """A request as the server saw it."""

    path: str
    headers: dict[str, str]
    raw: bytes
    started: float
    finished: float | None = None
    reply: Reply | None = None
    json: Any = field(default=None)

    @property
    def user(self) -> str:
        """The user message's text (the prompt)."""
        return next((m["content"] for m in self.json.get("messages", []) if m.get("role") == "user"), "")


class FakeLLM(FakeServer):
    name = "fake-llm"

    def __init__(self, *, latency: float = 0.0, answer: Callable[[Request], Reply] | None = None) -> None:
        self.latency = latency
        self.max_in_flight = 0
        self._in_flight = 0
        super().__init__(answer or (lambda request: Reply()))

    def rates(self) -> dict:
        """The most requests that arrived within one second of the server's clock (whole seconds), and within any
        60 seconds (a sliding window over the arrival times)."""
        starts = sorted(request.started for request in self.requests)
        per_second: dict[int, int] = {}
        for started in starts:
            per_second[int(started)] = per_second.get(int(started), 0) + 1
        most, first = 0, 0
        for last, started in enumerate(starts):
            while started - starts[first] >= 60:
                first += 1
            most = max(most, last - first + 1)
        return {"max_per_second": max(per_second.values(), default=0), "max_per_minute": most}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path != "/stats":
                    self.send_error(404)
                    return
                with fake._lock:
                    stats = {"requests": len(fake.requests), "distinct": len({r.raw for r in fake.requests}),
                             "max_in_flight": fake.max_in_flight, **fake.rates()}
                self.send_json(200, json.dumps(stats).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, raw, time.monotonic())
                try:
                    request.json = json.loads(raw)
                except ValueError:
                    request.json = {}
                with fake._lock:
                    fake.requests.append(request)
                    fake._in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
                try:
                    reply = fake._next(request)
                    request.reply = reply
                    time.sleep(fake.latency + reply.delay)
                    self._send(reply, request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                finally:
                    with fake._lock:
                        fake._in_flight -= 1
                        request.finished = time.monotonic()

            def _send(self, reply: Reply, request: Request) -> None:
                if reply.body is not None:
                    body = reply.body
                else:
                    body = json.dumps({
                        "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion",
                        "model": request.json.get("model", ""),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
                    }).encode()
                self.send_json(reply.status, body, reply.headers)

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible endpoint on a loopback port.")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--reply", default="Final grade: 2")
    options = parser.parse_args()
    with FakeLLM(latency=options.latency, answer=lambda request: Reply.text(options.reply)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
