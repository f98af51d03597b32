from pathlib import Path

from judgments.ops.answers import AnswerRunExists, import_answer_run
from judgments.ops.imports import INPUT_ERRORS

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = ('Validate generated answers (JSONL {"query_id", "answer", "cites"} or TSV query_id<TAB>answer) and store them '
            "once, immutable, as an answer run (Parquet).")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--system", required=True, help="the system that generated the answers")
        parser.add_argument("--name", help="the answer run's name (default: the file name without its extension)")
        parser.add_argument("--description", default="")

    def handle(self, *args, project: str, file: Path, system: str, name: str | None, description: str, **options):
        target = self.project(project)
        with importing(file, errors=(AnswerRunExists, *INPUT_ERRORS)):
            run = import_answer_run(target, file, name=name or file.stem, system=system, description=description)
        self.stdout.write(f"Answer run {run.name!r} ({run.system}): {run.n_queries} answers, {run.n_citing} citing documents, "
                          f"sha256 {run.sha256[:12]}.")
