from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from judgments.lib.judgment_formats import JudgmentFileProblem
from judgments.ops.judgment_files import import_judgments

from ._rounds import add_round_arguments, find_round


class Command(BaseCommand):
    help = "Import TREC qrels, a JSON judgment list or Quepid CSV into a round (with --dry-run: only say what would change)."

    def add_arguments(self, parser):
        add_round_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--rater", help="the lead or rater of the project the grades are attributed to "
                                             "(default: 'imported'; Quepid CSV: each column's rater)")
        parser.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")

    def handle(self, *args, round: str, file: Path, project: str | None, rater: str | None, dry_run: bool, **options):
        found = find_round(round, project)
        try:
            with file.open("rb") as stream:
                report = import_judgments(found, stream, file.name, rater=rater, dry_run=dry_run)
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}") from None
        except (JudgmentFileProblem, ValueError) as problem:
            raise CommandError(str(problem)) from None
        self.stdout.write(report.summary + (" (dry run: nothing changed)" if dry_run else "") + ".")
