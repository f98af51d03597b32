from pathlib import Path

from judgments.lib.querylog import ColumnMapping, LogProblem, Normalization
from judgments.ops.log_sampling import import_query_log, new_log_name

from ._base import ProjectCommand, importing


class Command(ProjectCommand):
    help = ("Import a query log (CSV, TSV, JSONL or Parquet, optionally .gz): normalise, drop personal data, "
            "count per query, segment and day. Only the counts are kept, not the file.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", help="the log's name (default: the file name)")
        parser.add_argument("--query-column", default="query", help="column with the query text (default: query)")
        parser.add_argument("--time-column", help="column with the timestamp (needed for a time window)")
        parser.add_argument("--count-column", help="column with a count per row (default: each row counts 1)")
        parser.add_argument("--segment-column", action="append", default=[], dest="segments",
                            help="a segment column such as language or device (repeat for several)")
        for step in ("nfkc", "casefold", "collapse-whitespace", "trim-punctuation"):
            parser.add_argument(f"--no-{step}", action="store_true", help=f"switch off the {step} normalisation step")
        parser.add_argument("--keep-personal", action="store_true", help="keep queries that look like personal data")
        parser.add_argument("--max-bad-share", type=float, default=0.01, help="fail when more rows than this share are bad (default 0.01)")

    def handle(self, *args, project: str, file: Path, name: str | None, query_column: str, time_column: str | None,
               count_column: str | None, segments: list[str], keep_personal: bool, max_bad_share: float, **options):
        target = self.project(project)
        normalization = Normalization(nfkc=not options["no_nfkc"], casefold=not options["no_casefold"],
                                      collapse_whitespace=not options["no_collapse_whitespace"],
                                      trim_punctuation=not options["no_trim_punctuation"])
        with importing(file, errors=(LogProblem, ValueError)):
            mapping = ColumnMapping(query=query_column, time=time_column, count=count_column, segments=tuple(segments))
            log = import_query_log(target, file, file.name, name=name or new_log_name(target, file.name), mapping=mapping,
                                   normalization=normalization, drop_personal=not keep_personal, max_bad_share=max_bad_share)
        span = f"{log.first_time:%Y-%m-%d} to {log.last_time:%Y-%m-%d}" if log.first_time else "no timestamps"
        self.stdout.write(
            f"Query log {log.name!r}: {log.rows_read:,} rows read, {log.rows_bad:,} bad, {log.rows_personal:,} dropped as "
            f"personal data ({log.queries_personal:,} queries); {log.n_queries:,} queries, {log.impressions:,} impressions, {span}.")
        for line, problem, excerpt in log.bad_examples[:5]:
            self.stdout.write(f"  bad row, line {line}: {problem}: {excerpt}")
