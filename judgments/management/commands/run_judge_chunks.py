from django.core.management.base import BaseCommand, CommandError

from judgments.models import Job
from judgments.ops.judge_runs import work_on


class Command(BaseCommand):
    help = ("Grade chunks of a running judge run in this process until none is left (the twin of the run_judge_chunks "
            "Celery task): one more worker for a large run.")

    def add_arguments(self, parser):
        parser.add_argument("job", help="the run's job UUID")

    def handle(self, *args, job: str, **options):
        found = Job.objects.filter(uuid=job, kind="run_judge").first()
        if found is None:
            raise CommandError(f"no judge run with UUID {job}")
        taken = work_on(found.pk)
        self.stdout.write(f"job {job}: {taken} chunk{'s' if taken != 1 else ''} graded here"
                          + ("" if taken else f" (the job is {found.state}; no chunk was waiting)"))
