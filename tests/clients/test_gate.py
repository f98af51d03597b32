"""The CI gate and the client's commands against a real server process: exit 1 on a significant regression, 0 on an
improvement, 3 with "not enough evidence" on a change too few queries show (0 with --allow-insufficient), 2 on bad input; the table, the Markdown summary and the
unjudged-share warning; the qrels download with its ETag."""

import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from judgments.models import StoredRun
from judgments.ops import grading
from judgments.ops.imports import import_run
from tests.factory import make_round, trec_run
from tests.integration.test_worker import ROOT

from .conftest import write_token

# 30 queries of five documents; the rater grades them 3, 2, 1, 0, 0 in this order.
DOCS = {f"q{i:02d}": [f"q{i:02d}-d{j}" for j in range(1, 6)] for i in range(30)}
GRADES = (3, 2, 1, 0, 0)
GOOD = DOCS
WEAK = {q: list(reversed(docs)) for q, docs in DOCS.items()}
# The weak order behind two documents nobody judged: 2 of 7 of the top 10 unjudged (29%).
WEAK_UNJUDGED = {q: [f"{q}-new1", f"{q}-new2"] + list(reversed(docs)) for q, docs in DOCS.items()}
# The good order with the first two documents swapped on two queries only: a small drop, no evidence.
NEARLY_GOOD = {q: ([docs[1], docs[0], *docs[2:]] if q in ("q00", "q01") else docs) for q, docs in DOCS.items()}
# The good order, then twenty documents nobody judged: deeper than the pool (the top 5 of each query), judged within it.
GOOD_DEEP = {q: docs + [f"{q}-deep{j}" for j in range(20)] for q, docs in DOCS.items()}


@pytest.fixture
def world(server, people):
    round = make_round(people.project, people.lead, [people.rater], DOCS, name="Launch")
    for item in round.items.select_related("query", "document"):
        grade = GRADES[DOCS[item.query.query_id].index(item.document.doc_id)]
        grading.record(item, people.rater, grading.Verdict(grade=grade))
    import_run(people.project, trec_run(GOOD, "good"), "good.run", name="good", system="bm25")
    import_run(people.project, trec_run(WEAK, "weak"), "weak.run", name="weak", system="bm25")
    return {"server": server, "project": people.project, "token": write_token(people.lead, people.project)}


def gate(world, tmp_path, run: dict | bytes, *extra: str, baseline: str = "good", round: str = "Launch"):
    run_file = tmp_path / "candidate.trec"
    run_file.write_bytes(run if isinstance(run, bytes) else trec_run(run, "cand"))
    return subprocess.run([sys.executable, "-m", "clients.verdict", "gate", "--url", world["server"].url, "--token", world["token"],
                           "--project", world["project"].slug, "--round", round, "--baseline", baseline, "--run", str(run_file),
                           "--measure", "nDCG@10", "--measure", "AP", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_a_significant_regression_fails_the_gate_with_a_table_a_markdown_summary_and_a_warning(world, tmp_path):
    summary = tmp_path / "summary.md"

    result = gate(world, tmp_path, WEAK_UNJUDGED, "--name", "candidate 1", "--markdown", str(summary),
                  "--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml"))

    assert result.returncode == 1, result.stderr + world["server"].output()
    lines = result.stdout.splitlines()
    assert lines[0] == "candidate 1 against good on round 'Launch'"
    assert lines[1] == "Labels: raters' labels only (150 labels)."  # 30 queries of 5 graded documents
    header = next(line for line in lines if line.startswith("measure"))
    assert header.split() == ["measure", "baseline", "candidate", "diff", "95%", "CI", "of", "diff", "p", "(Holm)", "unjudged", "verdict"]
    ndcg = next(line for line in lines if line.startswith("nDCG@10"))
    assert ndcg.endswith("regression") and "1.0000" in ndcg and "28.6%" in ndcg
    assert lines[-1] == "FAIL: significant regression on nDCG@10, AP"
    assert "warning: 29% of candidate 1's documents in the top 10 have no label (over 20%)" in result.stderr
    text = summary.read_text()
    assert text.startswith("### ❌ Verdict gate failed: candidate 1 against good\n\nLabels: raters' labels only (150 labels).\n")
    assert "| measure | baseline | candidate | diff | 95% CI of diff | p (Holm) | unjudged | verdict |" in text
    assert "| nDCG@10 | 1.0000 |" in text and text.count("| regression |") == 2
    assert "> ⚠️ 29% of candidate 1's documents in the top 10 have no label" in text
    assert StoredRun.objects.filter(project=world["project"], name="candidate 1").exists()
    assert "warning: the server runs" not in result.stderr  # the same release: no version warning
    report = json.loads((tmp_path / "gate.json").read_text())
    assert (report["verdict"], report["exit_code"], report["baseline"], report["candidate"]) == ("fail", 1, "good", "candidate 1")
    assert report["labels"] == {"summary": "Labels: raters' labels only (150 labels).", "labels_source": "human", "judge": None,
                                "labels": 150, "judge_labels": 0, "judge_label_share": 0.0}
    ndcg, ap = report["rows"]
    assert (ndcg["measure"], ndcg["baseline"], ndcg["verdict"], ndcg["unjudged_depth"]) == ("nDCG@10", 1.0, "regression", "10")
    assert ndcg["diff"] < -0.01 and ndcg["p_corrected"] < 0.05 and abs(ndcg["unjudged"] - 2 / 7) < 1e-9
    assert ap["unjudged_depth"] == "5" and ap["unjudged"] == pytest.approx(2 / 5)  # AP's: within the pool's depth, 2 of the top 5
    assert report["reasons"][0].startswith("nDCG@10: significant regression of -0.") and len(report["reasons"]) == 2
    assert len(report["warnings"]) == 2 and "in the top 5 (the pool's depth)" in report["warnings"][1]
    suites = ElementTree.parse(tmp_path / "gate.xml").getroot()
    assert (suites.get("tests"), suites.get("failures"), suites.get("skipped"), suites.get("errors")) == ("2", "2", "0", "0")
    cases = suites.findall("testsuite/testcase")
    assert [(case.get("name"), case.find("failure").get("message")) for case in cases] == [
        ("nDCG@10", "nDCG@10: regression"), ("AP", "AP: regression")]


def test_an_improvement_passes_the_gate(world, tmp_path):
    summary = tmp_path / "summary.md"

    result = gate(world, tmp_path, GOOD, "--baseline", "weak", "--markdown", str(summary))

    assert result.returncode == 0, result.stderr + world["server"].output()
    assert next(line for line in result.stdout.splitlines() if line.startswith("nDCG@10")).endswith("improvement")
    assert result.stdout.splitlines()[-1] == "PASS: no significant regression"
    assert "warning" not in result.stderr
    assert summary.read_text().startswith("### ✅ Verdict gate passed: candidate ")


def test_a_drop_on_two_queries_is_not_enough_evidence_not_a_pass_exit_3_unless_allowed(world, tmp_path):
    """Two of 30 queries differ: the sign-flip test's smallest p is 2/2^2 = 0.5, so no regression could be found:
    exit 3 (neither the pass's 0 nor the regression's 1), 0 with --allow-insufficient."""
    result = gate(world, tmp_path, NEARLY_GOOD, "--max-drop", "0", "--markdown", str(tmp_path / "summary.md"),
                  "--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml"))

    assert result.returncode == 3, result.stderr + world["server"].output()
    assert result.stdout.rstrip().endswith("(exit 3); no significant regression elsewhere")
    row = next(line for line in result.stdout.splitlines() if line.startswith("nDCG@10"))
    assert row.endswith("not enough evidence") and " -0.0" in row
    assert "PASS" not in result.stdout and result.stdout.rstrip().splitlines()[-1].startswith("NOT ENOUGH EVIDENCE on nDCG@10, AP:")
    assert ("nDCG@10: not enough evidence: over 30 queries, 2 of which differ: the smallest p this test can give is 0.5000 "
            "(1.0000 after Holm's correction across 2 tests)") in result.stderr
    assert (tmp_path / "summary.md").read_text().startswith("### ⚠️ Verdict gate: not enough evidence on nDCG@10, AP")
    report = json.loads((tmp_path / "gate.json").read_text())
    assert (report["verdict"], report["exit_code"]) == ("insufficient", 3)
    assert report["reasons"][0].startswith("nDCG@10: not enough evidence: over 30 queries, 2 of which differ")
    skipped = ElementTree.parse(tmp_path / "gate.xml").getroot().findall("testsuite/testcase/skipped")
    assert [element.get("message").split(":")[0] for element in skipped] == ["nDCG@10", "AP"]
    allowed = gate(world, tmp_path, NEARLY_GOOD, "--max-drop", "0", "--allow-insufficient")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.rstrip().endswith("(allowed by --allow-insufficient); no significant regression elsewhere")


def test_a_bad_run_file_is_bad_input_with_the_servers_line_in_every_output_and_nothing_stored(world, tmp_path):
    stored = StoredRun.objects.count()

    result = gate(world, tmp_path, b"q00 Q0 q00-d1 1 2.0 cand\nq00 Q0 q00-d2 2\n", "--markdown", str(tmp_path / "summary.md"),
                  "--json", str(tmp_path / "gate.json"), "--junit", str(tmp_path / "gate.xml"))

    assert result.returncode == 2
    assert "candidate.trec:2" in result.stderr, result.stderr
    assert StoredRun.objects.count() == stored
    assert (tmp_path / "summary.md").read_text().startswith("### ❌ Verdict gate could not reach a verdict: ")
    assert "candidate.trec:2" in (tmp_path / "summary.md").read_text()
    assert json.loads((tmp_path / "gate.json").read_text())["verdict"] == "refused"
    assert "candidate.trec:2" in ElementTree.parse(tmp_path / "gate.xml").getroot().find("testsuite/testcase/error").get("message")


def test_a_run_deeper_than_the_pool_is_warned_about_only_where_a_cutoff_reaches_past_the_labels(world, tmp_path):
    """Below the pool's depth (5) every run's documents are unjudged: AP is read within it (none unjudged), nDCG@10
    at its cutoff (half its top 10 unjudged). The gate used to warn on AP here, for any run deeper than the pool."""
    result = gate(world, tmp_path, GOOD_DEEP, "--allow-insufficient", "--json", str(tmp_path / "gate.json"))

    assert result.returncode == 0, result.stderr + world["server"].output()
    assert "warning: 50% of " in result.stderr and "nDCG@10 is judged against a stale list" in result.stderr
    assert "AP is judged against a stale list" not in result.stderr
    rows = {row["measure"]: row for row in json.loads((tmp_path / "gate.json").read_text())["rows"]}
    assert (rows["AP"]["unjudged_depth"], rows["AP"]["unjudged"]) == ("5", 0.0)
    assert rows["nDCG@10"]["unjudged_depth"] == "10" and rows["nDCG@10"]["unjudged"] == pytest.approx(0.5)


@pytest.mark.parametrize("wrong, message", [
    ({"round": "No such round"}, "No round named 'No such round'"),
    ({"baseline": "no-such-run"}, "No run named 'no-such-run'"),
    ({"baseline": "6f1c1f9e-3c1b-4a4e-8d8e-2b1f3c4d5e6f"}, "No run with the id 6f1c1f9e-3c1b-4a4e-8d8e-2b1f3c4d5e6f"),
])
def test_an_unknown_round_or_baseline_is_bad_input(world, tmp_path, wrong, message):
    stored = StoredRun.objects.count()

    result = gate(world, tmp_path, GOOD, **wrong)

    assert result.returncode == 2
    assert message in result.stderr
    assert StoredRun.objects.count() == stored  # nothing uploaded


def test_bad_arguments_are_bad_input(world, tmp_path):
    stored = StoredRun.objects.count()
    assert gate(world, tmp_path, GOOD, "--alpha", "2").returncode == 2
    assert gate(world, tmp_path, GOOD, "--max-drop", "much").returncode == 2
    assert StoredRun.objects.count() == stored
    unknown = gate(world, tmp_path, GOOD, "--measure", "nDCG@ten")
    assert unknown.returncode == 2
    assert "400 " in unknown.stderr and "nDCG@ten" in unknown.stderr, unknown.stderr
    assert StoredRun.objects.count() == stored  # the measures are checked before the candidate is uploaded


def test_a_candidate_with_the_baselines_bytes_passes_without_an_evaluation(world, tmp_path):
    result = gate(world, tmp_path, trec_run(GOOD, "good"))

    assert result.returncode == 0, result.stderr
    assert "has the bytes of the baseline 'good': nothing changed" in result.stdout
    assert not world["project"].evaluations.exists()


def test_the_gate_marks_labels_an_automatic_judge_filled():
    """The API cannot start a judge-filled evaluation yet; the client marks one whatever starts it."""
    from clients.verdict import IMPROVEMENT, GateRow, decide, labels_line, markdown_summary

    filled = {"labels_source": "judge_filled", "judge": "overlap", "judge_labels": 3527, "labels": 4202, "judge_label_share": 3527 / 4202}
    line = labels_line(filled)
    assert line == ("Labels: judge-filled: 84% of labels (3,527 of 4,202) from overlap: the scores rest partly on an automatic "
                    "judge's labels.")
    assert labels_line({**filled, "judge_label_share": None}).startswith("Labels: judge-filled by overlap (share not recorded)")
    assert labels_line({}) == "Labels: the server did not say where they came from (a server older than labels_source)."
    row = GateRow("nDCG@10", 0.5, 0.6, 0.1, 0.05, 0.15, 0.01, 0.0, IMPROVEMENT, "10")
    summary = markdown_summary(decide([row], baseline="a", candidate="b", list_name="round 'R'", labels=line))
    assert summary.splitlines()[2] == "🤖 " + line
