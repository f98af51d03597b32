from pathlib import Path

from django.core.management.base import CommandError

from judgments.ops.imports import INPUT_ERRORS, check_upload_size, import_queries

from ._base import ProjectCommand


class Command(ProjectCommand):
    help = "Import a query set from a CSV, TSV, JSONL or TREC topics file."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", help="the query set's name (default: the file name)")
        parser.add_argument("--description", default="")

    def handle(self, *args, project: str, file: Path, name: str | None, description: str, **options):
        target = self.project(project)
        try:
            check_upload_size(file.name, file.stat().st_size)
            with file.open("rb") as stream:
                collection, warnings = import_queries(target, stream, file.name, name=name or file.stem,
                                                      description=description)
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}") from None
        except INPUT_ERRORS as problem:
            raise CommandError(str(problem)) from None
        self.stdout.write(f"Query set {collection.name!r}: {collection.queries.count()} queries imported.")
        for warning in warnings:
            self.stdout.write(f"  warning: {warning}")
