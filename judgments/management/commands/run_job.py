from django.core.management.base import BaseCommand, CommandError

from judgments.models import Job
from judgments.ops.jobs import execute_job


class Command(BaseCommand):
    help = "Run a queued job in this process (the twin of the run_job Celery task)."

    def add_arguments(self, parser):
        parser.add_argument("job", help="the job's UUID")

    def handle(self, *args, job: str, **options):
        found = Job.objects.filter(uuid=job).first()
        if found is None:
            raise CommandError(f"no job with UUID {job}")
        finished = execute_job(found.pk)
        if finished is None:
            raise CommandError(f"job {job} is {found.state}, not queued: nothing to run")
        self.stdout.write(f"job {job}: {finished.state}")
        if finished.state == Job.State.FAILED:
            raise CommandError(finished.error)
