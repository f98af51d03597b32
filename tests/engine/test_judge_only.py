"""Judge-only evaluation (Evret's way) against Evret's own evaluator: tests/data/judges/evret_reference.json holds
evret 0.0.3's numbers on worked cases (make_evret_reference.py makes it). No database."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.engine.cli import main
from evaluation.engine.judge_only import (UNCALIBRATED, MatchQuestion, QueryAnswers, evaluate_judge_only, judge_matcher,
                                          read_queries)
from judgments.judges import make_judge

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "judges" / "evret_reference.json").read_text())
ROOT = Path(__file__).parents[2]


def _table_matcher(table: dict, asked: list | None = None):
    matches = {tuple(pair) for pair in table["matches"]}
    unjudged = {tuple(pair) for pair in table.get("unjudged", [])}

    def matcher(questions: list[MatchQuestion]) -> list[bool | None]:
        if asked is not None:
            asked.append(list(questions))
        return [None if (q.answer, q.document) in unjudged else (q.answer, q.document) in matches for q in questions]

    return matcher


def _evaluate(case: dict, matcher=None):
    queries = {q["query_id"]: QueryAnswers(q["query"], tuple(q["answers"])) for q in case["queries"]}
    if matcher is None:
        matcher = (_table_matcher(case["table"]) if "table" in case
                   else judge_matcher(make_judge("token_overlap", case["token_overlap"])))
    return evaluate_judge_only(queries, {"run": case["runs"]}, case["documents"], matcher, ks=case["ks"])


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=[c["name"] for c in REFERENCE["cases"]])
def test_it_gives_evrets_numbers(case):
    result = _evaluate(case)
    run = result.runs["run"]
    assert run.mean == pytest.approx(case["evret"]["mean"], abs=1e-15)
    for qid, expected in case["evret"]["per_query"].items():
        assert {m: values[qid] for m, values in run.per_query.items()} == pytest.approx(expected, abs=1e-15)


def test_the_reference_covers_what_the_brief_asks():
    names = " ".join(case["name"] for case in REFERENCE["cases"])
    for topic in ("matched once", "several answers", "k beyond the ranking", "no results", "could not judge"):
        assert topic in names
    assert REFERENCE["evret_version"] == "0.0.3"


def _case(fragment: str) -> dict:
    return next(case for case in REFERENCE["cases"] if fragment in case["name"])


def test_a_document_takes_the_first_free_answer_it_matches():
    result = _evaluate(_case("several answers"))
    # d1 matches all three and takes alpha; d2 matches alpha and beta and takes beta; d3 matches only alpha: taken.
    assert result.runs["run"].taken["q1"] == [0, 1, None]
    result = _evaluate(_case("matched once"))
    assert result.runs["run"].taken["q1"] == [0, None, 1, None]


def test_it_asks_every_question_once_in_one_batch_before_assigning():
    case = _case("several answers")
    asked = []
    queries = {q["query_id"]: QueryAnswers(q["query"], tuple(q["answers"])) for q in case["queries"]}
    result = evaluate_judge_only(queries, {"a": case["runs"], "b": case["runs"]}, case["documents"],
                                 _table_matcher(case["table"], asked), ks=(2,))
    assert len(asked) == 1
    # top max(k) = 2 documents x 3 answers x 2 candidates (id and text), asked once for both runs
    assert len(asked[0]) == len(set(asked[0])) == 12 == result.asked
    assert result.runs["a"].mean == result.runs["b"].mean


def test_it_counts_what_the_judge_could_not_judge_and_says_how_it_was_treated():
    result = _evaluate(_case("could not judge"))
    assert result.could_not_judge == 3 and result.runs["run"].could_not_judge == 3
    document = result.to_json()
    assert document["note"] == UNCALIBRATED
    assert document["questions"]["could_not_judge"] == 3
    assert "no match" in document["questions"]["rule"]


def test_a_query_without_results_or_answers_scores_zero_and_counts_in_the_mean():
    result = _evaluate(_case("no results"))
    run = result.runs["run"]
    assert run.without_results == 2
    assert run.per_query["recall@10"] == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert run.mean["recall@10"] == pytest.approx(0.5 / 3)
    assert run.per_query["precision@10"]["q1"] == 0.1  # k, not the ranking's length, divides


def test_it_refuses_bad_cutoffs_and_a_judge_that_answers_short():
    case = _case("several answers")
    with pytest.raises(ValueError, match="positive whole number"):
        _evaluate({**case, "ks": [0]})
    with pytest.raises(ValueError, match="answered 1 questions of"):
        _evaluate(case, matcher=lambda questions: [True])


# ------------------------------------------------------------------------------------------ command line


@pytest.fixture
def files(tmp_path):
    case = _case("low token minimum")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in case["queries"]))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in case["documents"].items()))
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{qid} Q0 {doc} {rank} {100 - rank} sys\n" for qid, docs in case["runs"].items()
                           for rank, doc in enumerate(dict.fromkeys(docs), start=1)))
    return case, queries, corpus, run


def test_the_command_prints_evrets_numbers_marked_uncalibrated(files, capsys):
    case, queries, corpus, run = files
    assert main(["judge-only", "--queries", str(queries), "--run", str(run), "--corpus", str(corpus), "--format", "json",
                 "--judge-settings", json.dumps(case["token_overlap"])]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "judge-only (uncalibrated)" and document["note"] == UNCALIBRATED
    assert document["judge"]["kind"] == "token_overlap" and document["judge"]["settings"]["min_tokens"] == 3
    # The file run lists each document once per query (TREC), so its scores are those of the deduplicated rankings.
    deduplicated = {**case, "runs": {q: list(dict.fromkeys(docs)) for q, docs in case["runs"].items()}}
    assert document["runs"]["sys"]["mean"] == pytest.approx(_evaluate(deduplicated).runs["run"].mean, abs=1e-15)

    assert main(["judge-only", "--queries", str(queries), "--run", str(run), "--corpus", str(corpus), "--k", "1,5",
                 "--judge-settings", json.dumps(case["token_overlap"])]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0] == UNCALIBRATED
    assert "3 queries scored" in table and "@1" in table and "@5" in table and "average_precision" in table


def test_the_command_names_the_file_and_line_of_bad_input(files, capsys):
    _case_, queries, corpus, run = files
    queries.write_text('{"query_id": "q1", "query": "x", "answers": ["a"]}\n{"query_id": "q2", "answers": ["b"]}\n')
    assert main(["judge-only", "--queries", str(queries), "--run", str(run), "--corpus", str(corpus)]) == 2
    assert f'{queries}:2: missing field "query" or "text" or "query_text"' in capsys.readouterr().err
    assert main(["judge-only", "--queries", str(queries), "--run", str(run), "--corpus", str(corpus), "--k", "a"]) == 2
    assert "--k must be whole numbers" in capsys.readouterr().err
    assert main(["judge-only", "--queries", str(queries), "--run", str(run), "--corpus", str(corpus),
                 "--judge-settings", '{"overlap_ratio": 7}']) == 2
    assert "overlap_ratio" in capsys.readouterr().err


def test_it_reads_evrets_spelling_of_queries(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "q1", "query_text": "What is RAG?", "expected_answers": ["RAG combines"]}\n')
    assert read_queries(path) == {"q1": QueryAnswers("What is RAG?", ("RAG combines",))}


def test_the_module_entry_point_runs_it(files):
    case, queries, corpus, run = files
    done = subprocess.run([sys.executable, "-m", "evaluation.engine", "judge-only", "--queries", str(queries), "--run", str(run),
                           "--corpus", str(corpus)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(UNCALIBRATED)


def test_the_seeds_example_with_the_semantic_judge_gives_the_seeds_numbers():
    """Seed 000's worked example: doc_123 matches the first answer (cosine 0.89; the second only 0.46, under 0.75) and
    doc_456 neither: Recall@2 = Precision@2 = 0.5 and HitRate@2 = 1, the seed's own figures."""
    from judgments.judges import availability

    if not availability("semantic").available:
        pytest.skip("the semantic judge's packages (requirements-judges.txt) are not installed")
    queries = {"q1": QueryAnswers("What is RAG?", ("RAG combines retrieval with generation for better accuracy",
                                                    "Retrieval-augmented generation improves LLM responses"))}
    documents = {"doc_123": "RAG is a technique that combines retrieval with generation",
                 "doc_456": "Vector databases store embeddings"}
    result = evaluate_judge_only(queries, {"run": {"q1": ["doc_123", "doc_456"]}}, documents,
                                 judge_matcher(make_judge("semantic")), ks=(2,))
    mean = result.runs["run"].mean
    assert (mean["recall@2"], mean["precision@2"], mean["hit_rate@2"]) == (0.5, 0.5, 1.0)
    assert result.runs["run"].taken["q1"] == [0, None]


def test_an_llm_judge_that_cannot_read_a_reply_counts_could_not_judge_and_no_match():
    from judgments.judges import LLMJudge
    from judgments.lib.outbound import Policy
    from tests.judges.fake_llm import FakeLLM, Reply

    def answer(request):
        if "the unsure text" in request.user:
            return Reply.text("I cannot tell.")
        return Reply.text("Final grade: 1" if "the matching text" in request.user else "Final grade: 0")

    queries = {"q1": QueryAnswers("what is rag", ("rag combines retrieval and generation",))}
    documents = {"d1": "the unsure text", "d2": "the matching text"}
    with FakeLLM() as server:
        server.answer = answer
        judge = LLMJudge({"base_url": server.base_url, "model": "fake-model", "backoff": 0.01, "max_wait": 2.0},
                         api_key="sk-test-0123456789abcdef", policy=Policy.of(networks=["127.0.0.0/8"]))
        result = evaluate_judge_only(queries, {"run": {"q1": ["d1", "d2"]}}, documents, judge_matcher(judge), ks=(1, 2))
    assert result.could_not_judge == 1 and result.matched == 1 and result.asked == 4  # ids and texts of two documents
    assert result.runs["run"].taken["q1"] == [None, 0]
    assert result.runs["run"].mean["mrr@2"] == 0.5 and result.runs["run"].mean["recall@1"] == 0.0
