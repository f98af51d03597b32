"""A round's agreement gate is pass, fail or not enough evidence (`agreement.gate_verdict`), and the report page,
the overview, the reports list, the download and the API all show that one verdict: a gate no pair can compute
is never drawn as a pass and never gets the advice for raters who disagree. The report counts everyone who
graded apart from the pairs graded twice, the heat map says which kappa it draws, and an empty adjudication
queue says where its margin is set."""

import html
import json
import re

import pytest
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from judgments.lib import agreement
from judgments.lib.verdicts import FAIL, INSUFFICIENT, PASS
from judgments.models import AgreementReport, Round
from judgments.ops import grading, reports
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_round, make_user, run_queued_jobs
from tests.judgments.test_agreement_and_exports import url

pytestmark = pytest.mark.django_db

PAIRS = {f"q{q}": [f"d{q}{d}" for d in range(1, 7)] for q in range(1, 5)}  # 4 queries x 6 documents: 24 pairs
REWRITE = "Rewrite the guidelines' edge cases"


def ravi_grade(doc: str) -> int:
    return int(doc[-1]) % 4


def rosa_grade(doc: str) -> int:
    """Ravi's grade, one higher on documents 3 and 6, two higher on document 5 (capped at 3)."""
    n = int(doc[-1])
    return min(3, ravi_grade(doc) + (1 if n in (3, 6) else 2 if n == 5 else 0))


@pytest.fixture
def rosa(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    return rosa


def computed(people, round: Round) -> None:
    assert people.client("lead").post(url("round-agreement-compute", round)).status_code == 302
    [job] = run_queued_jobs()
    assert job.state == "succeeded", job.error


@pytest.fixture
def no_overlap(people, rosa) -> Round:
    """The flow the docs describe with the default policy (one rater per pair, 15% to be graded twice): two raters grade
    12 pairs each, none of them the same pair, and the lead computes the report."""
    round = make_round(people.project, people.lead, [people.rater, rosa], PAIRS, overlap_share=0.15)
    items = list(round.items.select_related("document").order_by("pk"))
    assert sum(item.required > 1 for item in items) == 4  # 15% of 24 planned, none graded twice yet
    for n, item in enumerate(items):
        grading.record(item, people.rater if n % 2 else rosa, Verdict(grade=ravi_grade(item.document.doc_id)))
    computed(people, round)
    return round


@pytest.fixture
def overlap(people, rosa) -> Round:
    """Both raters grade every pair (two raters per pair)."""
    round = make_round(people.project, people.lead, [people.rater, rosa], PAIRS, raters_per_pair=2)
    for item in round.items.select_related("document"):
        grading.record(item, people.rater, Verdict(grade=ravi_grade(item.document.doc_id)))
        grading.record(item, rosa, Verdict(grade=rosa_grade(item.document.doc_id)))
    computed(people, round)
    return round


def text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def gate_section(page: str) -> str:
    return text(page[page.index('aria-labelledby="gate-title"'):page.index("<h2>Summary</h2>")])


# ------------------------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(("value", "state"), [(0.6, PASS), (0.61, PASS), (0.599, FAIL), (-0.2, FAIL), (None, INSUFFICIENT)])
def test_the_gate_passes_at_its_threshold_fails_under_it_and_lacks_evidence_when_undefined(value, state):
    found = agreement.gate_verdict("alpha", value, 0.6, n_items=40 if value is not None else 0, n_items_single=26,
                                   overlap="15% of its pairs are to be graded by a second rater")
    assert found.state == state
    if state == INSUFFICIENT:
        assert found.reasons == ("no pair graded by two raters yet (26 pairs graded once)",)
        assert "Keep grading: 15% of its pairs are to be graded by a second rater" in found.steps[0]
    elif state == FAIL:
        assert found.steps == agreement.GATE_ADVICE and "over 40 pairs graded by two raters or more" in found.reasons[0]
    else:
        assert found.steps == () and found.reasons == (f"alpha {value:.3f} is at least 0.60 over 40 pairs graded by two raters or more",)


def test_a_round_without_overlap_planned_is_told_to_re_judge_a_sample_and_an_undefined_statistic_says_why():
    none_planned = agreement.gate_verdict("alpha", None, 0.6, n_items=0)
    assert none_planned.insufficient and "refresh round" in none_planned.steps[0] and "overlap" in none_planned.steps[0]
    undefined = agreement.gate_verdict("alpha", None, 0.6, n_items=12, reason="every grade is the same label")
    assert undefined.insufficient and undefined.reasons == (
        "alpha is undefined over 12 pairs graded by two raters or more: every grade is the same label",)


# ------------------------------------------------------------------------------------------- the pages


def test_a_gate_no_pair_can_compute_says_not_enough_evidence_what_is_missing_and_where_to_get_it(people, no_overlap):
    page = people.client("lead").get(url("round-agreement", no_overlap)).content.decode()
    gate = gate_section(page)
    assert "Gate: Krippendorff's alpha at least 0.60 — not enough evidence" in gate
    assert "Missing: no pair graded by two raters yet (24 pairs graded once)." in gate
    assert "Keep grading: 15% of its pairs are to be graded by a second rater" in gate
    assert no_overlap.get_absolute_url() in page[page.index('aria-labelledby="gate-title"'):page.index("<h2>Summary</h2>")]
    assert REWRITE not in page and "not computable" not in page and "gate-pass" not in page
    assert 'class="gate gate-insufficient"' in page


def test_the_summary_counts_every_rater_who_graded_apart_from_the_pairs_graded_twice(people, no_overlap):
    summary = text(people.client("lead").get(url("round-agreement", no_overlap)).content.decode())
    summary = summary[summary.index("Summary"):summary.index("Not grades, counted apart")]
    assert "2 raters made 24 grades." in summary
    assert "0 pairs graded by two raters or more (0 grades by 0 raters)" in summary
    assert "24 pairs with one grade are left out" in summary


def test_a_real_pass_shows_what_it_rests_on_and_a_real_fail_the_advice(people, overlap):
    labels = [0, 1, 2, 3]
    docs = [doc for docs in PAIRS.values() for doc in docs]
    client = people.client("lead")
    page = client.get(url("round-agreement", overlap)).content.decode()
    gate = gate_section(page)
    alpha = reports.gate(overlap, AgreementReport.objects.get(round=overlap).data["summary"]).value
    assert alpha > 0.6 and "— pass" in gate and f"Krippendorff's alpha {alpha:.3f} is at least 0.60 over 24 pairs" in gate
    assert REWRITE not in page and "2 raters made 48 grades." in text(page)
    Round.objects.filter(pk=overlap.pk).update(gate=0.99)
    page = client.get(url("round-agreement", overlap)).content.decode()
    gate = gate_section(page)
    assert "— fail" in gate and "is under the gate of 0.99 over 24 pairs" in gate and REWRITE in gate
    assert 'class="gate gate-fail"' in page
    # the heat map's kappa, against scikit-learn
    quadratic = cohen_kappa_score([ravi_grade(d) for d in docs], [rosa_grade(d) for d in docs], labels=labels, weights="quadratic")
    unweighted = cohen_kappa_score([ravi_grade(d) for d in docs], [rosa_grade(d) for d in docs], labels=labels)
    assert abs(quadratic - unweighted) > 0.05  # the two kappas the page once showed side by side unlabelled
    heat = html.unescape(page[page.index('id="pairs-title"'):page.index("</svg>")])
    assert "Rater pairs: quadratic-weighted Cohen's kappa" in heat and "Quadratic-weighted Cohen's kappa for every pair of raters" in heat
    cells = re.findall(r'class="cell-text">([^<]*)<', heat)
    assert f"{quadratic:.3f}" in cells and f"{unweighted:.3f}" not in cells
    table = text(page[page.index("</svg>"):page.index("Grades per rater")])
    assert "Kappa, unweighted" in table and "Quadratic-weighted (heat map)" in table
    assert f"{unweighted:.3f}" in table and f"{quadratic:.3f}" in table
    assert "Cohen's kappa (quadratic weights), mean over rater pairs" in text(page)


def test_the_overview_the_reports_list_the_download_and_the_api_read_the_same_verdict(people, no_overlap):
    client = people.client("lead")
    overview = text(client.get(reverse("judgments:project", args=[people.project.slug])).content.decode())
    assert "Round 1: not enough evidence for the agreement gate, no pair graded by two raters yet" in overview
    assert "not computable" not in overview and "cannot be checked" not in overview
    listed = client.get(reverse("judgments:reports")).content.decode()
    assert 'gate-word gate-word-insufficient">not enough evidence<' in listed
    downloaded = json.loads(client.get(url("round-agreement-download", no_overlap, "json")).content)["gate"]
    assert downloaded["state"] == INSUFFICIENT and downloaded["passed"] is None and downloaded["advice"] == []
    assert downloaded["verdict"]["reasons"] == ["no pair graded by two raters yet (24 pairs graded once)"]


def test_the_api_answers_the_gate_s_verdict_with_its_reasons(people, overlap):
    from tests.api.conftest import token_for

    secret = token_for(people.lead, people.project)
    api = f"/api/v1/projects/{people.project.slug}/rounds/{overlap.uuid}/agreement"
    answer = people.client("lead").get(api, HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert answer["gate"]["state"] == PASS and answer["gate"]["passed"] is True and answer["gate"]["advice"] == []
    Round.objects.filter(pk=overlap.pk).update(gate=0.99)  # the round's setting now, not the one stored with the report
    answer = people.client("lead").get(api, HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert answer["gate"]["state"] == FAIL and answer["gate"]["passed"] is False and answer["gate"]["advice"] == list(agreement.GATE_ADVICE)


def test_an_empty_adjudication_queue_says_where_its_margin_is_set(people, no_overlap):
    page = people.client("lead").get(url("round-adjudication", no_overlap)).content.decode()
    empty = page[page.index('id="queue-empty"'):]
    empty = empty[:empty.index("</p>")]
    assert "No pair's grades differ by 2 or more." in text(empty) and "The margin, 2, is set under" in text(empty)
    assert f'href="{url("round-agreement", no_overlap)}#settings">Consensus and gate</a>' in empty
    viewer = people.client("viewer").get(url("round-adjudication", no_overlap)).content.decode()
    assert "by a lead" in viewer[viewer.index('id="queue-empty"'):]
