"""An evaluation may fill the pairs no rater graded with an automatic judge's grades, only when the judge's
calibration passed its gate; it then says how many labels came from the judge, per run and depth, and marks the
queries whose scores rest on them."""

import html

import pytest

from evaluation.evaluations import EvaluationRefused, create_evaluation, per_query_frame, run_evaluation
from evaluation.models import Evaluation
from judgments.models import Adjudication
from judgments.ops.automatic import calibrate, run_judge, store_calibration
from tests.factory import run_queued_jobs
from tests.judgments.test_automatic_judges import reference_round
from tests.judgments.test_judge_calibration import judged_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def partly_graded(people):
    """Two raters graded q1 and q2 (8 pairs); q3 has no human grade. Two runs; an overlap judge that graded
    every pair (3 for each query's first document, 0 for the rest) and was calibrated. The lead adjudicated the
    second documents (graded 1 and 2) to 0, so the judge agrees with every label; its gate asks for the evidence
    there is (8 pairs, 2 runs), and passes."""
    round, judge = judged_round(people, ungraded=("q3",))
    for item in round.items.filter(document__doc_id__in=["d12", "d22"]):
        Adjudication.objects.create(item=item, grade=0, lead=people.lead)
    judge.min_pairs, judge.min_runs = 8, 2
    judge.save()
    store_calibration(judge, calibrate(judge, resamples=50, system_resamples=100))
    return round, judge


def evaluate(round, judge=None):
    runs = list(round.pool.runs.order_by("name"))
    return run_evaluation(create_evaluation(round, runs, measures=["nDCG@10", "P@1"], queue=False, resamples=100, fill_judge=judge))


def test_the_judge_labels_only_the_pairs_no_rater_graded_and_the_results_count_them(partly_graded):
    round, judge = partly_graded
    human_only = evaluate(round)
    assert human_only.n_labels == 8 and "fill" not in human_only.results
    filled = evaluate(round, judge)
    assert filled.n_labels == 12 and filled.labels_sha256 != human_only.labels_sha256
    assert filled.results["fill"]["judge"] == "overlap"
    assert (filled.results["fill"]["labels"], filled.results["fill"]["human_labels"]) == (4, 8)
    assert filled.results["fill"]["gate"]["passed"]
    by_run = {row["run"]: row["judge_labels"] for row in filled.results["runs"]}
    # Each run ranks q3's four documents: its top 1 holds one judge label, deeper cutoffs all four.
    for name in ("Round 1 pool run", "reverse"):
        assert by_run[name]["total"]["1"] == 1 and by_run[name]["total"]["5"] == 4 and by_run[name]["total"]["all"] == 4
        assert by_run[name]["queries"]["10"] == {"q3": 4}
    scores = per_query_frame(filled, "nDCG@10")
    assert scores.loc["q3", "Round 1 pool run"] == pytest.approx(1.0)  # the judge's 3 for d31, ranked first
    assert "q3" not in per_query_frame(human_only, "nDCG@10").index


def test_the_page_reports_the_judge_labels_and_marks_the_queries(partly_graded, people):
    round, judge = partly_graded
    evaluation = evaluate(round, judge)
    page = html.unescape(people.client("lead").get(evaluation.get_absolute_url() + "?measure=nDCG@10").content.decode())
    assert "Labels from the automatic judge overlap" in page and "4 of the 12 labels came from the judge" in page
    assert "Its gate passed: kappa 1.000, lower 95% bound 1.000 ≥ 0.40 over 8 pairs, Kendall's tau 1.000 ≥ 0.90 over 2 runs." in page
    assert 'have a label from the judge overlap"><span class="robot-badge"' in page and "</span> 4</small>" in page
    assert page.count("have a label from the judge overlap") == 2  # q3, once per run


def test_the_gate_refuses_a_failing_judge(partly_graded, people):
    round, judge = partly_graded
    Adjudication.objects.all().delete()  # the raters' grade 1 is back in the consensus: the judge never gives it
    store_calibration(judge, calibrate(judge, resamples=50, system_resamples=100))
    with pytest.raises(EvaluationRefused, match="did not pass its gate: .*The judge never gave grade 1"):
        evaluate(round, judge)
    response = people.client("lead").post(f"/p/{round.project.slug}/evaluations/new/", {
        "round": round.uuid, "runs": [run.uuid for run in round.pool.runs.all()], "measures": "nDCG@10", "relevance_level": 1,
        "fill_judge": judge.uuid})
    assert response.status_code == 200 and "did not pass its gate" in html.unescape(response.content.decode())
    assert not Evaluation.objects.exists()


def test_a_judge_without_a_fresh_calibration_or_of_another_round_is_refused(partly_graded, people):
    round, judge = partly_graded
    judge.grades.filter(item__query__query_id="q3").delete()
    run_judge(judge)
    with pytest.raises(EvaluationRefused, match="graded pairs after its calibration report"):
        evaluate(round, judge)
    judge.calibration.delete()
    with pytest.raises(EvaluationRefused, match="has no calibration report"):
        evaluate(round, judge)
    other = reference_round(people, name="Round 2")
    with pytest.raises(EvaluationRefused, match="belongs to another round"):
        run_evaluation(create_evaluation(other, list(other.pool.runs.all()), measures=["P@1"], queue=False, fill_judge=judge))


def test_the_evaluation_job_checks_the_gate_again(partly_graded, people):
    round, judge = partly_graded
    create_evaluation(round, list(round.pool.runs.all()), measures=["P@1"], fill_judge=judge, resamples=100)
    judge.min_pairs = 100
    judge.save()
    [job] = run_queued_jobs()
    assert job.state == "failed" and "did not pass its gate: not enough evidence: pairs with a human grade" in job.error


def test_the_evaluate_command_fills_with_a_judge_and_says_how_many_labels_it_gave(partly_graded):
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    round, judge = partly_graded
    out = io.StringIO()
    call_command("evaluate", str(round.uuid), "--runs", "reverse", "--measures", "P@1", "--fill-judge", "overlap", stdout=out)
    assert "4 of the labels came from the judge overlap (gate pass: kappa 1.000 (95% interval from 1.000) over 8 pairs, tau 1.000 over 2 runs)" in out.getvalue()
    with pytest.raises(CommandError, match="no judge named 'gpt'"):
        call_command("evaluate", str(round.uuid), "--runs", "reverse", "--fill-judge", "gpt")
