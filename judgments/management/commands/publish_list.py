from django.core.management.base import BaseCommand, CommandError

from judgments.ops.actions import ActionRefused
from judgments.ops.versions import publish

from ._rounds import add_round_arguments, find_round


class Command(BaseCommand):
    help = "Publish a round's final labels as the next judgment-list version (an immutable snapshot)."

    def add_arguments(self, parser):
        add_round_arguments(parser)
        parser.add_argument("--note", default="", help="what this version is for, in a sentence")
        parser.add_argument("--threshold", type=int, help="qrels exports of the version: grade >= THRESHOLD is relevant")

    def handle(self, *args, round: str, project: str | None, note: str, threshold: int | None, **options):
        found = find_round(round, project)
        try:
            version = publish(found, note=note, threshold=threshold)
        except ActionRefused as refusal:
            raise CommandError(str(refusal)) from None
        self.stdout.write(f"Published {version.lineage.name} v{version.number}: {version.n_pairs} labelled pairs over "
                          f"{version.n_queries} queries, sha256 {version.sha256}")
