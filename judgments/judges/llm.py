"""The LLM judge: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

Each pair is one ``POST {base_url}/chat/completions`` with the prompt of ``prompts`` (temperature 0), sent
over one keep-alive connection per worker thread (`judgments.lib.outbound`: public addresses only unless the
``outbound`` policy allows more, the address checked is the one connected to, and every request ends within
``deadline`` seconds in all); at most ``concurrency`` requests are in flight. The API key is a constructor
argument, sent only as the ``Authorization: Bearer`` header: it is in no setting, ``repr``, ``describe()``,
verdict or error message.

Failures:

- HTTP 408, 429 and 5xx, a reply that is not a chat completion, a refused or dropped connection and a timeout
  (``timeout`` seconds for connecting and for each read, ``deadline`` for the whole request) are tried again, up to ``max_retries`` more times:
  after a 429 or 503 with ``Retry-After`` (seconds or an HTTP date) it waits that long, otherwise
  ``backoff`` x 2^attempt seconds with jitter (a random 50-100% of it, so that workers spread out), every
  wait at most ``max_wait``. A pair that still fails is "could not judge" (``endpoint_failed``), and once
  ``max_failures`` pairs in a row failed so, the pairs not yet asked are too, without asking: the endpoint
  is down and each further pair would only wait out its retries.
- HTTP 400, 413 and 422 refuse that one request (a prompt longer than the model's context, say): the pair is
  "could not judge" (``endpoint_failed``) at once, without retrying. Any other 4xx (a wrong key, an unknown
  model, a bad URL) and an address the policy refuses raise ``EndpointError``: nothing would work until the
  settings change.
- A message quotes an answer only where it has the API's error shape (``{"error": {"message": ...}}``); any
  other answer is named by its status and the endpoint, never shown: the URL a lead typed may lead anywhere.
- Cancelling (``cancel``) or giving up stops the requests in flight at once; what they would have answered is
  lost, and those pairs are asked again on the next run.
- Documents longer than ``max_document_chars`` are cut there in the prompt (the prompt says so); a reply is
  kept up to 20,000 characters and an answer read up to 4 MB.
- A reply the prompt's reader cannot read is "could not judge" (``unparseable_reply``) with the reply kept.

Replies are cached (``cache``): pairs already asked cost nothing, and a batch asks each distinct prompt once;
the answers that arrived together are stored in one ``put_many``.

Limits shared with other processes (``limiter``, set at run time, see `Limiter`): before each try the judge
takes a ticket for the request's estimated tokens, and gives it back with the tokens the endpoint counted; a
429's Retry-After is passed on (``pause``), so that every process sharing the limiter waits it out. A limiter that
gives no ticket (a run's token budget is spent) stops the batch's new requests; those in flight finish and are
kept, and the pairs not asked are "cancelled" (asked on the next run).
"""

from __future__ import annotations

import http.client
import json
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..lib import outbound
from .base import (ENDPOINT_FAILED, RELEVANT_GRADE, UNPARSEABLE_REPLY, CancelCheck, Judge, JudgeContext,
                   ProgressCallback, Setting, Verdict, at_least, between, cancel_check, cancelled, could_not_judge,
                   judged, one_of)
from .cache import CacheKey, CachedReply, MemoryCache, ReplyCache, texts_sha256
from .prompts import PROMPTS, Reading

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504}) | frozenset(range(505, 600))
PAIR_REFUSALS = frozenset({400, 413, 422})
MAX_RESPONSE_BYTES = 4 << 20  # a chat completion of one grade is a few KB
MAX_REPLY_CHARS = 20_000
QUOTE = 200  # characters of an endpoint's answer quoted in a message
USER_AGENT = "Verdict-judge/1"
CHARS_PER_TOKEN = 4  # an estimate's tokens per character of prompt: OpenAI's rule of thumb for English text


class Limiter(Protocol):
    """Requests in flight, requests and tokens a minute, shared by every judge that asks the same endpoint."""

    def acquire(self, tokens: int, stop: threading.Event) -> object | None:
        """Wait until one more request of about `tokens` tokens may be sent and return its ticket; None when no more
        may be sent in this run (a token budget is spent) or `stop` was set while waiting."""

    def release(self, ticket: object, tokens: int) -> None:
        """The request of `ticket` ended, having cost `tokens` (0 when it failed)."""

    def pause(self, seconds: float) -> None:
        """The endpoint asked for no request in the next `seconds` (a 429's Retry-After)."""


class EndpointError(RuntimeError):
    """The endpoint refused the request in a way retrying cannot fix (HTTP 4xx other than 408 and 429)."""


MAX_URL, MAX_MODEL = 2000, 200


def _check_base_url(url: str) -> str | None:
    if len(url) > MAX_URL:
        return f"must be at most {MAX_URL} characters"
    try:
        parts = outbound.split_url(url)
    except outbound.Refused as problem:
        return str(problem)
    if parts.query or parts.fragment:
        return "must hold no query or fragment"
    return None


def _check_model(value: str) -> str | None:
    if not value.strip():
        return "must not be empty"
    return f"must be at most {MAX_MODEL} characters" if len(value) > MAX_MODEL else None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class _Answer:
    """The outcome of asking for one prompt: a reply with its usage, or the failure after the last try."""

    reply: CachedReply | None
    failure: str = ""
    cause: str = ""  # the failure's kind, counted by the app: connection refused, timeout, HTTP status 503...


class LLMJudge(Judge):
    """Grades with a chat model (see the module docstring). ``api_key`` and ``cache`` are not settings."""

    kind = "llm"
    SETTINGS = (
        Setting("base_url", str, None, "The endpoint's base URL, up to /v1: https://api.openai.com/v1, "
                "http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM, llama.cpp server).",
                _check_base_url),
        Setting("model", str, None, "The model name the endpoint knows, e.g. gpt-4o or llama3.1:8b.", _check_model),
        Setting("prompt", str, "umbrela-graded-v1", "The prompt: umbrela-graded-v1 (a grade of the round's "
                "scale) or evret-binary-v1 (YES/NO).", one_of(*PROMPTS)),
        Setting("concurrency", int, 4, "Requests in flight at once.", between(1, 64)),
        Setting("timeout", float, 60.0, "Seconds to wait for the connection and for each read of an answer.",
                between(0, 600, low_open=True)),
        Setting("deadline", float, 300.0, "Seconds one request may take in all: connecting, sending and reading "
                "the whole answer (a server answering a byte at a time is cut off here).",
                between(0, 3600, low_open=True)),
        Setting("max_retries", int, 4, "Further tries after a 429, a 5xx, a timeout or a dropped connection.",
                between(0, 10)),
        Setting("backoff", float, 1.0, "Seconds before the first retry, doubled on each (with jitter), unless the "
                "endpoint says how long with Retry-After.", between(0, 60)),
        Setting("max_wait", float, 60.0, "The longest single wait before a retry, Retry-After included.",
                between(0, 3600)),
        Setting("max_failures", int, 20, "Pairs failing in a row after which the rest are not asked.", at_least(1)),
        Setting("max_tokens", int, 300, "The longest reply the model may write, in tokens.", between(1, 32768)),
        Setting("max_document_chars", int, 20_000, "Documents are cut to this many characters in the prompt "
                "(about 5,000 tokens), so one long page cannot exceed the model's context.", between(100, 1_000_000)),
        RELEVANT_GRADE,
    )

    def __init__(self, settings: dict[str, Any] | None = None, /, *, api_key: str | None = None,
                 cache: ReplyCache | None = None, policy: outbound.Policy | None = None, limiter: Limiter | None = None,
                 **overrides: Any) -> None:
        """`policy`: the addresses the operator allows beyond public ones (none by default); `limiter`: see the
        module docstring (also an attribute, to set before a batch)."""
        super().__init__(settings, **overrides)
        if api_key is not None and (not isinstance(api_key, str) or any(c in api_key for c in "\r\n")):
            raise ValueError("the API key must be one line of text")
        self._api_key = api_key or None
        self.cache: ReplyCache = MemoryCache() if cache is None else cache
        self.policy = policy or outbound.Policy()
        self.limiter: Limiter | None = limiter
        self._path = urlsplit(self.settings["base_url"]).path.rstrip("/") + "/chat/completions"
        self._local = threading.local()
        self._open: set[outbound.Connection] = set()  # every thread's, so that a stop can abort them all
        self._open_lock = threading.Lock()
        self._random = random.Random()

    @property
    def model(self) -> str:
        return self.settings["model"]

    @property
    def prompt_version(self) -> str:
        return self.settings["prompt"]

    @property
    def endpoint(self) -> str:
        return f"{self.settings['base_url'].rstrip('/')}/chat/completions"

    # ----------------------------------------------------------------------------------------- batch

    def _judge_chunk(self, contexts: list[JudgeContext]) -> list[Verdict]:
        return self.batch_judge(contexts)

    def batch_judge(self, contexts: Sequence[JudgeContext], *, progress: ProgressCallback | None = None,
                    cancel: CancelCheck | None = None) -> list[Verdict]:
        """A verdict per context, in order; see ``Judge.batch_judge``. When `cancel()` turns true, the requests
        in flight are stopped at once and the others are not sent: their pairs are "cancelled"."""
        contexts = list(contexts)
        cancel = cancel_check(cancel)
        for scale in {context.scale for context in contexts}:
            self.check_scale(scale)
        prompt = PROMPTS[self.settings["prompt"]]
        limit = self.settings["max_document_chars"]
        messages = [prompt.messages(context, self.relevant_grade(context.scale), limit) for context in contexts]
        keys = [CacheKey(self.model, prompt.version, texts_sha256(m)) for m in messages]
        stored = dict(self.cache.get_many(list(dict.fromkeys(keys))))
        verdicts: list[Verdict | None] = [None] * len(contexts)
        waiting: dict[CacheKey, list[int]] = {}
        for i, key in enumerate(keys):
            if key in stored:
                verdicts[i] = self._verdict(contexts[i], stored[key], cached=True)
            else:
                waiting.setdefault(key, []).append(i)
        done = len(contexts) - sum(len(indexes) for indexes in waiting.values())
        stop = threading.Event()
        failures_in_a_row = 0
        gave_up = ""  # why the pairs not asked yet will not be: empty while none were held back for failures

        def not_asked() -> Verdict:
            return could_not_judge(ENDPOINT_FAILED, gave_up, cause=NOT_ASKED) if gave_up else cancelled()

        pool = ThreadPoolExecutor(self.settings["concurrency"], thread_name_prefix="llm-judge")
        # Finished requests arrive on a queue: waiting on thousands of futures at once costs O(n) per wake-up.
        arrived: queue.SimpleQueue[Future] = queue.SimpleQueue()
        try:
            futures: dict[Future, CacheKey] = {}
            for key, indexes in waiting.items():
                future = pool.submit(self._ask, messages[indexes[0]], stop)
                futures[future] = key
                future.add_done_callback(arrived.put)
            if progress is not None:
                progress(done, len(contexts), self._progress_message(done, len(contexts)))
            while futures:
                finished = _drain(arrived, timeout=0.2)
                replies: dict[CacheKey, CachedReply] = {}
                for future in finished:
                    if future not in futures:
                        continue  # cancelled below, and counted there
                    key = futures.pop(future)
                    answer, indexes = future.result(), waiting[key]
                    if answer.reply is not None:
                        failures_in_a_row = 0
                        replies[key] = answer.reply
                        for n, i in enumerate(indexes):
                            verdicts[i] = self._verdict(contexts[i], answer.reply, cached=n > 0)
                    elif answer.failure in (_STOPPED, _HELD):
                        for i in indexes:
                            verdicts[i] = not_asked()
                    else:
                        failures_in_a_row += 1
                        for i in indexes:
                            verdicts[i] = could_not_judge(ENDPOINT_FAILED, answer.failure, cause=answer.cause)
                    done += len(indexes)
                if replies:
                    self.cache.put_many(replies)
                if failures_in_a_row >= self.settings["max_failures"] and not gave_up:
                    gave_up = f"Not asked: the endpoint failed {failures_in_a_row} pairs in a row."
                    stop.set()
                if cancel is not None and not stop.is_set() and cancel():
                    stop.set()
                if stop.is_set():
                    self._abort_all()
                    for future in [f for f in futures if f.cancel()]:
                        for i in waiting[futures.pop(future)]:
                            verdicts[i] = not_asked()
                            done += 1
                if finished and progress is not None:
                    progress(done, len(contexts), self._progress_message(done, len(contexts)))
        except BaseException:
            stop.set()
            self._abort_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)
            self._close_all()
        return [verdict if verdict is not None else not_asked() for verdict in verdicts]

    def estimate(self, contexts: Sequence[JudgeContext]) -> dict[str, int]:
        """What grading `contexts` would cost before anything is sent: ``requests`` (the distinct prompts not in
        the cache), ``cached`` (pairs whose reply is cached), ``prompt_tokens`` (the characters of those prompts,
        system and user messages as sent, divided by CHARS_PER_TOKEN and rounded up: OpenAI's rule of thumb for
        English text; the endpoint's tokenizer decides) and ``completion_tokens`` (at most ``max_tokens`` each)."""
        prompt = PROMPTS[self.settings["prompt"]]
        limit = self.settings["max_document_chars"]
        distinct: dict[CacheKey, int] = {}
        keys = []
        for context in contexts:
            messages = prompt.messages(context, self.relevant_grade(context.scale), limit)
            key = CacheKey(self.model, prompt.version, texts_sha256(messages))
            keys.append(key)
            distinct.setdefault(key, sum(len(message["content"]) for message in messages))
        stored = self.cache.get_many(list(distinct)) if distinct else {}
        asked = {key: chars for key, chars in distinct.items() if key not in stored}
        return {"requests": len(asked), "cached": sum(1 for key in keys if key in stored),
                "prompt_tokens": -(-sum(asked.values()) // CHARS_PER_TOKEN),
                "completion_tokens": len(asked) * self.settings["max_tokens"]}

    def _progress_message(self, done: int, total: int) -> str:
        return f"{self.model}: {done:,} of {total:,} pairs"

    def _verdict(self, context: JudgeContext, reply: CachedReply, *, cached: bool) -> Verdict:
        reading: Reading = PROMPTS[self.settings["prompt"]].read(reply.reply, context.scale,
                                                                 self.relevant_grade(context.scale))
        cost = {} if cached else {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
        if reading.grade is None:
            return could_not_judge(UNPARSEABLE_REPLY, f"Could not read the model's reply: {reading.problem}.",
                                   reply=reply.reply, cached=cached, cause=UNREADABLE, **cost)
        return judged(reading.grade, reading.answer, reading.rationale, reply=reply.reply, cached=cached, **cost)

    # ----------------------------------------------------------------------------------------- one request

    def _ask(self, messages: list[dict[str, str]], stop: threading.Event) -> _Answer:
        """One prompt, tried up to 1 + max_retries times; runs in a worker thread."""
        if stop.is_set():
            return _Answer(None, _STOPPED)
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0,
                           "max_tokens": self.settings["max_tokens"], "stream": False}).encode("utf-8")
        tries = 1 + self.settings["max_retries"]
        problem = cause = ""
        tokens = -(-sum(len(message["content"]) for message in messages) // CHARS_PER_TOKEN) + self.settings["max_tokens"]
        for attempt in range(tries):
            retry_after = None
            ticket = self.limiter.acquire(tokens, stop) if self.limiter is not None else True
            if ticket is None:
                return _Answer(None, _STOPPED if stop.is_set() else _HELD)
            used = 0
            try:
                answer = self._post(body)
            except outbound.Stopped:
                return _Answer(None, _STOPPED)
            except outbound.Refused as refused:
                raise EndpointError(f"{self.endpoint}: {refused}") from None
            except (OSError, http.client.HTTPException) as error:
                problem, cause = self._network_problem(error), network_cause(error)
            else:
                status = answer.status
                if status == 200 and not answer.too_large:
                    reply = _completion(answer.body)
                    if reply is not None:
                        used = reply.prompt_tokens + reply.completion_tokens
                        return _Answer(reply)
                    problem, cause = "the answer was not a chat completion", UNREADABLE
                elif status == 200 or status in RETRY_STATUSES:
                    problem, cause = f"HTTP {status}{self._quote(answer)}", f"HTTP status {status}"
                    retry_after = parse_retry_after(answer.headers.get("retry-after"))
                elif status in PAIR_REFUSALS:
                    return _Answer(None, f"The endpoint refused this pair: HTTP {status}{self._quote(answer)}.",
                                   f"HTTP status {status}")
                else:
                    raise EndpointError(f"{self.endpoint} refused the request with HTTP {status}{self._quote(answer)}")
            finally:
                if self.limiter is not None:
                    self.limiter.release(ticket, used)
            if retry_after is not None and self.limiter is not None:
                self.limiter.pause(min(retry_after, self.settings["max_wait"]))
            if attempt + 1 < tries:
                delay = retry_after if retry_after is not None else \
                    self.settings["backoff"] * 2 ** attempt * self._random.uniform(0.5, 1.0)
                if stop.wait(min(delay, self.settings["max_wait"])):
                    return _Answer(None, _STOPPED)
        return _Answer(None, f"The endpoint failed {tries} {'try' if tries == 1 else 'tries'}; the last: {problem}.", cause)

    def _post(self, body: bytes) -> outbound.Response:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return self._connection().request("POST", self._path, body=body, headers=headers,
                                          deadline=self.settings["deadline"], max_bytes=MAX_RESPONSE_BYTES)

    def _connection(self) -> outbound.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = outbound.Connection(self.settings["base_url"], self.policy, timeout=self.settings["timeout"])
            self._local.connection = connection
            with self._open_lock:
                self._open.add(connection)
        return connection

    def _abort_all(self) -> None:
        with self._open_lock:
            for connection in self._open:
                connection.abort()

    def _close_all(self) -> None:
        """After a batch: its threads are gone, and an aborted connection stays stopped."""
        with self._open_lock:
            for connection in self._open:
                connection.close()
            self._open.clear()
        self._local = threading.local()

    def _network_problem(self, error: BaseException) -> str:
        if isinstance(error, outbound.DeadlineExceeded):
            return f"no complete answer within the deadline of {self.settings['deadline']:g} s"
        if isinstance(error, (socket.timeout, TimeoutError)):
            return f"no answer within {self.settings['timeout']:g} s"
        if isinstance(error, socket.gaierror):
            return f"{urlsplit(self.settings['base_url']).hostname} does not resolve"
        return self._redacted(f"{type(error).__name__}: {error}")

    def _quote(self, answer: outbound.Response) -> str:
        """': <the message>' when the answer has the API's error shape; nothing otherwise (see the docstring)."""
        return error_quote(answer, self._redacted)

    def _redacted(self, text: str) -> str:
        """An endpoint may echo the key in an error: never pass it on."""
        return text.replace(self._api_key, "[API key]") if self._api_key else text


_STOPPED = "stopped"
_HELD = "held back by the limiter"
UNREADABLE = "unreadable reply"
NOT_ASKED = "not asked: the endpoint kept failing"


def network_cause(error: BaseException) -> str:
    """A failed request's kind in a few words, for counting: connection refused, timeout, name not resolved..."""
    if isinstance(error, (outbound.DeadlineExceeded, socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, socket.gaierror):
        return "name not resolved"
    if isinstance(error, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, http.client.HTTPException)):
        return "connection dropped"
    return "connection failed"


def error_quote(answer: outbound.Response, redacted: Callable[[str], str]) -> str:
    """': <the message>' when an endpoint's error answer has the OpenAI shape (``{"error": {"message": ...}}``) or
    text-embeddings-inference's (``{"error": ...}``), cut to QUOTE characters and passed through `redacted` (an
    endpoint may echo the key); nothing otherwise: the URL a lead typed may lead anywhere."""
    if answer.too_large:
        return " (an answer too large to read)"
    try:
        error = json.loads(answer.body)["error"]
        message = error["message"] if isinstance(error, dict) else error
    except (ValueError, KeyError, TypeError, RecursionError):
        return ""
    if not isinstance(message, str):
        return ""
    text = " ".join(message.split())
    return ": " + redacted(repr(text[:QUOTE] + ("..." if len(text) > QUOTE else "")))


def _drain(arrived: queue.SimpleQueue, timeout: float) -> list[Future]:
    """What arrived within `timeout` seconds: the first one waited for, the rest taken as they are."""
    try:
        finished = [arrived.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            finished.append(arrived.get_nowait())
        except queue.Empty:
            return finished


def _completion(data: bytes) -> CachedReply | None:
    """The reply and token counts of an OpenAI chat completion, or None when `data` is not one."""
    try:
        answer = json.loads(data)
        message = answer["choices"][0]["message"]
        content = message.get("content")
        usage = answer.get("usage") or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        return None
    if content is not None and not isinstance(content, str):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (prompt_tokens, completion_tokens)):
        prompt_tokens = completion_tokens = 0
    return CachedReply((content or "")[:MAX_REPLY_CHARS], prompt_tokens, completion_tokens)
