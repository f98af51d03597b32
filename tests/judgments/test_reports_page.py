"""Reports lists the agreement reports and evaluations a person may read, in every project, and nothing else."""

import pytest
from django.urls import reverse

from judgments.ops import reports
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (a fixture)
from tests.factory import make_project, make_round, make_user

pytestmark = pytest.mark.django_db


def test_readers_see_their_projects_reports_and_evaluations_and_no_one_else_s(people, setup):  # noqa: F811
    round, run_a, run_b, _ = setup
    evaluation = evaluated(people, round, [run_a, run_b])
    reports.store(round, reports.compute(round, resamples=10))
    other_lead = make_user("olga")
    other = make_round(make_project(other_lead, name="Elsewhere"), other_lead, [other_lead], name="Hidden round")
    reports.store(other, reports.compute(other, resamples=10))
    for who in ("lead", "viewer"):
        page = people.client(who).get(reverse("judgments:reports")).content.decode()
        assert reverse("judgments:round-agreement", args=[people.project.slug, round.uuid]) in page
        assert evaluation.get_absolute_url() in page and "nDCG@5, AP, P@1, RR" in page
        assert "Hidden round" not in page and "Elsewhere" not in page


def test_raters_read_no_reports_and_are_told_why(people, setup):  # noqa: F811
    round, run_a, run_b, _ = setup
    evaluated(people, round, [run_a, run_b])
    reports.store(round, reports.compute(round, resamples=10))
    page = people.client("rater").get(reverse("judgments:reports")).content.decode()
    assert "You read reports in no project" in page and "would bias their grading" in page
    assert str(round.uuid) not in page
