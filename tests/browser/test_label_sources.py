"""On the demo, after an evaluation of every run filled by the demo's judge: the leaderboard opens on the raters' labels
only and says so; choosing "Include judge-filled evaluations" reloads it with the choice in the query string, marks
the judge-filled rows with the robot badge and the judge's share, and keeps the choice when the measure changes."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from evaluation.evaluations import create_evaluation, run_evaluation
from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, JUDGE, ROUND
from judgments.judges import calibration
from judgments.models import Round
from judgments.ops import automatic

from .conftest import log_in, screenshots

pytestmark = pytest.mark.browser

# Set to a folder to keep screenshots of the leaderboard, overview and evaluation list at a desktop's and a phone's width.
SHOTS = os.environ.get("VERDICT_SCREENSHOTS")


@pytest.fixture
def judge_filled(demo, monkeypatch):
    """Every demo run evaluated with the demo judge filling the pairs no rater graded. The gate is another test's
    business (its rules decide whether the demo judge may fill): here it is taken as passed."""
    passing = calibration.gate_summary({"n_items": 200, "kappa": {"value": 0.6, "low": 0.5, "high": 0.7}, "per_grade": []},
                                       {"n_runs": 4, "kendall_tau": {"value": 1.0}},
                                       calibration.GateThresholds(min_kappa=0.4, min_tau=0.9))
    assert passing["passed"]
    monkeypatch.setattr(automatic, "check_gate", lambda judge: passing)
    round = Round.objects.get(name=ROUND)
    runs = list(round.project.runs.order_by("name"))
    return run_evaluation(create_evaluation(round, runs, measures=["nDCG@10", "P@5", "AP"], resamples=200, queue=False,
                                            fill_judge=round.judges.get(name=JUDGE)))


def test_the_leaderboard_shows_the_raters_labels_until_the_lead_includes_judge_filled_evaluations(judge_filled, live_server, page):
    source = judge_filled.label_source
    assert source.filled and source.share is not None
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/evaluations/leaderboard/")
    expect(page.get_by_text("Ranked on the raters' labels only")).to_be_visible()
    expect(page.get_by_role("combobox", name="Labels")).to_have_value("raters")
    table = page.get_by_role("table")
    expect(table.locator(".robot-badge")).to_have_count(0)

    page.get_by_role("combobox", name="Labels").select_option(label="Include judge-filled evaluations")
    page.wait_for_url(re.compile(r"labels=all"))
    expect(page.get_by_text("Ranked on raters' labels and judge-filled evaluations")).to_be_visible()
    filled_rows = table.get_by_role("row").filter(has_text=f"judge-filled: {source.percent} of labels from {JUDGE}")
    expect(filled_rows).to_have_count(len(judge_filled.results["runs"]))
    expect(filled_rows.first.get_by_role("cell").nth(1).locator(".robot-badge")).to_be_visible()  # beside the run, seen first on a phone

    page.get_by_role("combobox", name="Ranked by").select_option("P@5")
    page.wait_for_url(re.compile(r"measure=P%405"))
    assert "labels=all" in page.url
    expect(page.get_by_role("combobox", name="Labels")).to_have_value("all")
    if SHOTS:
        _screenshots(page, live_server, Path(SHOTS), judge_filled)


def _screenshots(page, live_server, folder: Path, evaluation) -> None:
    slug = DEMO_PROJECT["slug"]
    screenshots(page, live_server, folder, {
        "leaderboard-raters": f"/p/{slug}/evaluations/leaderboard/", "leaderboard-all": f"/p/{slug}/evaluations/leaderboard/?labels=all",
        "overview": f"/p/{slug}/", "evaluations": f"/p/{slug}/evaluations/", "evaluation": evaluation.get_absolute_url(),
        "comparison": f"{evaluation.get_absolute_url()}compare/"})
