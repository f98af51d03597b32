"""Evaluations pinned to a published judgment-list version: the form field, the recorded version, the
`evaluate --version N` command, and refusals."""

import hashlib

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Judgment
from judgments.ops import versions
from tests.evaluation.test_evaluations import evaluated, setup  # noqa: F401 (the fixture)
from tests.factory import make_round

pytestmark = pytest.mark.django_db


def test_an_evaluation_against_a_version_keeps_its_labels_after_the_round_changes(people, setup):  # noqa: F811
    round, run_a, run_b, _ = setup
    live_before = evaluated(people, round, [run_a, run_b])
    version = versions.publish(round, user=people.lead)
    Judgment.objects.filter(item__query__query_id="h1").update(grade=0)  # the round moves on
    pinned = evaluated(people, round, [run_a, run_b], list_version=version.uuid)
    live_after = evaluated(people, round, [run_a, run_b])
    assert pinned.list_version == version and live_after.list_version is None
    assert pinned.labels_sha256 == hashlib.sha256("".join(versions.export(version, "qrels")).encode()).hexdigest()
    assert pinned.labels_sha256 == live_before.labels_sha256 != live_after.labels_sha256
    assert pinned.results["runs"][0]["mean"] == live_before.results["runs"][0]["mean"]
    assert pinned.results["runs"][0]["mean"]["nDCG@5"] != live_after.results["runs"][0]["mean"]["nDCG@5"]
    page = people.client("lead").get(pinned.get_absolute_url()).content.decode()
    assert f"version v{version.number}" in page and version.get_absolute_url() in page


def test_the_evaluate_command_takes_a_version_number(people, setup, capsys):  # noqa: F811
    round, *_ = setup
    version = versions.publish(round)
    call_command("evaluate", "Round", "--runs", "A", "--measures", "AP", "--version", "1")
    assert f"Labels of the published version v1 (sha256 {version.sha256[:12]})" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no published version v2"):
        call_command("evaluate", "Round", "--runs", "A", "--measures", "AP", "--version", "2")


def test_the_form_refuses_a_version_of_another_rounds_list(people, setup):  # noqa: F811
    round, run_a, _, _ = setup
    other = make_round(people.project, people.lead, [people.rater], {"h1": ["h1-d1"]}, name="Other")
    from judgments.ops import grading
    from judgments.ops.grading import Verdict

    grading.record(other.items.select_related("round").get(), people.rater, Verdict(grade=1))
    foreign = versions.publish(other)
    form = {"round": round.uuid, "runs": [run_a.uuid], "measures": "AP", "relevance_level": "1", "list_version": foreign.uuid}
    response = people.client("lead").post(reverse("evaluation:evaluation-create", args=[round.project.slug]), form)
    assert response.status_code == 200 and "a version of another round" in response.content.decode()
