from pathlib import Path

from judgments.ops.imports import import_run

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = "Validate a TREC (6-column) or JSON run and store it once, immutable, as Parquet."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--system", required=True, help="the search system that produced the run")
        parser.add_argument("--name", help="the run's name (default: the file name)")
        parser.add_argument("--description", default="")

    def handle(self, *args, project: str, file: Path, system: str, name: str | None, description: str, **options):
        target = self.project(project)
        with importing(file):
            run, created = import_run(target, file, file.name, name=name or file.stem, system=system, description=description)
        if not created:
            self.stdout.write(f"These bytes are already stored as run {run.name!r}; nothing new was saved.")
            return
        self.stdout.write(
            f"Run {run.name!r} ({run.system}): {run.n_queries} queries, {run.n_rows} rows, depth {run.depth}, sha256 {run.sha256[:12]}."
        )
