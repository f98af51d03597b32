"""A lead adds a token-overlap judge to the demo round, runs it, and opens its calibration report; sets the project's
default embedding backend and runs a semantic judge that says how many texts it embedded."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from judgments.demo import DEMO_PASSWORD, DEMO_PROJECT, ROUND
from judgments.models import Job, Round
from judgments.ops.jobs import execute_job

from .conftest import log_in, screenshots

pytestmark = pytest.mark.browser

# Set to a folder to keep screenshots of the judge pages at a desktop's and a phone's width.
SHOTS = os.environ.get("VERDICT_SCREENSHOTS")


def run_latest(kind: str) -> None:
    execute_job(Job.objects.filter(kind=kind).latest("created_at").pk)  # stands in for the worker


def test_a_lead_adds_a_judge_to_the_demo_round_runs_it_and_opens_its_calibration(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    round = Round.objects.get(name=ROUND)
    page.goto(f"{live_server.url}{round.get_absolute_url()}")
    page.get_by_role("button", name="Automatic judges").click()
    expect(page.get_by_role("heading", name="Automatic judges")).to_be_visible()
    expect(page.get_by_role("row", name="overlap")).to_be_visible()  # the demo's own judge
    page.get_by_role("button", name="Add a token overlap judge").click()
    page.get_by_label("Name").fill("overlap-strict")
    page.get_by_label("Min tokens").fill("3")
    page.get_by_role("button", name="Add the judge").click()
    expect(page.get_by_role("heading", name="overlap-strict")).to_be_visible()
    expect(page.get_by_label("Calibrate: a sample of the pairs the raters graded, stratified by their grade")).to_be_checked()
    expect(page.get_by_role("row", name="Calibrate, 100 pairs")).to_be_visible()

    page.get_by_label("All pairs").check()
    page.get_by_role("button", name="Run the judge").click()
    expect(page.get_by_role("heading", name="Run an automatic judge")).to_be_visible()
    run_latest("run_judge")
    page.reload()
    page.get_by_role("button", name="Open the result").click()
    pairs = round.items.count()
    expect(page.get_by_text(f"{pairs:,} of {pairs:,} pairs judged")).to_be_visible()
    expect(page.get_by_role("cell", name="overlap-strict:").first).to_be_visible()

    page.get_by_role("button", name="Calibration report").click()
    page.get_by_role("button", name="Compute the report").click()
    run_latest("calibrate_judge")
    page.reload()
    page.get_by_role("button", name="Open the result").click()
    expect(page.get_by_role("heading", name="Calibration: Automatic judge overlap-strict")).to_be_visible()
    # Issue #28: the overlap judge never gives the raters' grades 1 and 2, and tau rests on three runs: never a pass.
    expect(page.get_by_role("heading", name="Gate: fail")).to_be_visible()
    expect(page.get_by_text("tau over 3 runs: at least 4 needed.")).to_be_visible()
    expect(page.get_by_text("Kendall's tau:")).to_be_visible()
    expect(page.get_by_role("heading", name="Where they disagree most")).to_be_visible()
    if SHOTS:
        _screenshots(page, live_server, round, Path(SHOTS))


def _screenshots(page, live_server, round, folder: Path) -> None:
    judge = round.judges.get(name="overlap")
    screenshots(page, live_server, folder, {
        "judges": f"{round.get_absolute_url()}judges/", "judge-form": f"{round.get_absolute_url()}judges/new/token_overlap/",
        "judge": judge.get_absolute_url(), "calibration": f"{judge.get_absolute_url()}calibration/",
        "endpoint": f"/p/{DEMO_PROJECT['slug']}/llm-endpoint/"})


def test_a_lead_sets_the_default_backend_and_a_semantic_judge_says_what_it_embedded(demo, live_server, page):
    log_in(page, live_server, "lead", DEMO_PASSWORD)
    round = Round.objects.get(name=ROUND)
    page.goto(f"{live_server.url}/p/{DEMO_PROJECT['slug']}/llm-endpoint/")
    expect(page.get_by_role("heading", name="Embeddings of semantic judges")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("numpy: built-in encoder.*the project's default"))).to_be_visible()
    page.get_by_label("Default backend").select_option("numpy")
    page.get_by_label("Texts per request").fill("32")
    page.get_by_role("button", name="Save the embeddings").click()
    expect(page.get_by_text("Embeddings saved: default backend numpy; no endpoint.")).to_be_visible()

    page.goto(f"{live_server.url}{round.get_absolute_url()}judges/new/semantic/")
    page.get_by_label("Name").fill("minilm")
    page.get_by_label("Backend").select_option(label="The project's default (numpy)")
    page.get_by_role("button", name="Add the judge").click()
    expect(page.get_by_role("heading", name="minilm")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("Embeds with numpy"))).to_be_visible()
    page.get_by_label("A seeded sample (of any pairs)").check()
    page.get_by_label("Sample size").fill("8")
    page.get_by_role("button", name="Run the judge").click()
    run_latest("run_judge")
    page.reload()
    expect(page.get_by_text("texts from the cache")).to_be_visible()
    page.get_by_role("button", name="Open the result").click()
    expect(page.get_by_role("cell", name=re.compile(r"\d+ texts embedded, 0 from the cache"))).to_be_visible()
    if SHOTS:
        judge = round.judges.get(name="minilm")
        screenshots(page, live_server, Path(SHOTS), {
            "semantic-judge-form": f"{round.get_absolute_url()}judges/new/semantic/", "semantic-judge": judge.get_absolute_url(),
            "endpoints": f"/p/{DEMO_PROJECT['slug']}/llm-endpoint/", "semantic-calibration": f"{judge.get_absolute_url()}calibration/"})
