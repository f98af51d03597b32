from pathlib import Path

from judgments.ops.imports import import_queries

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = "Import a query set from a CSV, TSV, JSONL or TREC topics file."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", help="the query set's name (default: the file name)")
        parser.add_argument("--description", default="")

    def handle(self, *args, project: str, file: Path, name: str | None, description: str, **options):
        target = self.project(project)
        with importing(file), file.open("rb") as stream:
            collection, warnings = import_queries(target, stream, file.name, name=name or file.stem, description=description)
        self.stdout.write(f"Query set {collection.name!r}: {collection.queries.count()} queries imported.")
        for warning in warnings:
            self.stdout.write(f"  warning: {warning}")
