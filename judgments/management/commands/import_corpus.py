from pathlib import Path

from judgments.ops.imports import import_corpus

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = "Import or update corpus documents from a JSONL or CSV file with a doc_id column."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)

    def handle(self, *args, project: str, file: Path, **options):
        target = self.project(project)
        with importing(file), file.open("rb") as stream:
            counts = import_corpus(target, stream, file.name)
        self.stdout.write(
            f"Corpus of {target.slug}: {counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged."
        )
