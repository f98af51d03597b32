from django.core.management.base import BaseCommand

from judgments.ops.removal import delete_expired_runs


class Command(BaseCommand):
    help = ("Delete the runs the CI gate uploaded that are past their project's retention, not promoted and used by "
            "nothing (the twin of the beat task).")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="only list what would be deleted")

    def handle(self, *args, dry_run: bool = False, **options):
        sweep = delete_expired_runs(dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        for name in sweep.deleted:
            self.stdout.write(f"{verb} {name}")
        for reason in sweep.kept:
            self.stdout.write(f"kept {reason}")
        self.stdout.write(f"{len(sweep.deleted)} expired run(s) {verb}, {len(sweep.kept)} kept because in use")
