"""The job lifecycle: queued, running with progress, succeeded or failed, retried, stale."""

import importlib
import logging
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from evaluation.engine import EngineInputError
from judgments.lib.fileformats import FileProblem
from judgments.lib.querylog import LogProblem
from judgments.models import Job
from judgments.ops import jobs
from judgments.ops.actions import ActionRefused
from judgments.ops.jobs import JOB_KINDS, execute_job, job_kind, recover_stale_jobs, retry_job, start_job


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


@pytest.fixture
def bad_input_kind():
    """A job kind that fails on a bad input file, the way the import jobs do."""

    @job_kind("test.bad_input", "Bad input test job")
    def bad_input(job, progress):
        raise FileProblem("queries.csv", "query_id 'q1' was already used on line 2", line=3)

    yield "test.bad_input"
    JOB_KINDS.pop("test.bad_input")


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
    assert failed.error.startswith("An unexpected error (RuntimeError) stopped the job.")
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


def running_job(people, *, silent_for: float, attempts: int = 1, **fields) -> Job:
    """A job some worker claimed `attempts` times, whose heartbeat is `silent_for` seconds old."""
    return Job.objects.create(kind="selfcheck", project=people.project, owner=people.lead, state="running", attempts=attempts,
                              worker="dead-host:4242", heartbeat_at=timezone.now() - timedelta(seconds=silent_for), **fields)


def test_a_running_job_whose_worker_went_silent_is_queued_again_with_its_params(people, settings,
                                                                                 django_capture_on_commit_callbacks):
    settings.JOB_STALE_AFTER_SECONDS = 60
    stale = running_job(people, silent_for=61, params={"pause": 0.5}, progress_done=2, progress_total=3,
                        progress_message="Reading it back")
    alive = running_job(people, silent_for=1)
    with django_capture_on_commit_callbacks() as callbacks:
        assert recover_stale_jobs() == jobs.Recovered(queued_again=1, failed=0)
    assert len(callbacks) == 1  # handed to a worker, as Retry does
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert (stale.state, stale.params, stale.attempts, stale.error) == (Job.State.QUEUED, {"pause": 0.5}, 1, "")
    assert (stale.progress_done, stale.progress_message, stale.heartbeat_at) == (0, "", None)
    assert alive.state == Job.State.RUNNING

    retried = execute_job(stale.pk)
    assert (retried.state, retried.attempts) == (Job.State.SUCCEEDED, 2)
    assert retried.worker != "dead-host:4242"


def test_a_dead_workers_job_tried_job_max_attempts_times_fails_saying_so(people, settings):
    settings.JOB_STALE_AFTER_SECONDS, settings.JOB_MAX_ATTEMPTS = 60, 3
    last_try = running_job(people, silent_for=61, attempts=3)
    second_try = running_job(people, silent_for=61, attempts=2)
    assert recover_stale_jobs() == jobs.Recovered(queued_again=1, failed=1)
    last_try.refresh_from_db()
    assert last_try.state == Job.State.FAILED and last_try.finished_at
    assert last_try.error == ("The job was tried 3 times (JOB_MAX_ATTEMPTS is 3); the last time, its worker went silent for "
                              "more than 60 s (it was probably killed or its machine restarted). Retry the job.")
    assert Job.objects.get(pk=second_try.pk).state == Job.State.QUEUED


def test_a_zombie_run_cannot_overwrite_a_job_that_was_taken_away(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    Job.objects.filter(pk=job.pk).update(state="running", attempts=1)
    job.refresh_from_db()
    Job.objects.filter(pk=job.pk).update(state="failed", error="stale")
    with pytest.raises(jobs.JobCancelled):
        jobs.Progress(job)(1, 3, "still going")


def test_the_old_run_of_a_job_queued_again_and_claimed_elsewhere_can_change_nothing(people, settings):
    settings.JOB_STALE_AFTER_SECONDS = 60
    stale = running_job(people, silent_for=61)
    old_run = Job.objects.get(pk=stale.pk)
    recover_stale_jobs()
    Job.objects.filter(pk=stale.pk).update(state="running", attempts=2, heartbeat_at=timezone.now())  # another worker's claim
    with pytest.raises(jobs.JobCancelled):
        jobs.Progress(old_run)(3, 3, "done")
    jobs._finish(old_run, Job.State.SUCCEEDED, result={"from": "the old run"})
    assert jobs.running_here(old_run).update(heartbeat_at=timezone.now()) == 0
    now = Job.objects.get(pk=stale.pk)
    assert (now.state, now.attempts, now.result) == (Job.State.RUNNING, 2, None)


@pytest.fixture
def slow_step_kind():
    """A job kind with one long step and no progress report during it; it returns its heartbeat as seen at the end."""

    @job_kind("test.slow_step", "Slow step test job")
    def slow_step(job, progress):
        time.sleep(0.6)
        return {"heartbeat_at": Job.objects.get(pk=job.pk).heartbeat_at.isoformat()}

    yield "test.slow_step"
    JOB_KINDS.pop("test.slow_step")


@pytest.mark.django_db(transaction=True)  # the heartbeat's thread has its own connection: it sees committed rows only
def test_a_long_step_without_progress_keeps_its_heartbeat_fresh_from_a_thread(settings, slow_step_kind):
    from tests.factory import make_project, make_user

    settings.JOB_STALE_AFTER_SECONDS = 0.2  # a beat every 0.05 s
    lead = make_user("lena")
    job = start_job(kind=slow_step_kind, project=make_project(lead), owner=lead)
    finished = execute_job(job.pk)
    assert finished.state == Job.State.SUCCEEDED
    seen_at_the_end = timezone.datetime.fromisoformat(finished.result["heartbeat_at"])
    assert seen_at_the_end - finished.started_at > timedelta(seconds=0.4)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("heartbeat of job")]


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_once_the_job_is_taken_away_and_the_run_learns_it_at_its_next_report(settings, caplog):
    from tests.factory import make_project, make_user

    settings.JOB_STALE_AFTER_SECONDS = 0.2
    taken_at = {}

    @job_kind("test.taken_away", "Taken away test job")
    def taken_away(job, progress):
        Job.objects.filter(pk=job.pk).update(state="queued", heartbeat_at=None)  # recovered as stale meanwhile
        taken_at["time"] = timezone.now()
        time.sleep(0.3)
        progress(1, 1, "done")

    lead = make_user("lena")
    job = start_job(kind="test.taken_away", project=make_project(lead), owner=lead)
    try:
        outcome = execute_job(job.pk)
    finally:
        JOB_KINDS.pop("test.taken_away")
    after = Job.objects.get(pk=job.pk)
    assert outcome is not None and (after.state, after.heartbeat_at, after.result) == (Job.State.QUEUED, None, None)
    assert f"job {job.uuid} was taken away while running" in caplog.text


def test_the_run_job_command_runs_a_queued_job(people):
    job = start_job(kind="selfcheck", project=people.project, owner=people.lead)
    call_command("run_job", str(job.uuid))
    assert Job.objects.get(pk=job.pk).state == Job.State.SUCCEEDED
    with pytest.raises(CommandError, match="not queued"):
        call_command("run_job", str(job.uuid))


def test_the_run_job_command_reports_a_failure(people, flaky_kind):
    job = start_job(kind=flaky_kind, project=people.project, owner=people.lead)
    with pytest.raises(CommandError, match=f"unexpected error \\(RuntimeError\\).* under job {job.uuid}"):
        call_command("run_job", str(job.uuid))


def test_the_run_job_command_reports_a_bad_input_with_its_whole_message(people, bad_input_kind):
    job = start_job(kind=bad_input_kind, project=people.project, owner=people.lead)
    with pytest.raises(CommandError) as failure:
        call_command("run_job", str(job.uuid))
    assert str(failure.value) == "queries.csv:3: query_id 'q1' was already used on line 2"


def test_the_recover_stale_jobs_command_is_the_beat_tasks_twin(people, settings, capsys):
    settings.JOB_MAX_ATTEMPTS = 2
    running_job(people, silent_for=86400)
    running_job(people, silent_for=86400, attempts=2)
    call_command("recover_stale_jobs")
    assert "1 stale job(s) queued again, 1 failed" in capsys.readouterr().out


def test_beat_sends_the_task_that_recovers_stale_jobs(people):
    from judgments.tasks import recover_stale_jobs as task

    assert settings.CELERY_BEAT_SCHEDULE["recover-stale-jobs"]["task"] == task.name
    running_job(people, silent_for=86400)
    assert task() == {"queued_again": 1, "failed": 0}


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


def test_a_failed_job_shows_its_error_and_a_retry_button_to_leads_only(people, bad_input_kind):
    job = start_job(kind=bad_input_kind, project=people.project, owner=people.lead)
    execute_job(job.pk)
    lead_page = people.client("lead").get(job.get_absolute_url())
    viewer_page = people.client("viewer").get(job.get_absolute_url())
    assert b"was already used on line 2" in lead_page.content
    assert b"Retry" in lead_page.content
    assert b"was already used on line 2" in viewer_page.content
    assert b"Retry" not in viewer_page.content


def job_pages(people, job) -> dict[str, str]:
    """The job's page and its progress fragment, as the lead and a viewer get them."""
    status = reverse("judgments:job-status", args=[people.project.slug, job.uuid])
    return {f"{who} {what}": people.client(who).get(url, headers=headers).content.decode()
            for who in ("lead", "viewer")
            for what, url, headers in (("page", job.get_absolute_url(), {}), ("fragment", status, {"HX-Request": "true"}))}


def assert_no_traceback(page: str) -> None:
    assert "Traceback" not in page and 'File "' not in page and '.py"' not in page
    assert str(settings.BASE_DIR) not in page and "site-packages" not in page


def test_an_input_error_shows_its_message_and_no_traceback_to_every_member(people, bad_input_kind):
    job = start_job(kind=bad_input_kind, project=people.project, owner=people.lead)
    failed = execute_job(job.pk)
    assert failed.error == "queries.csv:3: query_id 'q1' was already used on line 2"
    for name, page in job_pages(people, job).items():
        assert "queries.csv:3: query_id &#x27;q1&#x27; was already used on line 2" in page, name
        assert "FileProblem" not in page, name
        assert_no_traceback(page)


@pytest.mark.parametrize("problem", [
    ActionRefused("The pool has no pairs whose documents are in the corpus: nothing to judge."),
    LogProblem("log.csv", "more than 1% of the rows are bad (3 of 7)", line=7),
    EngineInputError("expected 6 columns, found 5", path="bm25.run", line=2),
    ValidationError(["Choose a round.", "Pick at least one run."]),
])
def test_every_kind_of_input_error_keeps_only_its_message(people, problem):
    @job_kind("test.refused", "Refused test job")
    def refused(job, progress):
        raise problem

    try:
        failed = execute_job(start_job(kind="test.refused", project=people.project, owner=people.lead).pk)
    finally:
        JOB_KINDS.pop("test.refused")
    expected = " ".join(problem.messages) if isinstance(problem, ValidationError) else str(problem)
    assert failed.error == expected


def test_an_unexpected_error_shows_members_an_id_and_logs_the_traceback(people, caplog):
    @job_kind("test.broken", "Broken test job")
    def broken(job, progress):
        open(f"{settings.BASE_DIR}/var/no/such/file.parquet")  # the message names a server path

    try:
        with caplog.at_level(logging.ERROR, logger="judgments.ops.jobs"):
            job = start_job(kind="test.broken", project=people.project, owner=people.lead)
            failed = execute_job(job.pk)
    finally:
        JOB_KINDS.pop("test.broken")
    assert failed.error == (f"An unexpected error (FileNotFoundError) stopped the job. The worker's log has the details "
                            f"under job {job.uuid}: quote this id to whoever runs Verdict.")
    for name, page in job_pages(people, job).items():
        assert str(job.uuid) in page and "FileNotFoundError" in page, name
        assert "no/such/file.parquet" not in page, name
        assert_no_traceback(page)
    [record] = [r for r in caplog.records if r.name == "judgments.ops.jobs"]
    assert str(job.uuid) in record.getMessage() and record.exc_info
    assert "Traceback" in caplog.text and "no/such/file.parquet" in caplog.text


def test_a_long_message_is_cut_where_the_page_would_drown_in_it(people):
    @job_kind("test.verbose", "Verbose test job")
    def verbose(job, progress):
        raise FileProblem("ids.txt", "an id " + "x" * 100_000 + " is too long", line=1)

    try:
        failed = execute_job(start_job(kind="test.verbose", project=people.project, owner=people.lead).pk)
    finally:
        JOB_KINDS.pop("test.verbose")
    assert failed.error.startswith("ids.txt:1: an id xxx") and failed.error.endswith("…")
    assert len(failed.error) == jobs.ERROR_MAX_CHARS


def test_a_stale_job_out_of_attempts_keeps_its_message_and_can_be_retried(people, settings):
    settings.JOB_STALE_AFTER_SECONDS, settings.JOB_MAX_ATTEMPTS = 60, 1
    stale = running_job(people, silent_for=61)
    recover_stale_jobs()
    page = people.client("viewer").get(stale.get_absolute_url()).content.decode()
    assert "the last time, its worker went silent for more than 60 s" in page
    people.client("lead").post(reverse("judgments:job-retry", args=[people.project.slug, stale.uuid]))
    assert execute_job(stale.pk).state == Job.State.SUCCEEDED


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


def test_the_migration_keeps_only_the_message_of_jobs_that_failed_with_a_traceback(people):
    from django.apps import apps

    migration = importlib.import_module("judgments.migrations.0008_round_version")
    frames = ('Traceback (most recent call last):\n  File "/srv/verdict/judgments/jobs.py", line 134, in execute_job\n'
              "    result = kind.function(job, Progress(job)) or {}\n")
    stale = ("The worker running this job stopped reporting progress for more than 600 s (it was probably killed or its "
             "machine restarted). Retry the job.")
    errors = {
        "bad file": "FileProblem: queries.csv:3: query_id 'q1' was already used on line 2\n\n" + frames + "FileProblem: ...\n",
        "refused": "PoolRefused: These runs belong to another project: bm25.\n\n" + frames,
        "crash": "FileNotFoundError: [Errno 2] No such file or directory: '/srv/verdict/var/media/uploads/q.csv'\n\n" + frames,
        "stale": stale,
    }
    jobs_ = {name: Job.objects.create(kind="selfcheck", project=people.project, state="failed", error=error)
             for name, error in errors.items()}
    migration.drop_tracebacks(apps, schema_editor=None)
    after = {name: Job.objects.get(pk=job.pk).error for name, job in jobs_.items()}
    assert after == {
        "bad file": "queries.csv:3: query_id 'q1' was already used on line 2",
        "refused": "These runs belong to another project: bm25.",
        "crash": jobs.unexpected_failure(jobs_["crash"], FileNotFoundError()),  # what failing jobs store now
        "stale": stale,
    }
