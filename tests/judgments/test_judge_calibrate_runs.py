"""Calibrating a judge without paying for every pair (issue #28): the "calibrate" choice grades a seeded sample of the
pairs the raters labelled, stratified by their label and sized for the gate's minimum; the judge page says the order
(calibrate, read the report, fill), defaults to calibrate until there is a report, and shows each choice's requests
and tokens before the run, which the run then spends."""

import html
import math
import re

import pytest

from judgments.models import Adjudication, Job
from judgments.ops import grading
from judgments.ops.automatic import PairChoice, calibrate, estimate_run, human_labels, store_calibration
from judgments.ops.grading import Verdict
from tests.factory import run_queued_jobs
from tests.judges.fake_llm import FakeLLM, Reply
from tests.judgments.test_automatic_judges import llm_round, overlap_judge, reference_round
from tests.judgments.test_judge_calibration import judged_round

pytestmark = pytest.mark.django_db

# The raters' grades by (query, document position): q1 and q2 are graded, q3 is not.
GRADES = {("q1", 1): 3, ("q1", 2): 1, ("q1", 3): 0, ("q1", 4): 0, ("q2", 1): 3, ("q2", 2): 2, ("q2", 3): 0, ("q2", 4): 1}


def grade(round, rater):
    for item in round.items.select_related("query", "document"):
        key = (item.query.query_id, int(item.document.doc_id[-1]))
        if key in GRADES:
            grading.record(item, rater, Verdict(grade=GRADES[key]))


def checked(page: str) -> str:
    return re.search(r'<input type="radio" name="pairs" value="(\w+)"[^>]*checked', page).group(1)


def test_a_new_judge_defaults_to_calibrate_and_the_page_says_the_order(people):
    round = reference_round(people)
    grade(round, people.rater)
    judge = overlap_judge(round)
    page = html.unescape(people.client("lead").get(judge.get_absolute_url()).content.decode())
    assert checked(page) == "calibrate"
    order = page[page.index('<ol class="judge-order">'):]
    assert order.index("Calibrate") < order.index("Read the calibration report") < order.index("Fill")
    assert "No calibration report yet." in page
    assert "Calibrate, 100 pairs" in page
    assert "(only 8 pairs have a human label: the gate needs 100)" in page
    assert "This judge runs on the server: no requests, no tokens." in page

    store_calibration(judge, calibrate(judge, resamples=20, system_resamples=20))
    page = html.unescape(people.client("lead").get(judge.get_absolute_url()).content.decode())
    assert checked(page) == "calibrate" and "Gate: not enough evidence" in page  # calibrating more is the next step
    assert "(it does not: not enough evidence; the report says what to do next)" in page


def test_once_the_gate_passes_the_page_defaults_to_fill(people):
    round, judge = judged_round(people)  # two raters, two runs, the overlap judge over every pair
    for item in round.items.filter(document__doc_id__endswith="2"):  # settled at 0, the judge's grade
        Adjudication.objects.create(item=item, grade=0, lead=people.lead)
    judge.min_pairs, judge.min_runs = 12, 2
    judge.save()
    store_calibration(judge, calibrate(judge, resamples=20, system_resamples=20))
    page = html.unescape(people.client("lead").get(judge.get_absolute_url()).content.decode())
    assert "Gate: pass" in page and checked(page) == "unjudged"
    assert '<li aria-current="step"><strong>Fill</strong>' in page


def test_the_calibrate_choice_grades_a_stratified_sample_of_the_labelled_pairs_sized_for_the_gate(people):
    round = reference_round(people)
    grade(round, people.rater)
    judge = overlap_judge(round)
    judge.min_pairs = 5
    judge.save()
    response = people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "calibrate", "n": "", "seed": "3"})
    job = Job.objects.get(kind="run_judge")
    assert response["Location"] == job.get_absolute_url()
    assert job.params == {"judge": str(judge.uuid), "pairs": "calibrate:5", "seed": 3}  # the judge's minimum
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED and (job.result["chosen"], job.result["judged"]) == (5, 5)

    labels = human_labels(round)
    graded = set(judge.grades.values_list("item_id", flat=True))
    assert graded <= set(labels) and len(graded) == 5  # only pairs with a human label
    # stratified: labels 0 (3 pairs), 3 (2), 1 (2) and 2 (1) of 8; 5 pairs give each label its share, at least one
    assert sorted(labels[item] for item in graded) == [0, 0, 1, 2, 3]
    assert PairChoice.parse("calibrate:5", 3).items(round) == sorted(graded)
    assert PairChoice.parse("calibrate:5", 4).items(round) != sorted(graded)
    data = calibrate(judge, resamples=20, system_resamples=20)
    assert data["pairs"]["n_items"] == 5  # each a calibration pair, where "unjudged" gave 0 and "sample:30" gave 2


@pytest.mark.usefixtures("outbound_loopback")
def test_an_llm_judges_estimate_is_what_the_run_then_asks(people):
    with FakeLLM() as server:
        server.answer = lambda request: Reply.text("Final grade: 1")
        round, judge = llm_round(people, server)
        grade(round, people.rater)
        judge.min_pairs = 6
        judge.save()
        page = html.unescape(people.client("lead").get(judge.get_absolute_url()).content.decode())
        estimate = estimate_run(judge, PairChoice("calibrate", 6))
        assert len(server.requests) == 0  # estimating asks nothing
        row = page[page.index("Calibrate, 6 pairs"):]
        row = row[:row.index("</tr>")]
        assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["6", "6", "6", f"{estimate.prompt_tokens:,}", f"{6 * 300:,}", f"{estimate.prompt_tokens + 6 * 300:,}"]
        assert "divided by 4" in page and "max_tokens (300)" in page

        people.client("lead").post(f"{judge.get_absolute_url()}run/", {"pairs": "calibrate", "n": "", "seed": ""})
        [job] = run_queued_jobs()
    # The oracle: the prompts the server received, counted as the page said it counts them.
    sent = [sum(len(message["content"]) for message in request.json["messages"]) for request in server.requests]
    assert job.result["requests"] == len(server.requests) == estimate.requests == 6
    assert estimate.prompt_tokens == math.ceil(sum(sent) / 4)
    again = estimate_run(judge, PairChoice("calibrate", 6))
    assert (again.to_grade, again.requests, again.tokens) == (0, 0, 0)  # graded before: nothing left to pay for
