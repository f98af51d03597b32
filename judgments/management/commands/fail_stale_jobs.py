from django.core.management.base import BaseCommand

from judgments.jobs import fail_stale_jobs


class Command(BaseCommand):
    help = "Mark running jobs whose worker stopped reporting as failed (the twin of the beat task)."

    def handle(self, *args, **options):
        self.stdout.write(f"{fail_stale_jobs()} stale job(s) marked failed")
