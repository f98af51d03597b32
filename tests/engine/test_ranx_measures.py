"""F1, DCG, DCG_burges and nDCG_burges against ranx 0.3.21, which defines them, and ir_measures' nDCG(dcg='exp-log2'),
on the stored outputs of tests/data/ranx/make_ranx_reference.py (ranx needs numba, too heavy for the tests), against
gdeval.pl live, and on worked examples."""

import json
import math
import shutil
import subprocess
from pathlib import Path

import ir_measures
import pytest

from evaluation.engine import EngineInputError, evaluate, parse_measure, read_qrels, read_run
from evaluation.engine.cli import main as cli_main

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "ranx" / "ranx_reference.json").read_text())["cases"]


def evaluate_case(case: dict, measures: list[str], level: int):
    return evaluate(read_qrels(case["qrels"]), read_run(case["run"]), measures, relevance_level=level,
                    judged_only=case["judged_only"], max_docs=case["max_docs"], all_queries=case["all_queries"])


def assert_same_per_query_and_mean(ours, theirs: dict, label: str):
    for measure, per_query in theirs.items():
        canonical = parse_measure(measure).canonical
        assert set(ours.per_query[canonical]) == set(per_query), (label, measure)
        for qid, value in per_query.items():
            assert ours.per_query[canonical][qid] == pytest.approx(value, rel=1e-9, abs=1e-12), (label, measure, qid)
        assert ours.aggregate[canonical] == pytest.approx(math.fsum(per_query.values()) / len(per_query), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("index", range(len(REFERENCE)))
def test_each_measure_equals_ranx_per_query_and_in_the_mean_with_the_engine_options(index):
    case = REFERENCE[index]
    ours = evaluate_case(case, list(case["ranx"]), case["level"])
    assert_same_per_query_and_mean(ours, case["ranx"], f"case {index}")


@pytest.mark.parametrize("index", range(len(REFERENCE)))
def test_a_measure_level_rel_equals_ranx_with_that_rel_lvl(index):
    case = REFERENCE[index]
    level = case["level"]
    renamed = {measure.replace("@", f"(rel={level})@") if "@" in measure else f"{measure}(rel={level})": values
               for measure, values in case["ranx"].items()}
    ours = evaluate_case(case, list(renamed), 1)
    assert_same_per_query_and_mean(ours, renamed, f"case {index}")


def test_ir_measures_exp_log2_ndcg_names_the_same_values():
    cases = [case for case in REFERENCE if "ir_measures" in case]
    assert len(cases) > 40  # 53 cases, 710 values
    for case in cases:
        ours = evaluate_case(case, list(case["ir_measures"]), 1)
        for measure, per_query in case["ir_measures"].items():
            assert parse_measure(measure).name == "nDCG_burges"
            for qid, value in per_query.items():
                assert ours.per_query[parse_measure(measure).canonical][qid] == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_the_reference_covers_every_option_and_the_zero_cases():
    assert {case["level"] for case in REFERENCE} == {1, 2, 3}
    for option in ("judged_only", "all_queries"):
        assert any(case[option] for case in REFERENCE) and not all(case[option] for case in REFERENCE)
    assert any(case["max_docs"] for case in REFERENCE)
    f1 = [value for case in REFERENCE for value in case["ranx"]["F1@5"].values()]
    assert 0.0 in f1 and max(f1) > 0.5


GDEVAL = Path(ir_measures.__file__).parent / "bin" / "gdeval.pl"


@pytest.mark.skipif(shutil.which("perl") is None, reason="gdeval.pl needs perl")
@pytest.mark.parametrize("k", [1, 5, 20])
def test_ndcg_burges_equals_gdeval_per_query(tmp_path, k):
    """gdeval.pl (TREC Web track, shipped with ir_measures) computes nDCG@k with gain 2^g - 1; it prints 5 decimals
    and only the queries with a relevant document."""
    cases = [case for case in REFERENCE if not case["judged_only"] and case["max_docs"] is None][:20]
    for n, case in enumerate(cases):
        qrels, run = tmp_path / f"qrels{n}", tmp_path / f"run{n}"
        # gdeval reads numeric topics only: q3 is written as 3.
        qrels.write_text("".join(f"{q[1:]} 0 {d} {g}\n" for q, grades in case["qrels"].items() for d, g in grades.items()))
        run.write_text("".join(f"{q[1:]} Q0 {d} {i + 1} {s} tag\n" for q, scores in case["run"].items()
                               for i, (d, s) in enumerate(scores.items())))
        output = subprocess.run(["perl", str(GDEVAL), str(qrels), str(run), str(k)],
                                capture_output=True, text=True, check=True).stdout
        theirs = {line.split(",")[1]: float(line.split(",")[2]) for line in output.splitlines()[1:]}
        ours = evaluate(read_qrels(qrels), read_run(run), [f"nDCG_burges@{k}"], all_queries=True).per_query[f"nDCG_burges@{k}"]
        assert theirs
        for qid, value in theirs.items():
            if qid != "amean":
                assert ours[qid] == pytest.approx(value, abs=5e-6 + 1e-12), (n, qid)


# --------------------------------------------------------------------------------------------- worked examples

QRELS = {"q": {"a": 3, "b": 0, "c": 1, "d": 2, "e": -1}}
RUN = {"q": {"c": 5.0, "x": 4.0, "a": 3.0, "e": 2.0, "b": 1.0}}  # c(1) x(-) a(3) e(unjudged) b(0); d(2) missing


def test_worked_example_by_hand():
    result = evaluate(read_qrels(QRELS), read_run(RUN), ["F1@3", "F1", "DCG@3", "DCG", "DCG_burges@3",
                                                         "nDCG_burges@3", "nDCG_burges", "F1(rel=2)@3"]).aggregate
    # Top 3 holds c and a: 2 of the 3 relevant (a, c, d). P@3 = 2/3, R@3 = 2/3.
    assert result["F1@3"] == pytest.approx(2 / 3)
    assert result["F1"] == pytest.approx(2 * (2 / 5) * (2 / 3) / (2 / 5 + 2 / 3))  # 5 retrieved: P = 2/5
    assert result["DCG@3"] == pytest.approx(1 / 1 + 3 / 2)  # log2(2) = 1, log2(4) = 2
    assert result["DCG"] == pytest.approx(1 + 3 / 2)  # e and b gain nothing
    assert result["DCG_burges@3"] == pytest.approx(1 / 1 + 7 / 2)
    ideal = 7 / 1 + 3 / math.log2(3) + 1 / 2  # a(3), d(2), c(1)
    assert result["nDCG_burges@3"] == pytest.approx(4.5 / ideal)
    assert result["nDCG_burges"] == pytest.approx(4.5 / ideal)
    assert result["F1(rel=2)@3"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))  # relevant: a, d


def test_the_relevance_level_takes_gain_from_grades_below_it():
    ours = evaluate(read_qrels(QRELS), read_run(RUN), ["DCG@3", "nDCG_burges@3"], relevance_level=2).aggregate
    assert ours["DCG@3"] == pytest.approx(3 / 2)  # c (grade 1) no longer counts
    assert ours["nDCG_burges@3"] == pytest.approx((7 / 2) / (7 + 3 / math.log2(3)))


def test_judged_only_max_docs_and_all_queries_apply():
    qrels = read_qrels({**QRELS, "none": {"z": 0}, "absent": {"y": 2}})
    run = read_run(RUN)
    judged = evaluate(qrels, run, ["DCG@3", "F1"], judged_only=True).aggregate  # c a b: x and e dropped
    assert judged["DCG@3"] == pytest.approx(1 + 3 / math.log2(3))
    assert judged["F1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert evaluate(qrels, run, ["DCG"], max_docs=1).aggregate["DCG"] == pytest.approx(1.0)
    every = evaluate(qrels, run, ["F1@3", "nDCG_burges@3"], all_queries=True).per_query
    assert every["F1@3"]["none"] == every["F1@3"]["absent"] == 0.0  # no relevant document; no ranking
    assert every["nDCG_burges@3"]["none"] == every["nDCG_burges@3"]["absent"] == 0.0


@pytest.mark.parametrize("spelling, canonical", [
    ("F1@10", "F1@10"), ("f1@10", "F1@10"), ("f1", "F1"), ("DCG@10", "DCG@10"), ("dcg@10", "DCG@10"),
    ("dcg", "DCG"), ("dcg_burges@10", "DCG_burges@10"), ("nDCG_burges@10", "nDCG_burges@10"),
    ("ndcg_burges@10", "nDCG_burges@10"), ("ndcg_burges", "nDCG_burges"), ("nDCG(dcg='exp-log2')@10", "nDCG_burges@10"),
    ("nDCG(dcg=exp-log2)", "nDCG_burges"), ("F1(rel=2)@5", "F1(rel=2)@5"),
])
def test_ranx_and_ir_measures_spellings_parse_to_the_canonical_name(spelling, canonical):
    assert parse_measure(spelling).canonical == canonical
    assert parse_measure(spelling).trec_name is None  # not trec_eval measures: printed under the canonical name


def test_ir_measures_log2_ndcg_is_trec_evals_ndcg_cut():
    assert parse_measure("nDCG(dcg='log2')@10").trec_name == "ndcg_cut_10"


@pytest.mark.parametrize("spelling, problem", [
    ("nDCG(dcg=exp)@10", "is 'log2' \\(nDCG\\) or 'exp-log2' \\(nDCG_burges\\), not 'exp'"),
    ("nDCG(dcg=exp-log2,gains={1:2})", "sets the gains"),
    ("F1@0", "cutoff must be positive"),
    ("DCG(max=3)@10", "does not take a 'max' parameter"),
])
def test_bad_spellings_say_what_is_wrong(spelling, problem):
    with pytest.raises(Exception, match=problem):
        parse_measure(spelling)


def test_a_grade_too_large_for_an_exponential_gain_is_refused_naming_the_file(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q 0 a 1024\n")
    with pytest.raises(EngineInputError, match=r"qrels\.txt.*grade 1024 is too large for nDCG_burges@10"):
        evaluate(read_qrels(qrels), read_run({"q": {"a": 1.0}}), ["nDCG_burges@10"])
    assert evaluate(read_qrels(qrels), read_run({"q": {"a": 1.0}}), ["DCG@10"]).aggregate["DCG@10"] == 1024.0


def test_the_cli_prints_them_under_their_canonical_names_and_lists_them_in_its_help(tmp_path, capsys):
    (tmp_path / "qrels").write_text("q 0 a 3\nq 0 b 0\nq 0 c 1\nq 0 d 2\n")
    (tmp_path / "run").write_text("q Q0 c 1 5 r\nq Q0 x 2 4 r\nq Q0 a 3 3 r\n")
    assert cli_main([str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "P.3", "-m", "f1@3,dcg@3,ndcg_burges@3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{'P_3':<22}\tall\t0.6667", f"{'F1@3':<22}\tall\t0.6667", f"{'DCG@3':<22}\tall\t2.5000",
                     f"{'nDCG_burges@3':<22}\tall\t{4.5 / (7 + 3 / math.log2(3) + 1 / 2):6.4f}"]
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    help_text = capsys.readouterr().out
    for name in ("F1[@k]", "DCG[@k]", "DCG_burges[@k]", "nDCG_burges[@k]"):
        assert name in help_text
