"""The token-overlap judge: Evret's TokenOverlapJudge (evret 0.0.3, ``src/evret/judges/token_overlap.py``).

A document is relevant when it matches any of the query's reference texts; its score is the best score over
them. For one reference (Evret's "expected text") and the document, in this order:

1. the normalised texts (lower-cased, whitespace collapsed) are equal: score 1.0;
2. negation mismatch: exactly one of the two texts has a token in {no, not, never, none, without, cannot,
   can't}: score 0.0. Tokens are ``[a-z0-9]+`` of the lower-cased text, so "can't" becomes "can" and "t"
   and that entry never fires (kept as in Evret: "can't" alone does not count as a negation);
3. either normalised text contains the other: score 1.0;
4. weighted overlap of content tokens (tokens minus the stopwords). With fewer than ``min_tokens`` distinct
   shared content tokens the score is 0, so with the default 15 a short answer matches only through steps 1
   to 3. Otherwise the score is the weight of the shared tokens over the weight of the reference's tokens
   (1.5 for a token of digits only, as the code's ``isdigit()``: evret's notes say "containing digits",
   which would also weigh "covid19"; 0.75 for tokens of 1-2 characters; 1.35 for 8 or more; 1.0
   otherwise), plus a phrase bonus of 0.05 (n - 1) for the longest run of n = 2 to 4 consecutive reference
   content tokens found, joined by spaces, inside the normalised document (plain substring search, as
   Evret), plus 0.1 when ``query_boost`` is on and a shared token is also a content token of the query;
   clamped to [0, 1].

Relevant when the score >= ``overlap_ratio``. The query boost adds 0.1 to the score, as the published code
does; the seed's flowchart (an older version) instead relaxed the threshold to 0.75 x ``overlap_ratio``.

Every text is tokenised once: a batch keeps each reference's tokens, phrases and weights (they repeat over
the query's documents) and each document is read once whatever the number of references. Tokenising is a
byte translation (every byte but a-z and 0-9 becomes a space, as UTF-8 puts every non-ASCII character in
bytes >= 0x80) and a split, the same tokens as the regular expression at a fraction of its cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .base import (EMPTY_DOCUMENT, NO_REFERENCES, RELEVANT_GRADE, Judge, JudgeContext, Setting, Verdict, between,
                   could_not_judge, judged)

_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")
_SEPARATORS = bytes(byte if byte in _ALNUM else 32 for byte in range(256))
NEGATIONS = frozenset({"no", "not", "never", "none", "without", "cannot", "can't"})
_NEGATION_BYTES = frozenset(word.encode() for word in NEGATIONS)
QUERY_BOOST = 0.1
PHRASE_STEP, PHRASE_MAX = 0.05, 0.15
# NLTK's English stopword list, as Evret ships it; entries with an apostrophe never equal a token.
STOPWORDS = frozenset("""
a about above after again against ain all am an and any are aren aren't as at be because been before being below
between both but by can couldn couldn't d did didn didn't do does doesn doesn't doing don don't down during each
few for from further had hadn hadn't has hasn hasn't have haven haven't having he her here hers herself him himself
his how i if in into is isn isn't it it's its itself just ll m ma me mightn mightn't more most mustn mustn't my
myself needn needn't no nor not now o of off on once only or other our ours ourselves out over own re s same shan
shan't she she's should should've shouldn shouldn't so some such t than that that'll the their theirs them
themselves then there these they this those through to too under until up ve very was wasn wasn't we were weren
weren't what when where which while who whom why will with won won't wouldn wouldn't y you you'd you'll you're
you've your yours yourself yourselves
""".split())
STOPWORD = re.compile(r"[a-z0-9']+")
MAX_STOPWORDS = 10_000


def _check_stopwords(words: list) -> str | None:
    if len(words) > MAX_STOPWORDS:
        return f"must hold at most {MAX_STOPWORDS:,} words"
    bad = [word for word in words if not isinstance(word, str) or len(word) > 100 or not STOPWORD.fullmatch(word)]
    if bad:
        return f"must be lower-case words of a-z, 0-9 and ' of at most 100 characters, not {str(bad[0])[:100]!r}"
    return None


def tokens(lowered: str) -> list[bytes]:
    """The ``[a-z0-9]+`` tokens of lower-cased text, as bytes."""
    return lowered.encode("utf-8", "surrogatepass").translate(_SEPARATORS).split()


@lru_cache(maxsize=65536)
def token_weight(token: str | bytes) -> float:
    if token.isdigit():
        return 1.5
    if len(token) <= 2:
        return 0.75
    if len(token) >= 8:
        return 1.35
    return 1.0


class _Document:
    """A document read once. Its normalised text costs as much as its tokens and most pairs never need it (an
    equal text has as many tokens; a reference inside the document has its inner tokens among the document's;
    a document inside a reference has no more tokens than it), so it is made only when a check does."""

    __slots__ = ("lowered", "count", "tokens", "negated", "content_set", "_norm")

    def __init__(self, text: str, stopwords: frozenset[bytes]) -> None:
        self.lowered = text.lower()
        found = tokens(self.lowered)
        self.count = len(found)
        self.tokens = set(found)
        self.negated = not _NEGATION_BYTES.isdisjoint(self.tokens)
        self.content_set = self.tokens - stopwords
        self._norm: str | None = None

    @property
    def norm(self) -> str:
        if self._norm is None:
            self._norm = " ".join(self.lowered.split())
        return self._norm


@dataclass(frozen=True, slots=True)
class _Reference:
    norm: str
    count: int  # tokens, stopwords included
    inner: frozenset[bytes]  # every token but the first and the last: a copy inside a document keeps these whole
    negated: bool
    content_set: frozenset[bytes]
    weight: float  # sum of the weights of its distinct content tokens
    phrases: tuple[tuple[str, ...], ...]  # phrases of 4, 3, 2 consecutive content tokens, longest first

    def inside(self, document: _Document) -> bool:
        if " " not in self.norm:  # no whitespace to normalise: search the lower-cased text as it is
            return self.norm in document.lowered
        return self.inner <= document.tokens and self.norm in document.norm


@dataclass(frozen=True, slots=True)
class _Match:
    score: float
    how: str  # a format string, filled by `args` only for the reference that gives the verdict
    args: tuple = ()

    def describe(self) -> str:
        return self.how.format(*self.args)


class TokenOverlapJudge(Judge):
    """Evret's token-overlap judge (see the module docstring); binary: relevant gets ``relevant_grade``."""

    kind = "token_overlap"
    SETTINGS = (
        Setting("min_tokens", int, 15, "Distinct content tokens the document must share with a reference before "
                "the overlap counts (Evret's default 15 suits passages; short answers then match only exactly or "
                "as a substring).", lambda value: None if value >= 1 else "must be at least 1"),
        Setting("overlap_ratio", float, 0.6, "The score at or above which the document is relevant.",
                between(0, 1, low_open=True)),
        Setting("query_boost", bool, True, "Add 0.1 to the score when a shared token is also a query word."),
        Setting("stopwords", list, None, "Words left out of the overlap; empty: Evret's English list (NLTK's).",
                _check_stopwords, optional=True),
        RELEVANT_GRADE,
    )

    def __init__(self, settings: dict[str, Any] | None = None, /, **overrides: Any) -> None:
        super().__init__(settings, **overrides)
        given = self.settings["stopwords"]
        self._stopwords = frozenset(word.encode() for word in (STOPWORDS if given is None else given))

    def _reference(self, text: str) -> _Reference:
        lowered = text.lower()
        found = tokens(lowered)
        content = [token for token in found if token not in self._stopwords]
        words = [token.decode("ascii") for token in content]
        phrases = tuple(
            tuple(" ".join(words[start:start + size]) for start in range(len(words) - size + 1))
            for size in range(min(4, len(words)), 1, -1))
        distinct = frozenset(content)
        return _Reference(" ".join(lowered.split()), len(found), frozenset(found[1:-1]),
                          not _NEGATION_BYTES.isdisjoint(found), distinct,
                          sum(token_weight(token) for token in distinct), phrases)

    def _judge_chunk(self, contexts: list[JudgeContext]) -> list[Verdict]:
        references: dict[str, _Reference] = {}
        queries: dict[str, frozenset[bytes]] = {}
        verdicts = []
        for context in contexts:
            texts = context.usable_references
            if not texts:
                verdicts.append(could_not_judge(
                    NO_REFERENCES, "The query has no reference texts; the token-overlap judge compares the "
                    "document with them."))
                continue
            document = _Document(context.document, self._stopwords)
            if not document.lowered.strip():
                verdicts.append(could_not_judge(EMPTY_DOCUMENT, "The document has no text to compare."))
                continue
            if context.query not in queries:
                queries[context.query] = _Document(context.query, self._stopwords).content_set
            best, which = None, 0
            for number, text in enumerate(texts, start=1):
                reference = references.get(text)
                if reference is None:
                    reference = references[text] = self._reference(text)
                match = self._match(reference, document, queries[context.query])
                if best is None or match.score > best.score:
                    best, which = match, number
                    if best.score >= 1.0:
                        break
            relevant = best.score >= self.settings["overlap_ratio"]
            verdicts.append(judged(
                self.binary_grade(relevant, context.scale), best.score,
                f"{'Relevant' if relevant else 'Not relevant'}: {best.describe()} (reference {which} of {len(texts)}; "
                f"relevant at {self.settings['overlap_ratio']:g})."))
        return verdicts

    def _match(self, expected: _Reference, document: _Document, query_tokens: frozenset[bytes]) -> _Match:
        if expected.count == document.count and expected.norm == document.norm:
            return _Match(1.0, "the texts are equal")
        if expected.negated != document.negated:
            side = "the reference" if expected.negated else "the document"
            return _Match(0.0, "only {} is negated", (side,))
        if expected.inside(document):
            return _Match(1.0, "the reference is in the document")
        if document.count <= expected.count and document.norm and document.norm in expected.norm:
            return _Match(1.0, "the document is in the reference")
        shared = expected.content_set & document.content_set
        if not expected.content_set or not document.content_set or len(shared) < self.settings["min_tokens"]:
            return _Match(0.0, "{} shared content tokens, fewer than {}", (len(shared), self.settings["min_tokens"]))
        overlap = sum(token_weight(token) for token in shared) / expected.weight
        phrase = self._phrase_bonus(expected, document.norm)
        boost = QUERY_BOOST if self.settings["query_boost"] and not shared.isdisjoint(query_tokens) else 0.0
        score = max(0.0, min(1.0, overlap + phrase + boost))
        return _Match(score, "score {:.3f} from {} shared content tokens (weighted overlap {:.3f}, phrase bonus "
                             "{:.2f}, query boost {:.1f})", (score, len(shared), overlap, phrase, boost))

    @staticmethod
    def _phrase_bonus(reference: _Reference, document: str) -> float:
        for phrases in reference.phrases:
            if any(phrase in document for phrase in phrases):
                size = phrases[0].count(" ") + 1
                return min(PHRASE_STEP * (size - 1), PHRASE_MAX)
        return 0.0
