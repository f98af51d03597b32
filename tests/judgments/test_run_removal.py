"""Deleting runs, answer runs and evaluations from their pages, promoting a gate run, and the retention setting
on the project settings page (the API's side is in tests/api/test_deletes.py)."""

from datetime import timedelta

import pytest
from django.urls import reverse

from evaluation.models import Evaluation
from judgments.models import AnswerRun, Project, StoredRun
from judgments.ops.imports import import_run
from tests.api import bodies
from tests.api.conftest import build
from tests.factory import make_answer_run, make_pool, trec_run


def gate_run(project, name="CI candidate") -> StoredRun:
    run, _ = import_run(project, trec_run({"q1": ["d1", name]}), "gate.run", name=name, system="ranker", origin=StoredRun.Origin.GATE)
    return run


def test_a_lead_deletes_an_unused_run_from_its_page(people, django_capture_on_commit_callbacks):
    run = gate_run(people.project)
    with django_capture_on_commit_callbacks(execute=True):
        response = people.client("lead").post(reverse("judgments:run-delete", args=[people.project.slug, run.uuid]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("judgments:runs", args=[people.project.slug])
    assert "“CI candidate” deleted" in response.content.decode()
    assert not StoredRun.objects.filter(pk=run.pk).exists()


def test_a_run_in_a_pool_is_kept_and_its_page_says_why(people):
    pool = make_pool(people.project, {"q1": ["d1", "d2"]})
    run = pool.runs.get()
    response = people.client("lead").post(reverse("judgments:run-delete", args=[people.project.slug, run.uuid]), follow=True)
    assert response.redirect_chain[-1][0] == run.get_absolute_url()
    assert "is used by pool “Pool”: delete those first" in response.content.decode()
    assert StoredRun.objects.filter(pk=run.pk).exists()


def test_the_run_page_offers_promote_and_delete_to_leads_only(people):
    run = gate_run(people.project)
    Project.objects.filter(pk=people.project.pk).update(gate_run_days=30)
    page = people.client("lead").get(run.get_absolute_url()).content.decode()
    assert "Promote: keep for good" in page and "Delete “CI candidate”" in page
    assert f'expires on <time datetime="{run.uploaded_at + timedelta(days=30):%Y-%m-%d}' in page
    viewer_page = people.client("viewer").get(run.get_absolute_url()).content.decode()
    assert "Promote" not in viewer_page and "Delete" not in viewer_page
    people.client("lead").post(reverse("judgments:run-promote", args=[people.project.slug, run.uuid]))
    run.refresh_from_db()
    assert run.promoted_at is not None and run.expires_at is None
    assert "kept for good" in people.client("lead").get(run.get_absolute_url()).content.decode()


def test_the_runs_list_says_when_each_gate_run_expires(people):
    run = gate_run(people.project)
    gate_run(people.project, "promoted").promote()
    import_run(people.project, trec_run({"q1": ["d3"]}), "u.run", name="uploaded", system="x")
    Project.objects.filter(pk=people.project.pk).update(gate_run_days=10)
    page = people.client("viewer").get(reverse("judgments:runs", args=[people.project.slug])).content.decode()
    assert page.count("CI gate run: expires on") == 1 and str((run.uploaded_at + timedelta(days=10)).date()) in page


def test_the_settings_page_sets_the_retention(people):
    project = Project.objects.get(pk=people.project.pk)
    url = reverse("judgments:project-settings", args=[project.slug])
    form = {"name": project.name, "slug": project.slug, "description": "", "version": project.version}
    people.client("lead").post(url, {**form, "gate_run_days": "21"})
    assert Project.objects.get(pk=project.pk).gate_run_days == 21
    response = people.client("lead").post(url, {**form, "version": project.version + 1, "gate_run_days": "0"})
    assert "gate_run_days" in response.context["form"].errors
    people.client("lead").post(url, {**form, "version": project.version + 1, "gate_run_days": ""})
    assert Project.objects.get(pk=project.pk).gate_run_days is None


def test_an_answer_run_and_an_evaluation_are_deleted_from_their_pages(people):
    world = build(people)
    bodies.evaluation(world)
    evaluation = Evaluation.objects.get(uuid=world.objects["evaluation"])
    lead = people.client("lead")
    response = lead.post(reverse("evaluation:evaluation-delete", args=[people.project.slug, evaluation.uuid]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("evaluation:evaluations", args=[people.project.slug])
    assert not Evaluation.objects.filter(pk=evaluation.pk).exists()
    answers = make_answer_run(people.project, {"q1": "Another answer"}, name="to delete")
    lead.post(reverse("judgments:answer-run-delete", args=[people.project.slug, answers.uuid]))
    assert not AnswerRun.objects.filter(pk=answers.pk).exists()


@pytest.mark.parametrize("who, status", [("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_leads_delete_answer_runs_and_evaluations(people, who, status):
    world = build(people)
    bodies.evaluation(world)
    client = people.client(who)
    slug = people.project.slug
    assert client.post(reverse("evaluation:evaluation-delete", args=[slug, world.objects["evaluation"]])).status_code == status
    assert client.post(reverse("judgments:answer-run-delete", args=[slug, world.objects["answer_run"]])).status_code == status
    assert client.get(reverse("judgments:answer-run-delete", args=[slug, world.objects["answer_run"]])).status_code in (404, 405)
    assert Evaluation.objects.filter(uuid=world.objects["evaluation"]).exists()
    assert AnswerRun.objects.filter(uuid=world.objects["answer_run"]).exists()
