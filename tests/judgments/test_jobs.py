"""The job lifecycle: queued, running with progress, succeeded or failed, retried, stale."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from judgments import jobs
from judgments.jobs import JOB_KINDS, execute_job, fail_stale_jobs, job_kind, retry_job, start_job
from judgments.models import Job


@pytest.fixture
def flaky_kind():
    """A job kind that fails on its first attempt and succeeds on the next, reporting progress."""

    @job_kind("test.flaky", "Flaky test job")
    def flaky(job, progress):
        progress(1, 2, "halfway")
        if job.attempts == 1:
            raise RuntimeError("the source file vanished")
        progress(2, 2, "done")
        return {"attempt": job.attempts}

    yield "test.flaky"
    JOB_KINDS.pop("test.flaky")


def test_starting_a_job_queues_it_and_hands_it_to_a_worker_on_commit(people, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    assert job.state == Job.State.QUEUED
    assert len(callbacks) == 1


def test_an_unknown_kind_is_refused(people):
    with pytest.raises(ValueError, match="unknown job kind"):
        start_job(kind="no.such.kind", project=people.project, owner=people.lead)


def test_a_job_runs_to_success_with_its_progress_and_result(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    finished = execute_job(job.pk)
    assert finished.state == Job.State.SUCCEEDED
    assert (finished.progress_done, finished.progress_total) == (3, 3)
    assert finished.result["members"] == 3
    assert finished.attempts == 1
    assert finished.started_at and finished.finished_at and finished.worker


def test_a_job_is_claimed_once_even_when_delivered_twice(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    assert execute_job(job.pk) is not None
    assert execute_job(job.pk) is None
    assert Job.objects.get(pk=job.pk).attempts == 1


def test_an_exception_leaves_the_job_failed_with_the_reason_and_it_can_be_retried(people, flaky_kind):
    job = start_job(kind=flaky_kind, project=people.project, owner=people.lead)
    failed = execute_job(job.pk)
    assert failed.state == Job.State.FAILED
    assert failed.error.startswith("RuntimeError: the source file vanished")
    assert failed.progress_message == "halfway"

    assert retry_job(failed)
    queued = Job.objects.get(pk=job.pk)
    assert (queued.state, queued.error, queued.progress_done) == (Job.State.QUEUED, "", 0)

    succeeded = execute_job(job.pk)
    assert succeeded.state == Job.State.SUCCEEDED
    assert succeeded.result == {"attempt": 2}


def test_only_a_failed_job_can_be_retried(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    assert not retry_job(job)
    execute_job(job.pk)
    assert not retry_job(Job.objects.get(pk=job.pk))


def test_a_job_of_a_kind_this_worker_does_not_know_fails_clearly(people):
    job = Job.objects.create(kind="from.the.future", project=people.project, owner=people.lead)
    failed = execute_job(job.pk)
    assert failed.state == Job.State.FAILED
    assert "does not know the job kind 'from.the.future'" in failed.error


def test_a_running_job_whose_worker_went_silent_is_marked_failed(people, settings):
    settings.JOB_STALE_AFTER_SECONDS = 60
    long_ago = timezone.now() - timedelta(seconds=61)
    stale = Job.objects.create(kind="selfcheck", project=people.project, state="running", heartbeat_at=long_ago)
    alive = Job.objects.create(kind="selfcheck", project=people.project, state="running", heartbeat_at=timezone.now())
    assert fail_stale_jobs() == 1
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert stale.state == Job.State.FAILED
    assert "stopped reporting progress for more than 60 s" in stale.error
    assert alive.state == Job.State.RUNNING


def test_a_zombie_run_cannot_overwrite_a_job_that_was_taken_away(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    Job.objects.filter(pk=job.pk).update(state="running", attempts=1)
    job.refresh_from_db()
    Job.objects.filter(pk=job.pk).update(state="failed", error="stale")
    with pytest.raises(jobs.JobCancelled):
        jobs.Progress(job)(1, 3, "still going")


def test_the_run_job_command_runs_a_queued_job(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    call_command("run_job", str(job.uuid))
    assert Job.objects.get(pk=job.pk).state == Job.State.SUCCEEDED
    with pytest.raises(CommandError, match="not queued"):
        call_command("run_job", str(job.uuid))


def test_the_run_job_command_reports_a_failure(people, flaky_kind):
    job = start_job(kind=flaky_kind, project=people.project, owner=people.lead)
    with pytest.raises(CommandError, match="the source file vanished"):
        call_command("run_job", str(job.uuid))


def test_the_fail_stale_jobs_command_is_the_beat_tasks_twin(people, capsys):
    Job.objects.create(kind="selfcheck", project=people.project, state="running", heartbeat_at=timezone.now() - timedelta(days=1))
    call_command("fail_stale_jobs")
    assert "1 stale job(s) marked failed" in capsys.readouterr().out


# --- the views --------------------------------------------------------------------------------


def test_the_self_check_button_starts_a_job_and_shows_its_page(people):
    response = people.client("lead").post(reverse("judgments:selfcheck", args=[people.project.slug]))
    job = Job.objects.get(project=people.project, kind="selfcheck")
    assert response.status_code == 302
    assert response["Location"] == job.get_absolute_url()
    page = people.client("lead").get(job.get_absolute_url())
    assert b"Waiting for a worker" in page.content
    assert b'hx-trigger="every 1s"' in page.content


def test_the_status_fragment_polls_while_running_and_stops_when_done(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    url = reverse("judgments:job-status", args=[people.project.slug, job.uuid])
    client = people.client("viewer")
    running = client.get(url, headers={"HX-Request": "true"})
    assert running.status_code == 200
    assert b"<html" not in running.content
    assert b'hx-trigger="every 1s"' in running.content

    execute_job(job.pk)
    done = client.get(url, headers={"HX-Request": "true"})
    assert done.status_code == 286  # htmx: stop polling
    assert b"Succeeded" in done.content
    assert b"hx-trigger" not in done.content


def test_a_failed_job_shows_its_error_and_a_retry_button_to_leads_only(people, flaky_kind):
    job = start_job(kind=flaky_kind, project=people.project, owner=people.lead)
    execute_job(job.pk)
    lead_page = people.client("lead").get(job.get_absolute_url())
    viewer_page = people.client("viewer").get(job.get_absolute_url())
    assert b"the source file vanished" in lead_page.content
    assert b"Retry" in lead_page.content
    assert b"the source file vanished" in viewer_page.content
    assert b"Retry" not in viewer_page.content


def test_retrying_from_the_page_requeues_the_job(people, flaky_kind):
    job = start_job(kind=flaky_kind, project=people.project, owner=people.lead)
    execute_job(job.pk)
    url = reverse("judgments:job-retry", args=[people.project.slug, job.uuid])
    response = people.client("lead").post(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert b"Waiting for a worker" in response.content
    assert Job.objects.get(pk=job.pk).state == Job.State.QUEUED


def test_the_jobs_page_lists_the_projects_jobs(people):
    start_job(kind="selfcheck", project=people.project, owner=people.lead)
    page = people.client("viewer").get(reverse("judgments:jobs", args=[people.project.slug]))
    assert b"Worker self-check" in page.content
