from celery import shared_task
from django.db import OperationalError

from .ops import imports, jobs


# Only the claim can raise OperationalError here (a locked SQLite file, a dropped connection):
# execute_job records every failure of the job's own work on the job itself.
@shared_task(autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def run_job(job_id: int) -> None:
    jobs.execute_job(job_id)


@shared_task
def run_judge_chunks(job_id: int) -> int:
    """Take chunks of a running judge run until none is left (`judge_runs.work_on`)."""
    from .ops import judge_runs

    return judge_runs.work_on(job_id)


@shared_task
def recover_stale_jobs() -> dict:
    return vars(jobs.recover_stale_jobs())


@shared_task
def clean_uploads() -> int:
    return len(imports.clean_uploads())


@shared_task
def check_due_health() -> int:
    from .ops import health

    return len(health.check_due())


@shared_task
def notify_health(check_id: int, keys: list[str]) -> None:
    from .ops import health

    health.notify(check_id, keys)


@shared_task
def prune_labels_changes() -> int:
    from .ops.judgment_files import prune_labels_changes

    return prune_labels_changes()


@shared_task
def delete_expired_runs() -> int:
    from .ops.removal import delete_expired_runs

    return len(delete_expired_runs().deleted)


@shared_task(bind=True, max_retries=None)
def deliver_webhook(self, delivery_id: int) -> None:
    """One try of a job webhook's delivery; again later (Celery's retry, with a growing wait) while it asks to be.
    The attempts are counted on the delivery itself, which bounds them (WEBHOOK_MAX_ATTEMPTS)."""
    from .ops import webhooks

    if webhooks.deliver(delivery_id):
        raise self.retry(countdown=webhooks.retry_wait(self.request.retries))
