from django.core.management.base import BaseCommand

from judgments.ops.imports import clean_uploads


class Command(BaseCommand):
    help = ("Remove stashed uploads no job will import: abandoned ones after UPLOAD_ABANDONED_AFTER_HOURS, failed "
            "jobs' after UPLOAD_FAILED_KEEP_DAYS (the twin of the beat task).")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")

    def handle(self, *args, dry_run: bool = False, **options):
        removed = clean_uploads(dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        for upload in removed:
            self.stdout.write(f"{verb} {upload.name} ({upload.size / 2**20:,.1f} MB): {upload.reason}")
        total = sum(upload.size for upload in removed)
        self.stdout.write(f"{len(removed)} upload(s) {verb}, {total / 2**20:,.1f} MB")
