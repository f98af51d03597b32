"""The command line, weighted means, JSON/DataFrame outputs, UltraRAG keys, and trec_eval options."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.engine import evaluate, read_qrels, read_run, ultrarag_metrics

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trec_eval"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluation.engine", *args], cwd=ROOT, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_bad_input_exits_with_status_2_and_the_error_on_stderr(tmp_path):
    run = tmp_path / "bad.run"
    run.write_text("301 Q0 a 1 1.0 r\n301 Q0 b 2 1.0\n")
    result = cli(str(DATA / "qrels.test"), str(run))
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"{run}:2: expected 6 columns, found 5" in result.stderr


def test_an_unknown_measure_exits_with_status_2():
    result = cli("-m", "nope", str(DATA / "qrels.test"), str(DATA / "results.test"))
    assert result.returncode == 2 and "unknown measure" in result.stderr


def test_help_documents_flags_and_measures():
    result = cli("--help")
    for text in ("-q", "-c", "-J", "-l N", "-M N", "--json", "--save", "nDCG", "Judged", "ERR", "iprec_at_recall"):
        assert text in result.stdout


def test_json_output_and_save(tmp_path):
    target = tmp_path / "out.json"
    result = cli("--json", "--save", str(target), "-m", "map", "-m", "P.5", str(DATA / "qrels.test"),
                 str(DATA / "results.test"))
    printed = json.loads(result.stdout)
    assert printed == json.loads(target.read_text())
    assert round(printed["aggregate"]["AP"], 4) == 0.1785 and round(printed["aggregate"]["P@5"], 4) == 0.2667


def test_compare_prints_a_table_and_json():
    args = ["compare", str(DATA / "qrels.test"), str(DATA / "results.test"), str(DATA / "results.trunc"),
            "-m", "map", "-m", "P.10", "--resamples", "200"]
    table = cli(*args)
    assert table.returncode == 0, table.stderr
    assert "AP" in table.stdout and "P@10" in table.stdout
    assert "3 queries scored: those of the 3 the runs answer that have labels (the qrels label 3)" in table.stdout
    assert "Warning" not in table.stdout
    # 3 queries, 2 of them differ: the sign-flip test's smallest p is 2/2^2, so "?" (not enough evidence), not blank.
    marks = {line.split()[0]: line.split()[-2][-1] for line in table.stdout.splitlines() if line.startswith(("AP ", "P@10 "))}
    assert marks == {"AP": "?", "P@10": "?"}  # the mark follows p_holm, before W/T/L
    assert ("? over 3 queries, 2 of which differ: the smallest p this test can give is 0.5000 (1.0000 after Holm's correction across 2 tests)"
            in " ".join(table.stdout.split()))
    rows = json.loads(cli(*args, "--json").stdout)
    assert [row["measure"] for row in rows] == ["AP", "P@10"]
    assert rows[0]["n_queries"] == 3 and round(rows[0]["A_mean"], 4) == 0.1785


def test_compare_warns_when_fewer_than_half_the_queries_the_runs_answer_have_labels(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    (tmp_path / "a.run").write_text("q1 Q0 a 1 2 a\nq2 Q0 b 1 2 a\nq3 Q0 c 1 2 a\n")
    (tmp_path / "b.run").write_text("q1 Q0 b 1 2 b\nq2 Q0 a 1 2 b\n")
    table = cli("compare", str(tmp_path / "qrels"), str(tmp_path / "a.run"), str(tmp_path / "b.run"), "-m", "P.1", "--resamples", "50")
    assert table.returncode == 0, table.stderr
    assert "1 query scored: those of the 3 the runs answer that have labels (the qrels label 1)" in table.stdout
    assert "Warning: only 1 of the 3 queries the runs answer have labels" in table.stdout


QRELS = b"q1 0 a 1\nq1 0 b 0\nq1 0 c 1\nq2 0 x 1\nq3 0 y 1\n"
RUN = b"q1 Q0 a 1 3 r\nq1 Q0 u 2 2 r\nq1 Q0 c 3 1 r\nq2 Q0 z 1 1 r\nq9 Q0 y 1 1 r\n"


def test_queries_missing_from_the_run_are_left_out_unless_all_queries():
    qrels, run = read_qrels(QRELS), read_run(RUN)
    assert evaluate(qrels, run, ["P@1"]).query_ids == ["q1", "q2"]
    complete = evaluate(qrels, run, ["P@1", "NumQ"], all_queries=True)
    assert complete.query_ids == ["q1", "q2", "q3"]
    assert complete.aggregate == {"P@1": pytest.approx(1 / 3), "NumQ": 3}


def test_judged_only_drops_unjudged_documents_before_ranking():
    qrels, run = read_qrels(QRELS), read_run(RUN)
    assert evaluate(qrels, run, ["P@2"]).per_query["P@2"]["q1"] == 0.5
    assert evaluate(qrels, run, ["P@2"], judged_only=True).per_query["P@2"]["q1"] == 1.0


def test_max_docs_keeps_the_top_m():
    qrels, run = read_qrels(QRELS), read_run(RUN)
    assert evaluate(qrels, run, ["NumRet", "R@10"], max_docs=2).per_query["R@10"]["q1"] == 0.5


def test_weighted_means_use_one_weight_per_query():
    qrels, run = read_qrels(QRELS), read_run(RUN)
    result = evaluate(qrels, run, ["P@1", "NumRet"], weights={"q1": 3.0, "q2": 1.0})
    assert result.aggregate["P@1"] == pytest.approx(0.75)
    assert result.aggregate["NumRet"] == 4  # counts stay sums
    with pytest.raises(ValueError, match="no weight"):
        evaluate(qrels, run, ["P@1"], weights={"q1": 1.0})


def test_aggregates_over_a_subset_or_with_weights_match_a_fresh_evaluation():
    qrels, run = read_qrels(QRELS), read_run(RUN)
    result = evaluate(qrels, run, ["P@1", "AP", "NumRet", "GMAP"])
    assert result.aggregate_over() == result.aggregate
    only_q1 = evaluate(read_qrels(b"q1 0 a 1\nq1 0 b 0\nq1 0 c 1\n"), run, ["P@1", "AP", "NumRet", "GMAP"])
    assert result.aggregate_over(["q1"]) == pytest.approx(only_q1.aggregate)
    weighted = evaluate(qrels, run, ["P@1", "AP", "NumRet", "GMAP"], weights={"q1": 3.0, "q2": 1.0})
    assert result.aggregate_over(weights={"q1": 3.0, "q2": 1.0}) == pytest.approx(weighted.aggregate)
    with pytest.raises(ValueError, match="no weight"):
        result.aggregate_over(weights={"q1": 1.0})


def test_the_trec_text_has_integer_counts_and_a_runid_row():
    text = evaluate(read_qrels(QRELS), read_run(RUN), ["num_ret", "P.1"]).to_trec_text(per_query=True)
    assert text.splitlines() == [
        "num_ret               \tq1\t3", "P_1                   \tq1\t1.0000",
        "num_ret               \tq2\t1", "P_1                   \tq2\t0.0000",
        "runid                 \tall\tr", "num_ret               \tall\t4", "P_1                   \tall\t0.5000"]


def test_to_json_and_to_dataframe_hold_per_query_values():
    result = evaluate(read_qrels(QRELS), read_run(RUN), ["P@1"])
    assert result.to_json()["per_query"] == {"P@1": {"q1": 1.0, "q2": 0.0}}
    assert result.to_dataframe()["P@1"].to_dict() == {"q1": 1.0, "q2": 0.0}


def test_ultrarag_metrics_have_its_keys_and_can_be_saved(tmp_path):
    target = tmp_path / "metrics.json"
    metrics = ultrarag_metrics(read_qrels(QRELS), read_run(RUN), ks=(1, 5), save_path=target)
    assert list(metrics) == ["mrr", "map", "recall@1", "recall@5", "ndcg@1", "ndcg@5", "P@1", "P@5"]
    assert json.loads(target.read_text()) == metrics
    assert metrics["mrr"] == pytest.approx(0.5)


def test_pytrec_eval_reads_scores_as_float32_so_near_ties_can_rank_differently():
    """Documented difference: scores 1.00000001 and 1.0 differ as doubles (trec_eval 10, this engine)
    but are equal in float32, so pytrec_eval breaks the 'tie' by doc id instead."""
    import pytrec_eval

    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 1.00000001, "b": 1.0}}
    ours = evaluate(read_qrels(qrels), read_run(run), ["RR"]).aggregate["RR"]
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["q"]["recip_rank"]
    assert ours == 1.0
    assert theirs == 0.5
