"""The LLM judge's reply cache: a pair is never paid for twice.

A reply is keyed by the model, the prompt version and the sha256 of the prompt's texts (the messages sent:
guidelines, grade cues, query, information need, references, document), so the same question to the same
model gets the stored reply, and any change to what the model would read asks again. Replies that could not
be read are cached too: they were paid for, and at temperature 0 the model would say the same again.

`ReplyCache` is the protocol; `MemoryCache` keeps replies for the life of the object (tests, benchmarks,
scripts). The app plugs in a database-backed one. The judge calls a cache from the thread that called
``batch_judge`` only, so an implementation need not be thread-safe (and may use that thread's database
connection).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class CacheKey(NamedTuple):
    model: str
    prompt_version: str
    texts_sha256: str


@dataclass(frozen=True)
class CachedReply:
    """A model's reply as it came, with the tokens it cost when it was first asked."""

    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ReplyCache(Protocol):
    def get_many(self, keys: Sequence[CacheKey]) -> Mapping[CacheKey, CachedReply]:
        """The stored replies among `keys` (missing keys are simply absent)."""

    def put(self, key: CacheKey, reply: CachedReply) -> None:
        """Store a reply (replacing any under the same key)."""

    def put_many(self, replies: Mapping[CacheKey, CachedReply]) -> None:
        """Store several replies at once (the judge stores what arrived together in one call)."""


class MemoryCache:
    """A `ReplyCache` in a dict."""

    def __init__(self) -> None:
        self.replies: dict[CacheKey, CachedReply] = {}

    def __len__(self) -> int:
        return len(self.replies)

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, CachedReply]:
        return {key: self.replies[key] for key in keys if key in self.replies}

    def put(self, key: CacheKey, reply: CachedReply) -> None:
        self.replies[key] = reply

    def put_many(self, replies: Mapping[CacheKey, CachedReply]) -> None:
        self.replies.update(replies)


def texts_sha256(messages: Sequence[Mapping[str, str]]) -> str:
    canonical = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
