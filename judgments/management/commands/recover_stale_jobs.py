from django.core.management.base import BaseCommand

from judgments.ops.jobs import recover_stale_jobs


class Command(BaseCommand):
    help = ("Queue again the running jobs whose worker went silent, or fail those tried JOB_MAX_ATTEMPTS times "
            "(the twin of the beat task).")

    def handle(self, *args, **options):
        recovered = recover_stale_jobs()
        self.stdout.write(f"{recovered.queued_again} stale job(s) queued again, {recovered.failed} failed")
