import sys
from contextlib import nullcontext
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from judgments.lib.agreement import RULES
from judgments.lib.judgment_formats import RANK_EVAL_METRICS
from judgments.ops import versions
from judgments.ops.judgment_files import FORMATS, SOURCES, ExportOptions, export, export_filename, unrateable_pairs

from ._rounds import add_round_arguments, find_round


class Command(BaseCommand):
    help = "Export a round's judgment list (streamed, from one database snapshot), or a published version of it (--version N)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version N names a judgment-list version: it replaces Django's --version (which prints Django's).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        add_round_arguments(parser)
        parser.add_argument("--version", type=int, dest="list_version", metavar="N",
                            help="export the published version vN of the round's list (qrels, json or consensus-csv), byte for byte")
        parser.add_argument("--format", choices=list(FORMATS), default="qrels")
        parser.add_argument("--consensus", choices=[rule.replace("_", "-") for rule in RULES],
                            help="how several grades become one label (default: the round's rule)")
        parser.add_argument("--threshold", type=int, help="qrels: grade >= THRESHOLD is written as 1, the rest as 0")
        parser.add_argument("--metric", choices=RANK_EVAL_METRICS, default="ndcg", help="rank-eval: the metric")
        parser.add_argument("--k", type=int, default=10, help="rank-eval: the cutoff")
        parser.add_argument("--index", default="products", help="rank-eval: the index the document ids live in")
        parser.add_argument("--field", action="append", dest="fields", help="rank-eval: a field to match the query on (repeat)")
        parser.add_argument("--labels", choices=list(SOURCES), default="human",
                            help="qrels: the raters' labels, an automatic judge's grades, or the raters' with the judge's where they gave none")
        parser.add_argument("--judge", help="qrels: the automatic judge for --labels judge or fill")
        parser.add_argument("--output", type=Path, help="a file, or a folder to write the export's own file name in (default: standard output)")

    def handle(self, *args, round: str, project: str | None, format: str, consensus: str | None, threshold: int | None,
               metric: str, k: int, index: str, fields: list[str] | None, output: Path | None, labels: str, judge: str | None,
               list_version: int | None = None, **options):
        found = find_round(round, project)
        if list_version is not None:
            self._export_version(found, list_version, format, output)
            return
        settings = ExportOptions(rule=consensus.replace("-", "_") if consensus else None, threshold=threshold, metric=metric,
                                 k=k, index=index, fields=tuple(fields or ("title",)), source=labels, judge=judge)
        if labels != "human" and not found.judges.filter(name=judge).exists():
            raise CommandError(f"--labels {labels} needs --judge, the name of one of the round's automatic judges")
        if output is not None and output.is_dir():
            output = output / export_filename(found, format, settings)
        try:
            with output.open("w", encoding="utf-8", newline="") if output else nullcontext(sys.stdout) as handle:
                for chunk in export(found, format, settings):
                    handle.write(chunk)
        except ValueError as problem:
            raise CommandError(str(problem)) from None
        except BrokenPipeError:  # the reader (head, less) stopped early: nothing more to say
            sys.stderr.close()
            return
        left_out = unrateable_pairs(found)
        self.stderr.write(f"Exported round {found.name!r} (guidelines v{found.guidelines.number}) as {format}"
                          + (f" to {output}" if output else "") + f"; {left_out} unrateable pair{'s' * (left_out != 1)} left out.")

    def _export_version(self, round, number: int, format: str, output: Path | None) -> None:
        version = versions.of_lineage(round).filter(number=number).first()
        if version is None:
            raise CommandError(f"round {round.name!r} has no published version v{number}")
        fmt = {"qrels": "qrels", "json": "json", "consensus-csv": "csv"}.get(format)
        if fmt is None:
            raise CommandError("a version exports as --format qrels, json or consensus-csv")
        if output is not None and output.is_dir():
            output = output / versions.filename(version, fmt)
        with output.open("w", encoding="utf-8", newline="") if output else nullcontext(sys.stdout) as handle:
            for chunk in versions.export(version, fmt):
                handle.write(chunk)
        self.stderr.write(f"Exported {version} ({version.n_pairs} labels, sha256 of its file {version.sha256[:12]}) as {fmt}"
                          + (f" to {output}" if output else ""))
