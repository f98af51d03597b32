"""Measures whose definitions differ between trec_eval and its peers, checked against the peers themselves:
Judged@k against ir_measures (hypothesis, as pytrec_eval for the trec_eval measures), ERR against gdeval
and a worked example, the unjudged share against trec_eval's unj, and UltraRAG's JSON without overlap."""

import json
import math
import shutil
import subprocess
from pathlib import Path

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine import EngineInputError, evaluate, read_qrels, read_run, ultrarag_metrics

docs = st.sampled_from([f"d{i}" for i in range(14)])
queries = st.sampled_from(["1", "2", "3", "10"])
qrels_strategy = st.dictionaries(queries, st.dictionaries(docs, st.integers(-1, 4), min_size=1, max_size=10),
                                 min_size=1, max_size=4)


def distinct_scores(max_size: int):
    """A ranking without score ties: ir_measures' judged provider breaks ties by docno ascending, the engine
    (like trec_eval, gdeval and ir_measures' pytrec_eval measures) by docno descending."""
    return st.lists(docs, unique=True, max_size=max_size).map(
        lambda ranked: {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)})


run_strategy = st.dictionaries(queries, distinct_scores(12), max_size=4)


# ------------------------------------------------------------------------------------------------ Judged


@settings(max_examples=150, deadline=None)
@given(qrels=qrels_strategy, run=run_strategy)
def test_judged_equals_ir_measures_per_query_with_and_without_a_cutoff(qrels, run):
    run = {q: ranking for q, ranking in run.items() if ranking}
    wanted = [ir_measures.Judged @ 1, ir_measures.Judged @ 5, ir_measures.Judged @ 20, ir_measures.Judged]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.judged.iter_calc(wanted, qrels, run)}
    # ir_measures scores every qrels query, those missing from the run as 0: trec_eval's -c.
    ours = evaluate(read_qrels(qrels), read_run(run) if run else read_run([]), ["Judged@1", "Judged@5", "Judged@20", "Judged"],
                    all_queries=True).per_query
    assert {qid for qid, _ in theirs} == set(ours["Judged"])
    for (qid, measure), value in theirs.items():
        assert math.isclose(ours[measure][qid], value, rel_tol=1e-12), (qid, measure)


def test_judged_divides_by_the_documents_retrieved_when_fewer_than_k():
    qrels = read_qrels({"q": {"a": 1, "b": 0}})
    run = read_run({"q": {"a": 3.0, "x": 2.0, "b": 1.0}})  # 3 retrieved, 2 judged
    result = evaluate(qrels, run, ["Judged@2", "Judged@3", "Judged@100", "Judged"]).aggregate
    assert result == {"Judged@2": 0.5, "Judged@3": pytest.approx(2 / 3), "Judged@100": pytest.approx(2 / 3),
                      "Judged": pytest.approx(2 / 3)}


def test_on_score_ties_across_rank_k_judged_counts_the_documents_trec_eval_ranks_first():
    """The documented difference: ir_measures' judged provider orders ties by docno ascending, so its top 1
    of {a, b} tied is a; trec_eval's order (and this engine's, for every measure) puts b first."""
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0}}
    [theirs] = ir_measures.judged.iter_calc([ir_measures.Judged @ 1], qrels, run)
    ours = evaluate(read_qrels(qrels), read_run(run), ["Judged@1", "P@1"]).aggregate
    assert theirs.value == 1.0
    assert ours["Judged@1"] == 0.0 and ours["P@1"] == 0.0  # b, unjudged, is at rank 1 for P@1 too


# ------------------------------------------------------------------------------------- unjudged share


def fifty_deep() -> tuple:
    """A 50-deep ranking whose top 15 are judged: 35 of its 50 documents have no label."""
    qrels = read_qrels({"q": {f"d{i:02d}": i % 2 for i in range(15)}})
    run = read_run({"q": {f"d{i:02d}": 100.0 - i for i in range(50)}})
    return qrels, run


def test_the_unjudged_share_of_a_50_deep_run_is_the_same_at_50_and_100():
    qrels, run = fifty_deep()
    result = evaluate(qrels, run, ["UnjudgedShare@10", "UnjudgedShare@50", "UnjudgedShare@100", "UnjudgedShare",
                                   "Unjudged@50", "Unjudged@100", "Judged@100"]).aggregate
    assert result["UnjudgedShare@10"] == 0.0
    assert result["UnjudgedShare@50"] == result["UnjudgedShare@100"] == result["UnjudgedShare"] == pytest.approx(0.7)
    # trec_eval's unj divides by k: the same 35 unjudged documents read as 0.7 at 50 and 0.35 at 100.
    assert result["Unjudged@50"] == pytest.approx(0.7) and result["Unjudged@100"] == pytest.approx(0.35)
    assert result["Judged@100"] == pytest.approx(1 - result["UnjudgedShare@100"])


def test_the_unjudged_share_counts_negative_grades_as_unjudged_like_unj_and_is_0_for_an_empty_ranking():
    qrels = read_qrels({"q": {"a": -1, "b": 1}, "empty": {"c": 1}})
    run = read_run({"q": {"a": 2.0, "b": 1.0}})
    result = evaluate(qrels, run, ["UnjudgedShare@10", "Unjudged@10", "Judged@10"], all_queries=True).per_query
    assert result["UnjudgedShare@10"] == {"empty": 0.0, "q": 0.5}  # nothing ranked, nothing unjudged
    assert result["Unjudged@10"]["q"] == pytest.approx(0.1)
    assert result["Judged@10"]["q"] == 1.0  # a is in the qrels, which is all Judged asks


@settings(max_examples=100, deadline=None)
@given(qrels=qrels_strategy, run=run_strategy, k=st.sampled_from([1, 3, 5, 20]))
def test_the_unjudged_share_is_unj_scaled_from_k_to_the_documents_ranked(qrels, run, k):
    run = {q: ranking for q, ranking in run.items() if ranking}
    if not any(q in qrels for q in run):
        return
    ours = evaluate(read_qrels(qrels), read_run(run), [f"UnjudgedShare@{k}", f"Unjudged@{k}"]).per_query
    for qid, share in ours[f"UnjudgedShare@{k}"].items():
        assert share == pytest.approx(ours[f"Unjudged@{k}"][qid] * k / min(k, len(run[qid])))


# ------------------------------------------------------------------------------------------------- ERR


def test_err_takes_the_top_grade_from_the_scale_when_given():
    """Worked by hand: grades 2, 1, 0 ranked in that order on a 0-3 scale where nobody used 3."""
    qrels = read_qrels({"q": {"a": 2, "b": 1, "c": 0}})
    run = read_run({"q": {"a": 3.0, "b": 2.0, "c": 1.0}})
    result = evaluate(qrels, run, ["ERR(max=3)@3", "ERR@3", "ERR(max=4)@3", "ERR(max=3)@1"]).aggregate
    # R = (2^g - 1) / 2^max; ERR = R_1 + (1 - R_1) R_2 / 2 + ...
    assert result["ERR(max=3)@3"] == pytest.approx(3 / 8 + (1 - 3 / 8) * (1 / 8) / 2)  # 0.4140625
    assert result["ERR@3"] == pytest.approx(3 / 4 + (1 - 3 / 4) * (1 / 4) / 2)  # top grade in the qrels: 2
    assert result["ERR(max=4)@3"] == pytest.approx(3 / 16 + (1 - 3 / 16) * (1 / 16) / 2)  # gdeval's 2^4
    assert result["ERR(max=3)@1"] == pytest.approx(3 / 8)


def test_a_grade_above_errs_max_is_refused_naming_the_qrels():
    qrels = read_qrels(b"q 0 a 3\n", name="round.qrels")
    with pytest.raises(EngineInputError, match=r"round.qrels: grade 3 is above the top grade of ERR\(max=2\)@10"):
        evaluate(qrels, read_run({"q": {"a": 1.0}}), ["ERR(max=2)@10"])


def test_err_on_a_long_run_equals_a_direct_product_within_each_query():
    """The chance of reaching a rank is a product over that query's ranks alone: a running sum of logs over the
    whole run lost 2.6e-13 at 10,000 rows and 1.3e-10 at 2 million. Checked against the textbook loop in plain
    floats, query by query, on 20,000 queries x 20 ranks."""
    import numpy as np

    rng = np.random.default_rng(7)
    n_queries, depth = 20_000, 20
    grades = rng.integers(0, 4, size=(n_queries, depth))
    qrels = read_qrels({f"q{q}": {f"d{r}": int(grades[q, r]) for r in range(depth)} for q in range(n_queries)})
    run = read_run({f"q{q}": {f"d{r}": float(depth - r) for r in range(depth)} for q in range(n_queries)})
    ours = evaluate(qrels, run, ["ERR(max=3)@20"]).per_query["ERR(max=3)@20"]
    worst = 0.0
    for q in range(n_queries):
        reach, expected = 1.0, 0.0
        for rank, grade in enumerate(grades[q].tolist(), start=1):
            stop = (2.0 ** grade - 1.0) / 8.0
            expected += reach * stop / rank
            reach *= 1.0 - stop
        worst = max(worst, abs(ours[f"q{q}"] - expected))
    assert worst < 1e-15


GDEVAL = Path(ir_measures.__file__).parent / "bin" / "gdeval.pl"


@pytest.mark.skipif(shutil.which("perl") is None, reason="gdeval.pl needs perl")
@settings(max_examples=40, deadline=None)
@given(qrels=qrels_strategy, run=st.dictionaries(queries, st.dictionaries(docs, st.integers(0, 6).map(lambda k: k / 4),
                                                                          min_size=1, max_size=12), max_size=4),
       k=st.sampled_from([1, 5, 20]))
def test_err_with_max_4_equals_gdeval_per_query(tmp_path_factory, qrels, run, k):
    """gdeval.pl (as ir_measures ships it) divides by 2^4 and breaks score ties by docno descending."""
    if not run:
        return
    folder = tmp_path_factory.mktemp("gdeval")
    (folder / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, grades in qrels.items() for d, g in grades.items()))
    (folder / "run").write_text("".join(f"{q} Q0 {d} {i + 1} {s} tag\n" for q, scores in run.items()
                                        for i, (d, s) in enumerate(scores.items())))
    output = subprocess.run(["perl", str(GDEVAL), str(folder / "qrels"), str(folder / "run"), str(k)],
                            capture_output=True, text=True, check=True).stdout
    theirs = {line.split(",")[1]: float(line.split(",")[3]) for line in output.splitlines()[1:]}
    ours = evaluate(read_qrels(folder / "qrels"), read_run(folder / "run"), [f"ERR(max=4)@{k}"]).per_query[f"ERR(max=4)@{k}"]
    for qid, value in theirs.items():  # gdeval reports the queries with a positive grade, to 5 decimals
        assert ours[qid] == pytest.approx(value, abs=5e-6 + 1e-12), qid


# --------------------------------------------------------------------------------------------- UltraRAG


def test_ultrarag_metrics_without_a_shared_query_write_0_as_strict_json(tmp_path):
    target = tmp_path / "metrics.json"
    metrics = ultrarag_metrics(read_qrels({"q1": {"a": 1}}), read_run({"q2": {"a": 1.0}}), ks=(1, 10), save_path=target)

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    saved = json.loads(target.read_text(), parse_constant=refuse)
    assert saved == metrics == {"mrr": 0.0, "map": 0.0, "recall@1": 0.0, "recall@10": 0.0, "ndcg@1": 0.0,
                                "ndcg@10": 0.0, "P@1": 0.0, "P@10": 0.0}
