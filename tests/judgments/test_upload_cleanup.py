"""Stashed uploads no job will import are removed on a schedule: abandoned ones after UPLOAD_ABANDONED_AFTER_HOURS,
a failed job's UPLOAD_FAILED_KEEP_DAYS after the failure (its retry is then refused clearly); the upload of a
queued or running job never. Fake clocks: the files' times are set, and `now` is passed in."""

import io
import os
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import InMemoryStorage, default_storage
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from judgments import tasks
from judgments.models import Job
from judgments.ops.imports import clean_uploads, stash_upload
from judgments.ops.jobs import RetryRefused, mark_upload_removed, retry_job
from tests.factory import upload

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def stash(people, age: timedelta, name: str = "log.csv") -> str:
    """An upload stashed `age` before NOW (its file's time set back)."""
    stashed = stash_upload(people.project, upload(name, b"query\ntent\n"))
    moment = (NOW - age).timestamp()
    os.utime(default_storage.path(stashed), (moment, moment))
    return stashed


def job_for(people, stashed: str, state: str, failed_ago: timedelta | None = None) -> Job:
    finished = NOW - failed_ago if failed_ago is not None else None
    return Job.objects.create(kind="import_corpus", project=people.project, owner=people.lead, state=state,
                              params={"upload": stashed}, finished_at=finished)


def test_an_abandoned_upload_goes_after_a_day_with_its_folder(people):
    old, fresh = stash(people, timedelta(hours=25)), stash(people, timedelta(hours=23))

    removed = clean_uploads(now=NOW)

    assert [(r.name, r.size, r.reason) for r in removed] == [(old, 11, "no job imports it and it is more than 24 hours old")]
    assert not default_storage.exists(old) and default_storage.exists(fresh)
    assert not os.path.exists(default_storage.path(old.rsplit("/", 1)[0]))


def test_the_upload_of_a_queued_or_running_job_is_never_removed(people):
    queued, running = stash(people, timedelta(days=400)), stash(people, timedelta(days=400))
    job_for(people, queued, Job.State.QUEUED)
    job_for(people, running, Job.State.RUNNING)

    assert clean_uploads(now=NOW) == []
    assert default_storage.exists(queued) and default_storage.exists(running)


def test_a_failed_jobs_upload_is_kept_a_week_for_a_retry_then_removed(people):
    stashed = stash(people, timedelta(days=30))
    job = job_for(people, stashed, Job.State.FAILED, failed_ago=timedelta(days=6, hours=23))

    assert clean_uploads(now=NOW) == []
    removed = clean_uploads(now=NOW + timedelta(hours=2))

    assert [r.reason for r in removed] == ["its job failed more than 7 days ago"]
    assert not default_storage.exists(stashed)
    job.refresh_from_db()
    assert job.params[Job.UPLOAD_REMOVED].startswith((NOW + timedelta(hours=2)).date().isoformat())


def test_a_job_whose_upload_was_removed_refuses_a_retry_and_says_why(people):
    job = job_for(people, stash(people, timedelta(days=30)), Job.State.FAILED, failed_ago=timedelta(days=8))
    clean_uploads(now=NOW)

    with pytest.raises(RetryRefused, match=r"Its uploaded file log\.csv was removed on .*: the uploads of failed jobs are kept 7 days"):
        retry_job(job)
    client = people.client("lead")
    page = client.get(job.get_absolute_url()).content.decode()
    assert "Upload it again to import it." in page and ">Retry<" not in page
    answer = client.post(reverse("judgments:job-retry", args=[people.project.slug, job.uuid]), follow=True).content.decode()
    assert "was removed on" in answer
    assert Job.objects.get(pk=job.pk).state == Job.State.FAILED


def test_a_retry_that_came_first_keeps_the_upload(people):
    stashed = stash(people, timedelta(days=30))
    job = job_for(people, stashed, Job.State.FAILED, failed_ago=timedelta(days=8))
    stale_copy = Job.objects.get(pk=job.pk)
    assert retry_job(job)

    assert not mark_upload_removed(stale_copy, NOW)  # what the cleanup does before it deletes
    assert clean_uploads(now=NOW) == []
    assert default_storage.exists(stashed)


def test_a_succeeded_jobs_leftover_upload_is_abandoned(people):
    stashed = stash(people, timedelta(hours=30))
    job_for(people, stashed, Job.State.SUCCEEDED)

    assert [r.name for r in clean_uploads(now=NOW)] == [stashed]


def test_the_limits_are_settings(people, settings):
    settings.UPLOAD_ABANDONED_AFTER_HOURS, settings.UPLOAD_FAILED_KEEP_DAYS = 2, 1
    abandoned = stash(people, timedelta(hours=3))
    failed = stash(people, timedelta(hours=3), "runs.txt")
    job_for(people, failed, Job.State.FAILED, failed_ago=timedelta(days=1, hours=1))

    assert {r.name for r in clean_uploads(now=NOW)} == {abandoned, failed}


def test_a_dry_run_lists_what_would_go_and_changes_nothing(people):
    old = stash(people, timedelta(days=2))
    job = job_for(people, stash(people, timedelta(days=30)), Job.State.FAILED, failed_ago=timedelta(days=8))

    assert len(clean_uploads(now=NOW, dry_run=True)) == 2
    assert default_storage.exists(old)
    job.refresh_from_db()
    assert Job.UPLOAD_REMOVED not in job.params


def test_the_command_prints_what_it_removed_and_dry_runs(people):
    old = stash(people, timedelta(days=2))
    dry, real = io.StringIO(), io.StringIO()

    call_command("clean_uploads", "--dry-run", stdout=dry)
    assert f"would remove {old} (0.0 MB): no job imports it" in dry.getvalue()
    assert default_storage.exists(old)
    call_command("clean_uploads", stdout=real)
    assert f"removed {old}" in real.getvalue() and "1 upload(s) removed" in real.getvalue()
    assert not default_storage.exists(old)


def test_the_beat_task_runs_the_cleanup_every_hour(people):
    stash(people, timedelta(days=2))
    assert django_settings.CELERY_BEAT_SCHEDULE["clean-uploads"] == {"task": "judgments.tasks.clean_uploads", "schedule": 3600.0}
    assert tasks.clean_uploads() == 1


def test_it_works_through_the_storage_api_alone(people):
    storage = InMemoryStorage()
    kept = storage.save(f"uploads/{people.project.slug}/{'a' * 32}/queries.csv", ContentFile(b"q"))
    left = storage.save(f"uploads/{people.project.slug}/{'b' * 32}/log.csv", ContentFile(b"q"))
    job_for(people, kept, Job.State.QUEUED)

    removed = clean_uploads(now=timezone.now() + timedelta(days=2), storage=storage)

    assert [r.name for r in removed] == [left]
    assert storage.exists(kept) and not storage.exists(left)


def test_the_mapping_page_of_a_removed_log_upload_says_what_happened(people):
    stashed = stash(people, timedelta(days=2))
    clean_uploads(now=NOW)
    response = people.client("lead").get(reverse("judgments:query-log-map", args=[people.project.slug, stashed.split("/")[-2]]))
    assert response.status_code == 404
