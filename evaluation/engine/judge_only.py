"""Judge-only evaluation, Evret's way (evret 0.0.3, ``src/evret/evaluation/evaluator.py``): score rankings with
no relevance labels at all, from each query's expected answers and a judge that says whether a document
matches an answer. The scores are UNCALIBRATED: they rest on an automatic judge that no rater has checked.

    from evaluation.engine.judge_only import evaluate_judge_only, judge_matcher
    result = evaluate_judge_only(queries, {"bm25": rankings}, documents, judge_matcher("token_overlap"), ks=(1, 5))
    result.runs["bm25"].mean["recall@5"], result.to_json()

The assignment, as Evret's evaluator makes it for each query and ranking:

- texts are normalised (stripped, lower-cased, whitespace collapsed): the query, every expected answer and
  every document's text; empty answers are dropped and repeated ones kept once, so R, the number of expected
  answers, counts distinct normalised answers;
- a document is judged through its candidates: its normalised id and, when it has text, its normalised text
  (Evret compares the id too: an answer that quotes a document's id matches it);
- the judge is asked about every (answer, candidate) pair of the top max(k) documents, before any assignment;
  here in ONE batch for every query and every run (a question asked for two runs is asked once);
- then, from the top down, a document takes the first answer (in the given order) that one of its candidates
  matches and that no earlier document took; an answer is taken at most once, so a ranking can hit at most R.
  A document matching several answers takes one; the same document twice in a ranking can take two.

The judge may fail to judge a pair (None: an endpoint that kept failing, a reply it could not read). Such a
pair counts as no match, as Evret's judges return False when they cannot tell; the result counts them.

Measures at each cutoff k, on the top min(k, n) documents of a ranking of n, with h the documents of those that
took an answer, averaged over every query given (a query with no answer, or that the run does not answer,
scores 0 and counts in the mean, as in Evret):

- ``recall@k`` = h / R (0 when R = 0);
- ``precision@k`` = h / k: k, not min(k, n), so a ranking shorter than k is penalised;
- ``mrr@k`` = 1 / the rank of the first document that took an answer (0 if none);
- ``ndcg@k``: binary gains, DCG = sum over those ranks r of 1 / log2(r + 1); the ideal puts min(k, R) answers
  at the top: IDCG = sum_{i=1..min(k,R)} 1 / log2(i + 1); 0 when R = 0 or the ranking is empty;
- ``hit_rate@k`` = 1 if h > 0;
- ``average_precision@k`` = sum over those ranks r of (hits up to r) / r, divided by R (not min(k, R)).

Sums run in rank order and means in query order, as Evret's loops do, so the values are equal to the bit.
No Django here; `judge_matcher` imports Verdict's judges (judgments.judges) only when called.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineInputError

KIND = "judge-only (uncalibrated)"
UNCALIBRATED = f"{KIND}: scores rest on an automatic judge no rater has checked"
MEASURES = ("recall", "precision", "mrr", "ndcg", "hit_rate", "average_precision")  # Evret's metric names
DEFAULT_KS = (1, 3, 5, 10)
COULD_NOT_JUDGE_RULE = "a pair the judge could not judge counts as no match, as in Evret"


@dataclass(frozen=True)
class MatchQuestion:
    """Does `document` (a document's normalised text, or its id) match the expected `answer` for `query`?"""

    query: str
    answer: str
    document: str


# matches(questions) -> one answer per question: True, False, or None when the judge could not judge.
Matcher = Callable[[list[MatchQuestion]], Sequence[bool | None]]


@dataclass(frozen=True)
class QueryAnswers:
    text: str
    answers: tuple[str, ...]


def normalize(value: object) -> str:
    """Evret's label normalisation: stripped, lower-cased, runs of whitespace made one space."""
    return " ".join(str(value).strip().lower().split())


def measure_names(ks: Sequence[int]) -> list[str]:
    return [f"{measure}@{k}" for measure in MEASURES for k in ks]


@dataclass
class RunResult:
    """One run's scores: ``mean[measure@k]``, ``per_query[measure@k][query_id]``, and what took which answer."""

    mean: dict[str, float]
    per_query: dict[str, dict[str, float]]
    taken: dict[str, list[int | None]]  # query id -> per ranked document, the index of the answer it took
    without_results: int  # queries the run returns nothing for
    could_not_judge: int  # questions about this run's documents the judge could not judge


@dataclass
class JudgeOnlyResult:
    ks: tuple[int, ...]
    query_ids: list[str]
    answers: dict[str, tuple[str, ...]]  # normalised, distinct: what R counts
    runs: dict[str, RunResult]
    asked: int  # distinct questions put to the judge
    matched: int
    could_not_judge: int
    judge: dict = field(default_factory=dict)

    @property
    def measures(self) -> list[str]:
        return measure_names(self.ks)

    @property
    def without_answers(self) -> int:
        return sum(1 for qid in self.query_ids if not self.answers[qid])

    def to_json(self, *, per_query: bool = True) -> dict:
        """Plain JSON; its first fields say the scores are uncalibrated."""
        runs = {}
        for name, run in self.runs.items():
            runs[name] = {"mean": run.mean, "queries_without_results": run.without_results,
                          "could_not_judge": run.could_not_judge}
            if per_query:
                runs[name]["per_query"] = run.per_query
        return {"kind": KIND, "note": UNCALIBRATED, "judge": self.judge, "ks": list(self.ks), "measures": self.measures,
                "queries": {"scored": len(self.query_ids), "without_answers": self.without_answers},
                "questions": {"asked": self.asked, "matched": self.matched, "could_not_judge": self.could_not_judge,
                              "rule": COULD_NOT_JUDGE_RULE},
                "runs": runs}


def evaluate_judge_only(queries: Mapping[str, QueryAnswers], runs: Mapping[str, Mapping[str, Sequence[str]]],
                        documents: Mapping[str, str], matches: Matcher, ks: Iterable[int] = DEFAULT_KS,
                        judge: Mapping | None = None) -> JudgeOnlyResult:
    """Score each run of `runs` (name -> query id -> ranked doc ids) on every query of `queries`, with `documents`
    (doc id -> text; a document without text is judged by its id alone) and the batch judge `matches`."""
    ks = _cutoffs(ks)
    depth = max(ks)
    texts = {normalize(doc_id): normalize(text) for doc_id, text in documents.items() if str(text).strip()}
    answers = {qid: tuple(dict.fromkeys(a for a in map(normalize, q.answers) if a)) for qid, q in queries.items()}
    query_texts = {qid: normalize(q.text) for qid, q in queries.items()}

    questions: dict[MatchQuestion, int] = {}
    layouts: dict[str, dict[str, list[list[list[int]]]]] = {}  # run -> query -> rank -> answer -> question indexes
    for name, rankings in runs.items():
        layouts[name] = {}
        for qid in queries:
            ranking = list(rankings.get(qid, ()))[:depth]
            per_rank = []
            for doc_id in ranking:
                candidates = _candidates(doc_id, texts)
                per_rank.append([[questions.setdefault(MatchQuestion(query_texts[qid], answer, candidate), len(questions))
                                  for candidate in candidates] for answer in answers[qid]])
            layouts[name][qid] = per_rank
    asked = list(questions)
    replies = list(matches(asked)) if asked else []
    if len(replies) != len(asked):
        raise ValueError(f"the judge answered {len(replies)} questions of {len(asked)}")
    unjudged = {i for i, reply in enumerate(replies) if reply is None}

    results = {}
    for name, rankings in runs.items():
        per_query = {m: {} for m in measure_names(ks)}
        taken_by_query, without_results, used = {}, 0, set()
        for qid in queries:
            per_rank = layouts[name][qid]
            taken = _assign(per_rank, replies)
            taken_by_query[qid] = taken
            used.update(i for rank in per_rank for answer in rank for i in answer)
            without_results += not rankings.get(qid)
            for k in ks:
                for measure, value in _scores(taken, len(answers[qid]), k).items():
                    per_query[f"{measure}@{k}"][qid] = value
        mean = {m: _mean(values.values()) for m, values in per_query.items()}
        results[name] = RunResult(mean, per_query, taken_by_query, without_results, len(used & unjudged))
    return JudgeOnlyResult(ks, list(queries), answers, results, len(asked), sum(1 for r in replies if r),
                           len(unjudged), dict(judge or {}))


def _cutoffs(ks: Iterable[int]) -> tuple[int, ...]:
    ks = tuple(ks)
    if not ks:
        raise ValueError("give at least one cutoff k")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"a cutoff k must be a positive whole number, not {k!r}")
    return tuple(dict.fromkeys(ks))


def _candidates(doc_id: str, texts: Mapping[str, str]) -> list[str]:
    key = normalize(doc_id)
    return list(dict.fromkeys([key] + ([texts[key]] if key in texts else [])))


def _assign(per_rank: list[list[list[int]]], replies: Sequence[bool | None]) -> list[int | None]:
    """Top down, each document takes the first still-free answer one of its candidates matches."""
    free, taken = None, []
    for answers in per_rank:
        if free is None:
            free = set(range(len(answers)))
        choice = next((a for a, indexes in enumerate(answers) if a in free and any(replies[i] for i in indexes)), None)
        if choice is not None:
            free.discard(choice)
        taken.append(choice)
    return taken


def _scores(taken: list[int | None], n_answers: int, k: int) -> dict[str, float]:
    top = taken[:k]
    hit_ranks = [rank for rank, answer in enumerate(top, start=1) if answer is not None]
    hits = len(hit_ranks)
    if n_answers == 0:
        return {"recall": 0.0, "precision": 0.0, "mrr": 0.0, "ndcg": 0.0, "hit_rate": 0.0, "average_precision": 0.0}
    dcg = 0.0
    for rank in hit_ranks:
        dcg += 1.0 / math.log2(rank + 1)
    ideal = 0.0
    for rank in range(1, min(k, n_answers) + 1):
        ideal += 1.0 / math.log2(rank + 1)
    precision_sum = 0.0
    for count, rank in enumerate(hit_ranks, start=1):
        precision_sum += count / rank
    return {"recall": hits / n_answers, "precision": hits / k, "mrr": 1.0 / hit_ranks[0] if hits else 0.0,
            "ndcg": min(1.0, max(0.0, dcg / ideal)) if taken else 0.0, "hit_rate": 1.0 if hits else 0.0,
            "average_precision": precision_sum / n_answers}


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    total = 0.0
    for value in values:
        total += value
    return total / len(values) if values else 0.0


# ------------------------------------------------------------------------------------------ Verdict's judges


def judge_matcher(judge: Any, *, progress: Callable | None = None, cancel: Callable | None = None) -> Matcher:
    """A matcher from a Verdict judge (`judgments.judges.Judge`, or a kind name made with default settings):
    each question is asked on the binary scale with the answer as the only reference; a judged grade above the
    lowest is a match, a could-not-judge verdict is None."""
    from judgments import judges
    from judgments.lib.scales import BINARY

    if isinstance(judge, str):
        judge = judges.make_judge(judge)
    lowest = min(BINARY.values)

    def matches(questions: list[MatchQuestion]) -> list[bool | None]:
        contexts = [judges.JudgeContext(q.query, q.document, BINARY, references=(q.answer,)) for q in questions]
        verdicts = judge.batch_judge(contexts, progress=progress, cancel=cancel)
        return [None if v.outcome != judges.JUDGED else v.grade > lowest for v in verdicts]

    return matches


# ------------------------------------------------------------------------------------------ files


def read_queries(path: Any, *, name: str | None = None) -> dict[str, QueryAnswers]:
    """Queries with expected answers, JSONL one object a line: ``{"query_id": "q1", "query": "what is rag",
    "answers": ["RAG combines ..."]}`` (also ``text``/``query_text`` for the query and ``expected_answers``
    for the answers, as Evret's datasets spell them). A query given twice is an error."""
    from .answers import _json_line, _lines, _query_id, _string

    queries: dict[str, QueryAnswers] = {}
    for number, text, label in _lines(path, name, None):
        record = _json_line(text, label, number)
        qid = _query_id(_one_of(record, ("query_id", "id"), label, number), label, number, None)
        query = _string(_one_of(record, ("query", "text", "query_text"), label, number), '"query"', label, number)
        answers = _one_of(record, ("answers", "expected_answers"), label, number)
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list):
            raise EngineInputError(f'"answers" must be a list of strings, not {type(answers).__name__}', path=label, line=number)
        for item in answers:
            _string(item, 'every answer in "answers"', label, number)
        if qid in queries:
            raise EngineInputError(f"query {qid!r} is given twice", path=label, line=number)
        queries[qid] = QueryAnswers(query, tuple(answers))
    if not queries:
        raise EngineInputError("no queries in the file", path=name or str(path))
    return queries


def read_corpus(path: Any, *, name: str | None = None) -> dict[str, str]:
    """Document texts, JSONL one object a line: ``{"doc_id": "d1", "text": "..."}`` (``_id`` or ``id`` also name
    the document, as BEIR's corpora do; only ``text`` is read, as Evret reads only its documents' text)."""
    from .answers import _json_line, _lines, _string

    documents: dict[str, str] = {}
    for number, text, label in _lines(path, name, None):
        record = _json_line(text, label, number)
        doc_id = _one_of(record, ("doc_id", "_id", "id"), label, number)
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise EngineInputError(f'"doc_id" must be a string or an integer, not {type(doc_id).__name__}', path=label, line=number)
        documents[str(doc_id)] = _string(record.get("text", ""), '"text"', label, number)
    return documents


def _one_of(record: dict, keys: tuple[str, ...], label: str | None, number: int) -> Any:
    for key in keys:
        if key in record:
            return record[key]
    names = " or ".join(f'"{key}"' for key in keys)
    raise EngineInputError(f"missing field {names} (fields: {', '.join(sorted(record)) or 'none'})", path=label, line=number)


def rankings_of(run: Any, depth: int | None = None) -> dict[str, list[str]]:
    """An engine `Run`'s rankings, query id -> doc ids in ranking order (the first `depth` of each)."""
    table = run.to_arrow()
    docs = table.column("doc_id").to_pylist()
    offsets = run.offsets.tolist()
    return {qid: docs[a:b if depth is None else min(b, a + depth)] for qid, a, b in zip(run.query_ids, offsets[:-1], offsets[1:])}


def result_text(result: JudgeOnlyResult) -> str:
    """The table the command line prints: the uncalibrated note first, then each run's means at each cutoff."""
    judge = result.judge
    lines = [UNCALIBRATED, f"judge: {judge.get('kind', '?')} {json.dumps(judge.get('settings', {}), sort_keys=True)}",
             f"{len(result.query_ids):,} queries scored ({result.without_answers:,} without expected answers score 0); "
             f"{result.asked:,} (answer, document) questions asked, {result.matched:,} matched, "
             f"{result.could_not_judge:,} could not be judged ({COULD_NOT_JUDGE_RULE})"]
    header = f"{'measure':<20}" + "".join(f"{'@' + str(k):>9}" for k in result.ks)
    for name, run in result.runs.items():
        lines += ["", f"run {name}" + (f": {run.without_results:,} queries without results score 0" if run.without_results else ""),
                  header, "-" * len(header)]
        lines += [f"{measure:<20}" + "".join(f"{run.mean[f'{measure}@{k}']:9.4f}" for k in result.ks) for measure in MEASURES]
    return "\n".join(lines) + "\n"
