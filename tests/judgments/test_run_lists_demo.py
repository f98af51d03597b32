"""The run lists on a fresh demo: each shows its runs' coverage of the query set they answer, not of the
newest set (the shopper questions no ranked run answers), and says which set that is and why."""

import re

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from judgments.demo import ANSWER_QUERY_SET, DEMO_PROJECT, QUERY_SET
from judgments.models import Project

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db):
    call_command("load_demo")
    project = Project.objects.get(slug=DEMO_PROJECT["slug"])
    client = Client()
    client.force_login(project.memberships.get(user__username="lead").user)
    return project, client


def coverage_rows(page: str) -> dict[str, tuple[int, int]]:
    """Each run's (with results, missing) as the table shows them."""
    rows = re.findall(r'<tr><td><a href="[^"]*">([^<]+)</a></td>\s*<td class="num">([\d,]+)</td><td class="num[^"]*"[^>]*>([\d,]+)</td>', page)
    return {name: (int(found.replace(",", "")), int(missing.replace(",", ""))) for name, found, missing in rows}


def selected_set(page: str) -> str:
    return re.search(r'<option value="[^"]*" selected>([^<]*)</option>', page).group(1)


def why_this_set(page: str) -> str:
    return " ".join(re.search(r'id="coverage-set-why">(.*?)</p>', page, re.S).group(1).split())


def test_the_runs_page_of_the_demo_shows_the_launch_queries_every_run_answers(demo):
    project, client = demo
    page = client.get(reverse("judgments:runs", args=[project.slug])).content.decode()
    assert selected_set(page) == QUERY_SET
    launch = set(project.query_sets.get(name=QUERY_SET).queries.values_list("query_id", flat=True))
    expected = {}
    for run in project.runs.all():  # the oracle: the Parquet files read directly
        with run.file.open("rb") as handle:
            answered = set(pq.read_table(handle, columns=["query_id"])["query_id"].to_pylist())
        expected[run.name] = (len(launch & answered), len(launch - answered))
    assert coverage_rows(page) == expected and len(expected) == 4
    assert all(missing == 0 for _found, missing in expected.values()) and "state-failed" not in page
    assert why_this_set(page).startswith(f"The query set most of the project's runs answer: 4 of 4 runs have results for at least one of its {len(launch)} queries")
    # The shopper questions are still there to choose, and then every run misses all 48 of them, in red.
    questions = project.query_sets.get(name=ANSWER_QUERY_SET)
    page = client.get(reverse("judgments:runs", args=[project.slug]), {"query_set": questions.uuid}).content.decode()
    assert selected_set(page) == ANSWER_QUERY_SET and set(coverage_rows(page).values()) == {(0, 48)} and "state-failed" in page


def test_the_answer_runs_page_of_the_demo_shows_the_shopper_questions(demo):
    project, client = demo
    page = client.get(reverse("judgments:answer-runs", args=[project.slug])).content.decode()
    assert selected_set(page) == ANSWER_QUERY_SET
    assert why_this_set(page).startswith("The query set most of the project's answer runs answer: 2 of 2 answer runs have answers to at least one of its 48 queries")


def test_the_pool_form_of_the_demo_picks_the_launch_queries_the_runs_answer(demo):
    project, client = demo
    page = client.get(reverse("judgments:pool-create", args=[project.slug])).content.decode()
    assert selected_set(page) == QUERY_SET and f"Coverage of “{QUERY_SET}”" in page
    assert why_this_set(page).startswith("The query set most of the project's runs answer: 4 of 4 runs")
