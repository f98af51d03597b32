"""Answer metrics for RAG: UltraRAG's generation measures on reference answers and predicted answers.

    from evaluation.engine.answers import read_references, read_predictions, score_answers, aggregate
    per_query = score_answers(read_references("refs.jsonl"), read_predictions("preds.jsonl"))
    aggregate(per_query)["em"]

Semantics follow UltraRAG's evaluation server (``servers/evaluation/src/evaluation.py``):

- ``normalize_text``: the whole string "True" becomes "yes" and "False" "no"; ``_`` becomes a space;
  lowercase; every character of ``string.punctuation`` and the quotes ‘ ’ ´ ` becomes a space (so
  "don't" becomes "don t"); ``\\b(a|an|the)\\b`` becomes a space; whitespace collapsed and stripped.
  Tokens are the whitespace-separated words of the normalised text.
- ``acc``: some normalised reference is a substring of the normalised prediction (0 for a prediction
  that normalises to ""; a reference that normalises to "" hits every other prediction: UltraRAG's quirk).
- ``em``: the normalised prediction equals some normalised reference.
- ``stringem``: the fraction of references the normalised prediction equals.
- ``coverem``: every token of some reference is among the prediction's tokens (a reference with no
  token is covered by anything, even an empty prediction: UltraRAG's quirk).
- ``f1``: the best token F1 over the references, tokens counted as a multiset (0 when either side
  has no token).
- ``rouge-1``, ``rouge-2``, ``rouge-l``: the best F-measure over the references of Google's
  ``rouge-score`` (``RougeScorer([...], use_stemmer=True).score(reference, prediction)``), given the
  NORMALISED texts as UltraRAG does. Its tokenizer keeps only ``[a-z0-9]``, so non-Latin text scores 0.

With ``tokenizer="unicode"`` the token measures (coverem, f1, ROUGE) use another tokenizer: runs of
Unicode letters, marks and digits, each Han, Hiragana or Katakana character a token of its own, and
ASCII tokens stemmed as rouge-score stems them. On printable ASCII text it gives the default values; an
ASCII control character inside a word ("paris\x01france") splits it in two, where f1 and coverem's default
whitespace tokens keep one.
acc, em and stringem compare whole normalised strings and do not depend on the tokenizer.

ROUGE is computed with rouge-score's own n-gram and scoring functions on tokens made once per text
(its tokenizer, with its Porter stemmer memoised per word); the longest common subsequence is taken
by rouge-score's ``_lcs_table`` over the tokens the two texts share (a token the other text lacks can
never be part of a common subsequence, so the length is the same), or known without a table (see
``_rouge_l``). The values equal RougeScorer's exactly (tests/engine/test_answers_rouge.py compares them
on thousands of random pairs). A pair whose table would exceed ``MAX_LCS_CELLS`` raises AnswerTooLong.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import json
import math
import os
import re
import string
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

try:
    from collections import _count_elements  # CPython's C helper behind Counter.update
except ImportError:  # pragma: no cover - other Pythons
    def _count_elements(mapping, iterable):
        for element in iterable:
            mapping[element] = mapping.get(element, 0) + 1

from .errors import (CR_ONLY, MAX_ID_BYTES, MAX_LINE_BYTES, UTF8_BOM, EngineInputError, UnknownMeasureError,
                     deepest_json_line, show, text_problem)

__all__ = [
    "ANSWER_MEASURES", "TOKENIZERS", "Answer", "AnswerTooLong", "aggregate", "compare_answers", "normalize_text",
    "parse_answer_measures", "read_predictions", "read_references", "read_ultrarag", "read_weights",
    "score_answer", "score_answers", "ultrarag_output",
]

ANSWER_MEASURES = ("acc", "em", "stringem", "coverem", "f1", "rouge-1", "rouge-2", "rouge-l")
TOKENIZERS = ("ultrarag", "unicode")
ULTRARAG_MAX_BYTES = 1 << 30  # an UltraRAG result file is read whole; beyond this it is refused
# rouge-score's LCS table is quadratic in time and memory (a Python list per row): a pair of answers that
# would need more cells than this is refused rather than left to run for minutes (4M cells: about 1 s).
MAX_LCS_CELLS = 4_000_000

References = Mapping[str, Sequence[str]]
Predictions = Mapping[str, "Answer | str"]
Progress = Callable[[int, int], None]


class AnswerTooLong(ValueError):
    """A prediction and a reference too long to score with ROUGE-L in bounded time."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """A system's answer to one query, with the ids of the documents it cites (possibly none)."""

    answer: str
    cites: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------ normalisation

_PUNCTUATION = string.punctuation + "‘’´`"
_PUNCTUATION_TO_SPACE = str.maketrans({ch: " " for ch in _PUNCTUATION})
_ASCII_PUNCTUATION_TO_SPACE = bytes.maketrans(string.punctuation.encode("ascii"),
                                              b" " * len(string.punctuation))  # the same, on ASCII bytes
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ARTICLE_WORDS = frozenset(("a", "an", "the"))
_BOOLEANS = {"True": "yes", "False": "no"}
# ASCII characters that are neither word characters nor whitespace once punctuation is gone: a \b can
# fall next to them inside a whitespace-separated word.
_ASCII_NON_WORD = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


def _normal_words(text: str) -> list[str]:
    """The words of ``normalize_text(text)``.

    On ASCII text without control characters, after the punctuation step every character is a word
    character or whitespace, so ``\b(a|an|the)\b`` matches exactly the whitespace-separated words
    "a", "an" and "the": dropping those words is the same as the regular expression (the property
    tests compare both on random text, control characters and non-ASCII text included)."""
    text = _BOOLEANS.get(text, text)
    text = text.replace("_", " ").lower()
    if text.isascii():
        text = text.encode("ascii").translate(_ASCII_PUNCTUATION_TO_SPACE).decode("ascii")
        if not _ASCII_NON_WORD.search(text):
            return [w for w in text.split() if w not in _ARTICLE_WORDS]
        return _ARTICLES.sub(" ", text).split()
    text = text.translate(_PUNCTUATION_TO_SPACE)
    return _ARTICLES.sub(" ", text).split()


def normalize_text(text: str) -> str:
    """UltraRAG's ``normalize_text``, step for step (see the module docstring)."""
    return " ".join(_normal_words(text))


def _normalize_text_regex(text: str) -> str:
    """The same, always through the regular expression (for tests)."""
    text = {"True": "yes", "False": "no"}.get(text, text)
    text = text.replace("_", " ").lower().translate(_PUNCTUATION_TO_SPACE)
    return " ".join(_ARTICLES.sub(" ", text).split())


# ---------------------------------------------------------------------------------------- tokenizers


class _MemoStemmer:
    """rouge-score's Porter stemmer with one dictionary look-up per word seen before."""

    def __init__(self) -> None:
        from nltk.stem import porter

        self._stem = porter.PorterStemmer().stem
        self._memo: dict[str, str] = {}

    def stem(self, word: str) -> str:
        memo = self._memo
        stemmed = memo.get(word)
        if stemmed is None:
            if len(memo) > 1_000_000:  # hostile vocabularies do not grow memory without end
                memo.clear()
            stemmed = memo[word] = self._stem(word)
        return stemmed


_STEMMER: _MemoStemmer | None = None


def _stemmer() -> _MemoStemmer:
    global _STEMMER
    if _STEMMER is None:
        _STEMMER = _MemoStemmer()
    return _STEMMER


_WORD_TOKENS: dict[str, dict[str, tuple[str, ...]]] = {"ultrarag": {}, "unicode": {}}
_MEMO_WORDS = 1_000_000  # hostile vocabularies do not grow memory without end


def _word_tokens(word: str, tokenizer: str) -> tuple[str, ...]:
    """The ROUGE tokens of one whitespace-free word. rouge-score's tokenizer treats whitespace as a
    separator, so the tokens of a text are those of its words, one after the other."""
    if tokenizer == "ultrarag":
        from rouge_score import tokenize

        return tuple(tokenize.tokenize(word, _stemmer()))
    stem = _stemmer().stem
    return tuple(stem(w) if len(w) > 3 and _ASCII_WORD.fullmatch(w) else w for w in _unicode_words(word))


def _rouge_tokens(text: str | list[str], tokenizer: str = "ultrarag") -> list[str]:
    """With "ultrarag", rouge-score's DefaultTokenizer(use_stemmer=True).tokenize(text); with "unicode",
    the unicode words with ASCII words longer than 3 characters stemmed as rouge-score does. ``text`` may
    be given as its whitespace-separated words. Each word's tokens are made once (memoised)."""
    words = text.split() if isinstance(text, str) else text
    memo = _WORD_TOKENS[tokenizer]
    try:
        return list(chain.from_iterable(map(memo.__getitem__, words)))
    except KeyError:
        pass
    for word in words:
        if word not in memo:
            if len(memo) >= _MEMO_WORDS:
                memo.clear()
            memo[word] = _word_tokens(word, tokenizer)
    try:
        return list(chain.from_iterable(map(memo.__getitem__, words)))
    except KeyError:  # the memo was cleared half-way through this text
        return [t for word in words for t in _word_tokens(word, tokenizer)]


_UNICODE_TOKEN = None
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _unicode_words(text: str) -> list[str]:
    """Runs of letters, marks and digits; each Han, Hiragana or Katakana character alone."""
    global _UNICODE_TOKEN
    if _UNICODE_TOKEN is None:
        import regex

        cjk = r"\p{Han}\p{Hiragana}\p{Katakana}"
        _UNICODE_TOKEN = regex.compile(rf"[{cjk}]|[[\p{{L}}\p{{M}}\p{{N}}]--[{cjk}]]+", regex.V1)
    return _UNICODE_TOKEN.findall(text)


# ------------------------------------------------------------------------------------------ scoring


class _Text:
    """One normalised text and what the chosen measures need of it, each made once."""

    __slots__ = ("norm", "tokens", "token_set", "counts", "rouge", "rouge_set", "grams1", "grams2")

    def __init__(self, raw: str, tokenizer: str, needs: _Needs):
        words = _normal_words(raw)
        self.norm = norm = " ".join(words)
        if needs.tokens:
            self.tokens = tokens = words if tokenizer == "ultrarag" else _unicode_words(norm)
            self.token_set = set(tokens)
            self.counts = None  # made by _counts() when f1 needs them: only when a reference repeats a token
        if needs.rouge:
            self.rouge = rouge = _rouge_tokens(words, tokenizer)
            self.rouge_set = set(rouge)
            # rouge_scorer._create_ngrams's counts, made in C: unigrams are keyed by the token instead of a
            # 1-tuple (the scores only compare keys with keys). A defaultdict, because _score_ngrams looks
            # every target n-gram up in the prediction's counts; a missing one adds a 0 count, which changes
            # neither the sum of the counts nor any minimum.
            if needs.rouge1:
                self.grams1 = grams = defaultdict(int)
                _count_elements(grams, rouge)
            if needs.rouge2:
                self.grams2 = grams = defaultdict(int)
                _count_elements(grams, zip(rouge, rouge[1:]))


@dataclasses.dataclass(frozen=True)
class _Needs:
    """What the chosen measures need made of each text."""

    tokens: bool
    rouge: bool
    rouge1: bool
    rouge2: bool


def _needs(measures: Sequence[str]) -> _Needs:
    return _Needs(tokens="coverem" in measures or "f1" in measures,
                  rouge=any(m.startswith("rouge") for m in measures), rouge1="rouge-1" in measures,
                  rouge2="rouge-2" in measures)


def _counts(text: _Text) -> dict[str, int]:
    if text.counts is None:
        text.counts = {}
        _count_elements(text.counts, text.tokens)
    return text.counts


def _f1(pred: _Text, ref: _Text) -> float:
    # UltraRAG's calc_f1, with the same arithmetic.
    if not pred.tokens or not ref.tokens:
        return 0.0
    # sum((Counter(pred) & Counter(ref)).values()), over the reference's (fewer) distinct tokens; when no
    # reference token repeats, each shared token counts once
    if len(ref.token_set) == len(ref.tokens):
        num_same = len(ref.token_set & pred.token_set)
    else:
        counts = _counts(pred)
        num_same = sum(min(n, counts.get(t, 0)) for t, n in _counts(ref).items())
    precision = 1.0 * num_same / len(pred.tokens)
    recall = 1.0 * num_same / len(ref.tokens)
    if precision + recall == 0:
        return 0.0
    return (2 * precision * recall) / (precision + recall)


_LCS_TABLE = _SCORE_NGRAMS = _FMEASURE = None


def _load_rouge() -> None:
    """rouge-score's functions, imported once (the command line pays for nltk only when ROUGE is asked)."""
    global _LCS_TABLE, _SCORE_NGRAMS, _FMEASURE
    if _LCS_TABLE is None:
        from rouge_score import rouge_scorer, scoring

        _LCS_TABLE, _SCORE_NGRAMS, _FMEASURE = rouge_scorer._lcs_table, rouge_scorer._score_ngrams, scoring.fmeasure


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    rest = iter(long)
    return all(token in rest for token in short)  # each `in` consumes `rest` up to the token


def _rouge_l(pred: _Text, refs: list[_Text]) -> float:
    """max over the references of rouge_scorer._score_lcs(ref.rouge, pred.rouge).fmeasure.

    Only the LCS length is found differently, never the score (precision, recall, then rouge-score's
    ``scoring.fmeasure``, as _score_lcs does). Exact shortcuts first:
    - a token the other text lacks is never part of a common subsequence, so both token lists are cut
      to the shared tokens (the LCS length is unchanged); nothing shared gives 0;
    - when one cut list has a single token, or is a subsequence of the other, the LCS is that list;
    - otherwise the LCS is shorter than both cut lists, and when even that bound cannot beat the best
      reference so far, rouge-score's table is not built (the maximum is unchanged; the F-measure grows
      with the LCS length).
    Otherwise rouge-score's own ``_lcs_table`` over the cut lists gives the length."""
    prediction = pred.rouge
    if not prediction:
        return 0.0
    best = 0.0
    pending = []
    pred_set = pred.rouge_set
    for ref in refs:
        target = ref.rouge
        if not target:
            continue
        shared = ref.rouge_set & pred_set
        if not shared:
            continue
        kept_target = [t for t in target if t in shared]
        kept_prediction = [t for t in prediction if t in shared]
        if len(kept_target) == 1 or len(kept_prediction) == 1:
            lcs_length = 1
        elif len(kept_target) <= len(kept_prediction) and _is_subsequence(kept_target, kept_prediction):
            lcs_length = len(kept_target)
        elif len(kept_prediction) <= len(kept_target) and _is_subsequence(kept_prediction, kept_target):
            lcs_length = len(kept_prediction)
        else:
            pending.append((target, kept_target, kept_prediction))
            continue
        value = _FMEASURE(lcs_length / len(prediction), lcs_length / len(target))
        if value > best:
            best = value
    for target, kept_target, kept_prediction in pending:
        bound = min(len(kept_target), len(kept_prediction)) - 1
        if _FMEASURE(bound / len(prediction), bound / len(target)) <= best:
            continue
        cells = len(kept_target) * len(kept_prediction)
        if cells > MAX_LCS_CELLS:
            raise AnswerTooLong(f"rouge-l would compare {len(kept_target):,} with {len(kept_prediction):,} shared "
                                f"tokens ({cells:,} table cells; the limit is {MAX_LCS_CELLS:,})")
        lcs_length = _LCS_TABLE(kept_target, kept_prediction)[-1][-1]
        value = _FMEASURE(lcs_length / len(prediction), lcs_length / len(target))
        if value > best:
            best = value
    return best


def _score_one(pred: _Text, refs: list[_Text], measures: Sequence[str]) -> list[float]:
    """Every measure of one prediction against its references, in the order of ``measures`` (call
    _load_rouge() first for ROUGE)."""
    out: list[float] = []
    norm = pred.norm
    for measure in measures:
        best = 0.0
        if measure == "acc":
            if norm:
                for r in refs:
                    if r.norm in norm:
                        best = 1.0
                        break
        elif measure == "em":
            for r in refs:
                if r.norm == norm:
                    best = 1.0
                    break
        elif measure == "stringem":
            if refs:
                best = sum(1 for r in refs if norm == r.norm) / len(refs)
        elif measure == "coverem":
            token_set = pred.token_set
            for r in refs:
                if r.token_set <= token_set:  # every token of the reference is a token of the prediction
                    best = 1.0
                    break
        elif measure == "f1":
            for r in refs:
                value = _f1(pred, r)
                if value > best:
                    best = value
        elif measure == "rouge-1":
            grams, rouge_set = pred.grams1, pred.rouge_set
            for r in refs:
                if rouge_set.isdisjoint(r.rouge_set):
                    continue  # no common n-gram: _score_ngrams gives 0.0
                value = _SCORE_NGRAMS(r.grams1, grams).fmeasure
                if value > best:
                    best = value
        elif measure == "rouge-2":
            grams, rouge_set = pred.grams2, pred.rouge_set
            for r in refs:
                if not grams or not r.grams2 or rouge_set.isdisjoint(r.rouge_set):
                    continue
                value = _SCORE_NGRAMS(r.grams2, grams).fmeasure
                if value > best:
                    best = value
        else:  # rouge-l
            best = _rouge_l(pred, refs)
        out.append(best)
    return out


def parse_answer_measures(measures: Iterable[str] | str | None) -> list[str]:
    """Measure names, case-insensitive, comma lists allowed, duplicates dropped, in the order given;
    "all" (or None) is the eight. An unknown name raises UnknownMeasureError with suggestions."""
    if measures is None:
        return list(ANSWER_MEASURES)
    if isinstance(measures, str):
        measures = [measures]
    chosen: list[str] = []
    aliases = {"rouge1": "rouge-1", "rouge2": "rouge-2", "rougel": "rouge-l", "rouge_1": "rouge-1",
               "rouge_2": "rouge-2", "rouge_l": "rouge-l", "accuracy": "acc", "exact_match": "em"}
    for item in measures:
        for text in str(item).split(","):
            name = text.strip().lower()
            if not name:
                continue
            if name == "all":
                chosen.extend(ANSWER_MEASURES)
                continue
            name = aliases.get(name, name)
            if name not in ANSWER_MEASURES:
                raise UnknownMeasureError(text.strip(), ANSWER_MEASURES,
                                          detail=f"unknown answer measure {text.strip()!r} "
                                                 f"(known: {', '.join(ANSWER_MEASURES)})")
            chosen.append(name)
    if not chosen:
        raise ValueError("no measure given")
    return list(dict.fromkeys(chosen))


def _check_tokenizer(tokenizer: str) -> None:
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")


def _text_of(prediction: Answer | str) -> str:
    return prediction.answer if isinstance(prediction, Answer) else prediction


def score_answer(prediction: str, references: Sequence[str], measures: Iterable[str] = ANSWER_MEASURES, *,
                 tokenizer: str = "ultrarag") -> dict[str, float]:
    """The measures for one prediction against its references: measure -> value."""
    measures = parse_answer_measures(measures)
    _check_tokenizer(tokenizer)
    needs = _needs(measures)
    if needs.rouge:
        _load_rouge()
    refs = [_Text(r, tokenizer, needs) for r in references]
    return dict(zip(measures, _score_one(_Text(_text_of(prediction), tokenizer, needs), refs, measures)))


def score_answers(references: References, predictions: Predictions, measures: Iterable[str] = ANSWER_MEASURES, *,
                  tokenizer: str = "ultrarag", all_queries: bool = False, progress: Progress | None = None,
                  processes: int = 1) -> dict[str, dict[str, float]]:
    """Score predictions against references: measure -> {query_id: value}, queries in the references' order.

    Only queries in ``references`` are scored (a prediction for another query is ignored). A query with
    references but no prediction is left out, or scores 0 on every measure with ``all_queries=True``
    (trec_eval's -c). A query whose reference list is empty scores 0 on every measure (as in UltraRAG).
    ``predictions`` values may be ``Answer`` or ``str``. ``progress(done, total)`` hears every 1,000
    queries. ``processes`` > 1 scores slices of the queries in that many forked processes (POSIX only; for
    command lines and scripts: forking a process that runs other threads can deadlock the child).
    """
    measures = parse_answer_measures(measures)
    _check_tokenizer(tokenizer)
    query_ids = [q for q in references if q in predictions]
    per_query: dict[str, dict[str, float]] = {m: {} for m in measures}
    if any(m.startswith("rouge") for m in measures):
        _load_rouge()  # before any fork: the workers share the loaded modules
    if processes > 1 and len(query_ids) >= 2000 and hasattr(os, "fork"):
        rows = _score_in_processes(references, predictions, query_ids, measures, tokenizer, processes, progress)
    else:
        rows = _score_rows(references, predictions, query_ids, measures, tokenizer, progress)
    scored = dict(zip(query_ids, rows))
    for qid in references:
        values = scored.get(qid)
        if values is None:
            if not all_queries:
                continue
            values = [0.0] * len(measures)
        for m, v in zip(measures, values):
            per_query[m][qid] = v
    return per_query


def _score_rows(references: References, predictions: Predictions, query_ids: Sequence[str], measures: list[str],
                tokenizer: str, progress: Progress | None = None) -> list[list[float]]:
    needs = _needs(measures)
    if needs.rouge:
        _load_rouge()
    memo: dict[str, _Text] = {}  # short reference texts ("yes", "Paris") recur across queries

    def text(raw: str) -> _Text:
        made = memo.get(raw)
        if made is None:
            made = _Text(raw, tokenizer, needs)
            if len(raw) <= 64 and len(memo) < 50_000:
                memo[raw] = made
        return made

    rows = []
    total = len(query_ids)
    # Nothing made here forms a reference cycle; the cyclic collector would only walk the growing
    # results again and again.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for done, qid in enumerate(query_ids, start=1):
            refs = [text(r) for r in references[qid]]
            pred = _Text(_text_of(predictions[qid]), tokenizer, needs)
            try:
                rows.append(_score_one(pred, refs, measures))
            except AnswerTooLong as error:
                raise AnswerTooLong(f"query {show(qid)}: {error}") from None
            if progress is not None and (done % 1000 == 0 or done == total):
                progress(done, total)
    finally:
        if collecting:
            gc.enable()
    return rows


def _score_in_processes(references: References, predictions: Predictions, query_ids: list[str],
                        measures: list[str], tokenizer: str, processes: int,
                        progress: Progress | None) -> list[list[float]]:
    """Forked workers each score a contiguous slice and send its rows back as JSON through a pipe; the
    parent scores the first slice itself. Floats survive JSON exactly (repr round-trips)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    bounds = [len(query_ids) * i // processes for i in range(processes + 1)]
    children = []
    for lo, hi in zip(bounds[1:-1], bounds[2:]):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(send, references, predictions, query_ids[lo:hi], measures,
                                                     tokenizer), daemon=True)
        child.start()
        send.close()
        children.append((child, receive))
    total = len(query_ids)
    # The slices are scored at the same pace: the parent's progress stands for all of them.
    share = None if progress is None else (lambda done, _: progress(min(done * processes, total), total))
    rows = _score_rows(references, predictions, query_ids[:bounds[1]], measures, tokenizer, share)
    for child, receive in children:
        try:
            status, payload = json.loads(receive.recv_bytes())
        except EOFError:
            status, payload = "error", "a scoring process ended without a result"
        child.join()
        if status == "too long":
            raise AnswerTooLong(payload)
        if status != "ok":
            raise RuntimeError(payload)
        rows.extend(payload)
    if progress is not None:
        progress(len(query_ids), len(query_ids))
    return rows


def _child(send, references, predictions, query_ids, measures, tokenizer) -> None:  # pragma: no cover (forked)
    try:
        message = ["ok", _score_rows(references, predictions, query_ids, measures, tokenizer)]
    except AnswerTooLong as error:
        message = ["too long", str(error)]
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        message = ["error", f"{type(error).__name__}: {error}"]
    send.send_bytes(json.dumps(message).encode())
    send.close()


# --------------------------------------------------------------------------------------- aggregates


def aggregate(per_query: Mapping[str, Mapping[str, float]],
              weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """measure -> mean of its per-query values (``sum(values) / len(values)``, as UltraRAG averages),
    or with ``weights`` (query id -> traffic weight; every scored query needs one, finite and >= 0) the
    weighted mean. No query (or weights that sum to 0) gives NaN."""
    out: dict[str, float] = {}
    for measure, values in per_query.items():
        if weights is None:
            out[measure] = sum(values.values()) / len(values) if values else math.nan
            continue
        missing = [q for q in values if q not in weights]
        if missing:
            raise ValueError(f"no weight for {len(missing)} queries, e.g. {missing[:3]}")
        w = [float(weights[q]) for q in values]
        if any(not math.isfinite(x) or x < 0 for x in w):
            raise ValueError("weights must be finite and >= 0")
        total = sum(w)
        out[measure] = sum(x * v for x, v in zip(w, values.values())) / total if total > 0 else math.nan
    return out


def ultrarag_output(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """UltraRAG's ``compute_metrics`` shape: ``{measure: [values in query order], ..., "avg_" + measure:
    mean}`` (the lists first, then the averages; an empty list averages 0.0, as in UltraRAG)."""
    lists = {m: list(values.values()) for m, values in per_query.items()}
    averages = {f"avg_{m}": (sum(v) / len(v) if v else 0.0) for m, v in lists.items()}
    return {**lists, **averages}


def compare_answers(references: References, baseline: Predictions, candidates: Mapping[str, Predictions],
                    measures: Iterable[str] = ANSWER_MEASURES, *, resamples: int = 10_000, seed: int = 42,
                    alpha: float = 0.05, all_queries: bool = False, weights: Mapping[str, float] | None = None,
                    tokenizer: str = "ultrarag", correction: str = "holm", baseline_name: str = "baseline",
                    processes: int = 1) -> dict[str, Any]:
    """Compare answer runs with a baseline, as the app compares retrieval runs.

    Returns a dict shaped like the ``results`` of a run evaluation (``evaluation/evaluations.py``), so
    the comparison templates render it unchanged::

        {"baseline": baseline_name,
         "comparisons": {name: [Comparison.as_dict(), ... one per measure]},   # A = candidate, B = baseline
         "means": {name: {measure: mean}},            # every system, the baseline included (UltraRAG avg_)
         "weighted": {name: {measure: weighted mean}} or None,
         "n_queries": int}

    Each comparison is ``significance.compare_many``'s: means, paired permutation p, paired t-test p,
    bootstrap 95% CI of the mean difference, wins/ties/losses, and Holm-corrected p across every
    (candidate, measure) test. Queries: those with references that either system answers (a system
    missing one scores 0 there), or every query with references when ``all_queries``. Means in
    ``means`` are over the same queries. ``weights`` (query id -> weight) adds weighted means; the
    tests themselves are unweighted, as for runs.
    """
    from .significance import compare_many

    measures = parse_answer_measures(measures)
    systems = {baseline_name: baseline, **candidates}
    if len(systems) != len(candidates) + 1:
        raise ValueError(f"a candidate is named like the baseline ({baseline_name!r})")
    answered = {q for predictions in systems.values() for q in predictions if q in references}
    chosen = list(references) if all_queries else [q for q in references if q in answered]
    subset = {q: references[q] for q in chosen}
    per_query = {name: score_answers(subset, predictions, measures, tokenizer=tokenizer, all_queries=True,
                                     processes=processes)
                 for name, predictions in systems.items()}
    others = {name: per_query[name] for name in candidates}
    compared = compare_many(per_query[baseline_name], others, resamples=resamples, seed=seed, alpha=alpha,
                            correction=correction)
    return {
        "baseline": baseline_name,
        "comparisons": {name: [c.as_dict() for c in comparisons] for name, comparisons in compared.items()},
        "means": {name: aggregate(values) for name, values in per_query.items()},
        "weighted": None if weights is None else {name: aggregate(values, weights) for name, values in per_query.items()},
        "n_queries": len(chosen),
    }


# ------------------------------------------------------------------------------------------ readers


def _open(source: Any, name: str | None) -> tuple[BinaryIO, str | None, bool]:
    """A binary handle on ``source`` (a path or a binary file object), its display name, and whether
    this function opened it (and so must close it)."""
    if isinstance(source, (str, os.PathLike)):
        label = name or str(source)
        try:
            return open(Path(source), "rb"), label, True
        except OSError as error:
            raise EngineInputError(f"cannot read file: {error.strerror or error}", path=label) from None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source)), name, True
    if hasattr(source, "read"):
        label = name or getattr(source, "name", None)
        return source, (str(label) if label is not None else None), False
    raise TypeError(f"cannot read answers from {type(source).__name__}")


def _lines(source: Any, name: str | None, max_line_bytes: int | None) -> Iterable[tuple[int, str, str | None]]:
    """(line number, text without its line end, display name) for every non-blank line, checking as the
    file streams past: UTF-16 / binary content, over-long lines (never held whole), invalid UTF-8."""
    handle, label, close = _open(source, name)
    limit = max_line_bytes if max_line_bytes is not None else -1
    try:
        number = 0
        any_line = False
        while True:
            raw = handle.readline(limit + 1 if limit >= 0 else -1)
            if isinstance(raw, str):
                raise TypeError("open the file in binary mode ('rb')")
            if not raw:
                break
            number += 1
            if number == 1:
                problem = text_problem(raw[:4096] + handle.peek(4096)[:4096] if hasattr(handle, "peek") else raw[:4096])
                if problem:
                    raise EngineInputError(problem, path=label)
                if raw.startswith(UTF8_BOM):
                    raw = raw[len(UTF8_BOM):]
            body = raw[:-1] if raw.endswith(b"\n") else raw
            if limit >= 0 and len(body) > limit:
                if b"\r" in body:
                    problem = CR_ONLY
                else:
                    problem = f"line longer than {limit:,} bytes"
                raise EngineInputError(problem, path=label, line=number)
            if body.endswith(b"\r"):
                body = body[:-1]
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                raise EngineInputError(f"not valid UTF-8 ({error.reason})", path=label, line=number) from None
            if text.strip():
                any_line = True
                yield number, text, label
        if not any_line:
            raise EngineInputError("empty file", path=label)
    finally:
        if close:
            handle.close()


def _json_line(text: str, label: str | None, number: int) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise EngineInputError(f"invalid JSON: {error.msg} (column {error.colno})", path=label, line=number) from None
    except RecursionError:
        raise EngineInputError("JSON nested too deeply", path=label, line=number) from None
    except ValueError as error:  # an integer of more than 4,300 digits
        raise EngineInputError(f"invalid JSON: {show(str(error))}", path=label, line=number) from None
    if not isinstance(value, dict):
        raise EngineInputError(f"expected a JSON object, found {type(value).__name__}", path=label, line=number)
    return value


def _query_id(value: Any, label: str | None, number: int | None, max_id_bytes: int | None) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EngineInputError(f'"query_id" must be a string or an integer, not {type(value).__name__}',
                               path=label, line=number)
    qid = str(value)
    if not qid.strip():
        raise EngineInputError("empty query id", path=label, line=number)
    if max_id_bytes is not None and len(qid.encode("utf-8", "surrogatepass")) > max_id_bytes:
        raise EngineInputError(f"query id longer than {max_id_bytes} bytes: {show(qid)}", path=label, line=number)
    return qid


def _field(record: dict, key: str, label: str | None, number: int) -> Any:
    if key not in record:
        raise EngineInputError(f'missing field "{key}" (fields: {show(sorted(record))})', path=label, line=number)
    return record[key]


def _string(value: Any, what: str, label: str | None, number: int | None) -> str:
    if not isinstance(value, str):
        raise EngineInputError(f"{what} must be a string, not {type(value).__name__}: {show(value)}",
                               path=label, line=number)
    return value


def _is_jsonl(first: str) -> bool:
    return first.lstrip().startswith(("{", "["))


def _tsv(text: str, label: str | None, number: int, max_id_bytes: int | None) -> tuple[str, str]:
    if "\t" not in text:
        raise EngineInputError(f"expected query_id<TAB>answer, found no tab: {show(text)}", path=label, line=number)
    qid, answer = text.split("\t", 1)
    return _query_id(qid.strip(), label, number, max_id_bytes), answer


def _is_tsv_header(text: str) -> bool:
    return text.strip().lower().replace(" ", "") in ("query_id\tanswer", "query_id\tanswers", "qid\tanswer")


def _answer_lines(path: Any, name: str | None, max_line_bytes: int | None,
                  max_id_bytes: int | None) -> Iterable[tuple[int, str | None, str, dict | None, str | None]]:
    """The lines of a JSONL or TSV answers file (references or predictions), its format told from the first
    non-blank line and a TSV header skipped: (line number, label, query id, the JSON record or None, the TSV
    answer or None)."""
    jsonl = None
    for number, text, label in _lines(path, name, max_line_bytes):
        if jsonl is None:
            jsonl = _is_jsonl(text)
            if not jsonl and _is_tsv_header(text):
                continue
        if jsonl:
            record = _json_line(text, label, number)
            yield number, label, _query_id(_field(record, "query_id", label, number), label, number, max_id_bytes), record, None
        else:
            qid, answer = _tsv(text, label, number, max_id_bytes)
            yield number, label, qid, None, answer


def read_references(path: Any, *, name: str | None = None, max_line_bytes: int | None = MAX_LINE_BYTES,
                    max_id_bytes: int | None = MAX_ID_BYTES) -> dict[str, list[str]]:
    """Reference answers: query id -> answers, in file order.

    JSONL, one object a line: ``{"query_id": "q1", "answers": ["Paris", "City of Paris"]}`` ("answers"
    may also be one string; a query may come on several lines, its answers are joined); or TSV,
    ``query_id<TAB>answer`` one reference a line (several lines per query), with an optional header line
    ``query_id<TAB>answer``. The format is told from the first non-blank line. ``path`` is a path or a
    binary file object (``name`` then names it in errors). Bad input raises EngineInputError naming the
    file and line.
    """
    references: dict[str, list[str]] = {}
    for number, label, qid, record, answer in _answer_lines(path, name, max_line_bytes, max_id_bytes):
        if record is not None:
            answers = _field(record, "answers", label, number)
            if isinstance(answers, str):
                answers = [answers]
            if not isinstance(answers, list):
                raise EngineInputError(f'"answers" must be a list of strings, not {type(answers).__name__}',
                                       path=label, line=number)
            if not answers:
                raise EngineInputError('"answers" is empty: give at least one reference answer', path=label, line=number)
            for item in answers:
                _string(item, "every answer in \"answers\"", label, number)
            references.setdefault(qid, []).extend(answers)
        else:
            references.setdefault(qid, []).append(answer)
    return references


def read_predictions(path: Any, *, name: str | None = None, max_line_bytes: int | None = MAX_LINE_BYTES,
                     max_id_bytes: int | None = MAX_ID_BYTES) -> dict[str, Answer]:
    """Predicted answers: query id -> Answer, in file order.

    JSONL, ``{"query_id": "q1", "answer": "Paris", "cites": ["doc7", "doc9"]}`` ("cites" optional, a list
    of document ids); or TSV ``query_id<TAB>answer`` (optional header ``query_id<TAB>answer``). A query
    answered twice is an error naming both lines. Other fields are ignored.
    """
    predictions: dict[str, Answer] = {}
    first_line: dict[str, int] = {}
    for number, label, qid, record, answer in _answer_lines(path, name, max_line_bytes, max_id_bytes):
        if record is not None:
            answer = _string(_field(record, "answer", label, number), '"answer"', label, number)
            cites = record.get("cites", [])
            if cites is None:
                cites = []
            if not isinstance(cites, list) or any(isinstance(c, bool) or not isinstance(c, (str, int)) for c in cites):
                raise EngineInputError(f'"cites" must be a list of document ids, not {show(cites)}', path=label,
                                       line=number)
            cited = tuple(str(c) for c in cites)
            if max_id_bytes is not None:
                for c in cited:
                    if len(c.encode("utf-8", "surrogatepass")) > max_id_bytes:
                        raise EngineInputError(f"document id longer than {max_id_bytes} bytes: {show(c)}",
                                               path=label, line=number)
        else:
            cited = ()
        if qid in predictions:
            raise EngineInputError(f"query {show(qid)} is answered twice (first on line {first_line[qid]})",
                                   path=label, line=number)
        first_line[qid] = number
        predictions[qid] = Answer(answer, cited)
    return predictions


def read_ultrarag(path: Any, *, name: str | None = None,
                  max_bytes: int = ULTRARAG_MAX_BYTES) -> tuple[dict[str, list[str]], dict[str, Answer]]:
    """UltraRAG's parallel lists from a JSON object with ``pred_ls`` (strings) and ``gt_ls`` (each a list
    of strings, or one string taken as a single reference): (references, predictions) keyed by the
    sample index as a string, "0", "1", ... The lists must have the same length (UltraRAG's ``zip``
    would silently drop the tail). An empty reference list is kept and scores 0, as in UltraRAG.
    A file larger than ``max_bytes`` is refused before it is read."""
    handle, label, close = _open(path, name)
    try:
        data = handle.read(max_bytes + 1)
    finally:
        if close:
            handle.close()
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > max_bytes:
        raise EngineInputError(f"file larger than {max_bytes:,} bytes", path=label)
    problem = text_problem(data[:4096])
    if problem:
        raise EngineInputError(problem, path=label)
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    if not data.strip():
        raise EngineInputError("empty file", path=label)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise EngineInputError(f"not valid UTF-8 ({error.reason})", path=label,
                               line=data.count(b"\n", 0, error.start) + 1) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise EngineInputError(f"invalid JSON: {error.msg}", path=label, line=error.lineno) from None
    except RecursionError:
        raise EngineInputError("JSON nested too deeply", path=label, line=deepest_json_line(text)) from None
    except ValueError as error:
        raise EngineInputError(f"invalid JSON: {show(str(error))}", path=label) from None
    if not isinstance(document, dict):
        raise EngineInputError(f"expected a JSON object with pred_ls and gt_ls, found {type(document).__name__}",
                               path=label, line=1)
    for key in ("pred_ls", "gt_ls"):
        if key not in document:
            raise EngineInputError(f'missing field "{key}" (fields: {show(sorted(document))})', path=label)
        if not isinstance(document[key], list):
            raise EngineInputError(f'"{key}" must be a list, not {type(document[key]).__name__}', path=label)
    preds, gts = document["pred_ls"], document["gt_ls"]
    if len(preds) != len(gts):
        raise EngineInputError(f"pred_ls has {len(preds)} items but gt_ls has {len(gts)}", path=label)
    references: dict[str, list[str]] = {}
    predictions: dict[str, Answer] = {}
    for index, (pred, gt) in enumerate(zip(preds, gts)):
        key = str(index)
        predictions[key] = Answer(_string(pred, f"pred_ls[{index}]", label, None))
        if isinstance(gt, str):
            gt = [gt]
        if not isinstance(gt, list):
            raise EngineInputError(f"gt_ls[{index}] must be a list of strings, not {type(gt).__name__}", path=label)
        references[key] = [_string(g, f"gt_ls[{index}][{j}]", label, None) for j, g in enumerate(gt)]
    return references, predictions


def read_weights(path: Any, *, name: str | None = None, max_line_bytes: int | None = MAX_LINE_BYTES,
                 max_id_bytes: int | None = MAX_ID_BYTES) -> dict[str, float]:
    """Per-query traffic weights: ``query_id<TAB>weight`` lines (finite, >= 0; a query once)."""
    weights: dict[str, float] = {}
    for number, text, label in _lines(path, name, max_line_bytes):
        parts = text.split("\t")
        if len(parts) != 2:
            raise EngineInputError(f"expected query_id<TAB>weight, found {len(parts)} fields", path=label, line=number)
        qid = _query_id(parts[0], label, number, max_id_bytes)
        try:
            weight = float(parts[1])
        except ValueError:
            if number == 1 and parts[1].strip().lower() == "weight":
                continue
            raise EngineInputError(f"weight is not a number: {show(parts[1])}", path=label, line=number) from None
        if not math.isfinite(weight) or weight < 0:
            raise EngineInputError(f"weight must be finite and >= 0, not {show(parts[1])}", path=label, line=number)
        if qid in weights:
            raise EngineInputError(f"query {show(qid)} has two weights", path=label, line=number)
        weights[qid] = weight
    return weights
