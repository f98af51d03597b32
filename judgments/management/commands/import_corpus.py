from pathlib import Path

from django.core.management.base import CommandError

from judgments.ops.imports import INPUT_ERRORS, check_upload_size, import_corpus

from ._base import ProjectCommand


class Command(ProjectCommand):
    help = "Import or update corpus documents from a JSONL or CSV file with a doc_id column."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)

    def handle(self, *args, project: str, file: Path, **options):
        target = self.project(project)
        try:
            check_upload_size(file.name, file.stat().st_size)
            with file.open("rb") as stream:
                counts = import_corpus(target, stream, file.name)
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}") from None
        except INPUT_ERRORS as problem:
            raise CommandError(str(problem)) from None
        self.stdout.write(
            f"Corpus of {target.slug}: {counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged."
        )
