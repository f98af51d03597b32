"""Every value in trec_eval 10.0's own expected outputs that our measure set covers, byte for byte."""

import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.engine import evaluate, read_qrels, read_run

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
ROOT = Path(__file__).resolve().parents[2]
MEAS_PARAMS = ["-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
               "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75", "-mndcg.1=3,2=9,4=4.5",
               "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20"]

CASES = {
    "out.test": ([], "qrels.test", "results.test"),
    "out.test (qrels with comments)": ([], "qrels.test.with-comments", "results.test"),
    "out.comment.test": ([], "qrels.comment.test", "results.comment.test"),
    "out.test.a": (["-m", "all_trec"], "qrels.test", "results.test"),
    "out.test.aq": (["-m", "all_trec", "-q"], "qrels.test", "results.test"),
    "out.test.aqc": (["-m", "all_trec", "-q", "-c"], "qrels.test", "results.trunc"),
    "out.test.aqcM": (["-m", "all_trec", "-q", "-c", "-M100"], "qrels.test", "results.trunc"),
    "out.test.aql": (["-m", "all_trec", "-mrelstring.20", "-q", "-l2"], "qrels.rel_level", "results.test"),
    "out.test.meas_params": (["-q", *MEAS_PARAMS], "qrels.test", "results.test"),
}


def expected_lines(case: str) -> list[str]:
    return (DATA / case.split(" ")[0]).read_text().splitlines()


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluation.engine", *args], cwd=ROOT, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("case", CASES)
def test_the_cli_prints_trec_eval_output_byte_for_byte(case):
    flags, qrels, run = CASES[case]
    result = run_cli([*flags, str(DATA / qrels), str(DATA / run)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected_lines(case)


def test_the_api_reproduces_the_all_trec_per_query_output():
    evaluation = evaluate(read_qrels(DATA / "qrels.test"), read_run(DATA / "results.trunc"), "all_trec",
                          all_queries=True, max_docs=100)
    from evaluation.engine.cli import _trec_sorted

    evaluation.measure_objects = _trec_sorted(evaluation.measure_objects)
    text = evaluation.to_trec_text(per_query=True, run_id="STANDARD")
    assert text.splitlines() == expected_lines("out.test.aqcM")


def test_the_api_reproduces_the_graded_output_at_relevance_level_two():
    evaluation = evaluate(DATA / "qrels.rel_level", DATA / "results.test", ["map", "ndcg", "P.10", "infAP", "bpref"],
                          relevance_level=2)
    expected = {line.split("\t")[0].strip(): line.split("\t")[2]
                for line in expected_lines("out.test.aql") if "\tall\t" in line}
    got = {m.trec_name: f"{evaluation.aggregate[m.canonical]:6.4f}" for m in evaluation.measure_objects}
    assert got == {name: expected[name] for name in got}


def test_with_c_the_summary_num_rel_counts_every_qrels_line_graded_above_zero_whatever_l_says():
    """trec_eval 10.0's te_calc_avg_num_rel: under -c the summary goes back to the qrels and counts each line
    graded above 0 (462 + 14 + 77 + 6 = 559 in qrels.rel_level), not the sum of the per-query lines at -l 2."""
    qrels = DATA / "qrels.rel_level"
    above_zero = sum(1 for line in qrels.read_text().splitlines() if line.split() and int(line.split()[3]) > 0)
    assert above_zero == 559
    result = run_cli(["-c", "-q", "-l2", "-m", "num_rel", str(qrels), str(DATA / "results.trunc")])
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    per_query = sum(int(value) for name, qid, value in lines if qid != "all")
    summary = next(int(value) for name, qid, value in lines if qid == "all")
    assert summary == above_zero and per_query < above_zero
    without_c = run_cli(["-q", "-l2", "-m", "num_rel", str(qrels), str(DATA / "results.trunc")]).stdout.splitlines()
    assert without_c[-1].split("\t")[2] == str(sum(int(line.split("\t")[2]) for line in without_c[:-1]))
