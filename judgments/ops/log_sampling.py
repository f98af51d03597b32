"""Query logs in the app: import one as a job, draw a tiered sample from it, save the sample as a query set.

The counting and the sampling are plain functions (`querylog`, `sampling`, no Django); this module stores
what they produce and reads it back. A log's counts are three immutable Parquet files behind the storage
API; a saved sample is an ordinary query set whose queries keep their tier, stratum, traffic, weight and
raw log rows, and whose parameters record the settings and the seed that draw it again.
"""

import hashlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction

from ..core.storage import open_stored
from ..lib import querylog, sampling
from ..lib.fileformats import csv_chunks
from ..lib.jsonable import jsonable, records
from ..lib.querylog import ColumnMapping, LogProblem, Normalization
from ..models import Project, Query, QueryCollection, QueryLog
from .actions import first_free
from .imports import _label, _local_copy, _sha256, _silent, handle_sha256
from .jobs import Job, Progress, job_kind

TABLES = ("daily", "variants", "rows")
KEEP_ROWS = 20  # raw log rows kept per query, and copied into each sampled query
SHOWN_VARIANTS = 10  # raw spellings kept with each sampled query


# ------------------------------------------------------------------------------------------ import


def import_query_log(project: Project, path: Path, filename: str, *, name: str, mapping: ColumnMapping,
                     normalization: Normalization = Normalization(), drop_personal: bool = True,
                     max_bad_share: float = 0.01, user=None, progress=None) -> QueryLog:
    """Count the log at `path` and keep the counts; raises LogProblem (file, line, problem) on bad input,
    having stored nothing. `progress(done, total, message)` hears from every phase."""
    report = progress or _silent
    if project.query_logs.filter(name=name).exists():
        raise LogProblem(filename, f"the project already has a query log named {name!r}")
    counted = querylog.aggregate_log(
        path, filename, mapping, normalization, drop_personal=drop_personal, max_bad_share=max_bad_share,
        keep_rows=KEEP_ROWS, progress=lambda done, total: report(done, total, "Reading and counting the log"),
        max_line_bytes=settings.INPUT_LINE_MAX_BYTES, max_decompressed_bytes=settings.DECOMPRESSED_MAX_BYTES)
    sha256 = _sha256(path, report, "Fingerprinting the file (SHA-256), to recognise it if uploaded again")
    report(0, None, "Storing the counts")
    log = QueryLog(
        project=project, name=name, original_name=filename, sha256=sha256, created_by=user, drop_personal=drop_personal,
        mapping={"query": mapping.query, "time": mapping.time, "count": mapping.count, "segments": list(mapping.segments)},
        normalization=asdict(normalization), rows_read=counted.rows_read, rows_good=counted.rows_good,
        rows_bad=counted.rows_bad, bad_examples=[list(example) for example in counted.bad_examples],
        rows_personal=counted.rows_personal, impressions_personal=counted.impressions_personal,
        queries_personal=counted.queries_personal, impressions=counted.impressions, n_queries=counted.queries,
        first_time=counted.first_time, last_time=counted.last_time,
    )
    log.folder = f"logs/{project.slug}/{log.uuid.hex}"
    saved = [_store(f"{log.folder}/{which}.parquet", getattr(counted, which)) for which in TABLES]
    try:
        log.save()
    except Exception:
        for name_ in saved:
            default_storage.delete(name_)
        raise
    return log


def same_file_logs(project: Project, sha256: str, exclude: QueryLog | None = None):
    """The project's logs imported from the same bytes, oldest first."""
    logs = project.query_logs.filter(sha256=sha256).order_by("created_at")
    return logs.exclude(pk=exclude.pk) if exclude else logs


def stashed_sha256(stashed: str) -> str:
    with open_stored(stashed) as handle:
        return handle_sha256(handle, default_storage.size(stashed))


def same_file_warning(earlier: QueryLog) -> str:
    return (f"This file is byte for byte the log “{earlier.name}”, imported {earlier.created_at:%Y-%m-%d}: "
            f"importing it again makes a second log with the same searches.")


def _store(name: str, table: pa.Table) -> str:
    with tempfile.TemporaryFile() as parquet:
        pq.write_table(table, parquet, compression="zstd")
        parquet.seek(0)
        return default_storage.save(name, File(parquet))


def load_table(log: QueryLog, which: str, *, columns: list[str] | None = None, filters=None) -> pa.Table:
    with open_stored(f"{log.folder}/{which}.parquet") as handle:
        return pq.read_table(handle, columns=columns, filters=filters)


def delete_query_log(log: QueryLog) -> None:
    """Forget a log: its files and its row. Query sets sampled from it keep their queries."""
    with transaction.atomic():
        log.delete()
    for which in TABLES:
        default_storage.delete(f"{log.folder}/{which}.parquet")


@job_kind("import_query_log", "Import a query log")
def import_query_log_job(job: Job, progress: Progress) -> dict:
    params = job.params
    stashed = params["upload"]
    mapping = ColumnMapping(query=params["query_column"], time=params.get("time_column") or None,
                            count=params.get("count_column") or None, segments=tuple(params.get("segment_columns", ())))
    with _local_copy(stashed, progress) as path:
        log = import_query_log(
            job.project, path, _label(stashed), name=params["name"], mapping=mapping,
            normalization=Normalization(**params.get("normalization", {})), drop_personal=params.get("drop_personal", True),
            max_bad_share=params.get("max_bad_share", 0.01), user=job.owner, progress=progress)
    default_storage.delete(stashed)
    earlier = same_file_logs(job.project, log.sha256, exclude=log).first()
    return {"query_log": log.name, "rows": log.rows_read, "bad rows": log.rows_bad, "queries": log.n_queries,
            "personal-data rows dropped": log.rows_personal, "warnings": [same_file_warning(earlier)] if earlier else [],
            "link": log.get_absolute_url()}


def log_queries(log: QueryLog) -> list[str]:
    """Every distinct query of the log, normalised."""
    return pc.unique(load_table(log, "daily", columns=["query"])["query"]).to_pylist()


def merged_variants(log: QueryLog, limit: int = 20) -> list[dict]:
    """The busiest queries that normalisation merged from several raw spellings, with those spellings."""
    variants = load_table(log, "variants")
    groups = variants.group_by("query").aggregate([("raw", "count"), ("count", "sum")])
    groups = groups.filter(pc.greater(groups["raw_count"], 1)).sort_by([("count_sum", "descending"), ("query", "ascending")])
    top = groups.slice(0, limit)
    spellings = _grouped(variants.filter(pc.is_in(variants["query"], top["query"])))
    return [{"query": query, "impressions": impressions, "spellings": sorted(((v["raw"], v["count"]) for v in spellings[query]),
                                                                            key=lambda v: (-v[1], v[0]))}
            for query, impressions in zip(top["query"].to_pylist(), top["count_sum"].to_pylist())]


def preview_upload(stashed: str, n: int = 20) -> querylog.Preview:
    """The first rows of a stashed log, for the column-mapping form."""
    with _local_copy(stashed) as path:
        return querylog.peek(path, _label(stashed), n, max_line_bytes=settings.INPUT_LINE_MAX_BYTES)


# ---------------------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class SamplingSettings:
    """Everything that decides a sample: with the same log and seed, the same queries come out."""

    window_days: int | None = sampling.DEFAULT_WINDOW_DAYS
    end: date | None = None
    boundaries: sampling.Boundaries = field(default_factory=lambda: sampling.Boundaries.parse("rank:500,5000"))
    quotas: dict[str, sampling.Quota] = field(default_factory=lambda: dict(sampling.DEFAULT_QUOTAS))
    seed: int | None = None
    stratify_by: str | None = None
    exclude_earlier: bool = True

    def to_json(self) -> dict:
        return {"window_days": self.window_days, "end": self.end.isoformat() if self.end else None,
                "boundaries": str(self.boundaries), "seed": self.seed, "stratify_by": self.stratify_by,
                "exclude_earlier": self.exclude_earlier,
                "quotas": {tier: {"n": quota.n, "method": quota.method} for tier, quota in self.quotas.items()}}


@dataclass
class Drawn:
    """A drawn sample with what the pages show beside it."""

    log: QueryLog
    settings: SamplingSettings
    tiered: pd.DataFrame
    sample: sampling.Sample

    @property
    def seed(self) -> int:
        return self.sample.seed

    window: tuple[date, date] | None  # the first and last day counted; None: every row (no window, or no times)


def draw(log: QueryLog, settings: SamplingSettings) -> Drawn:
    """Count each query's traffic in the window, cut the tiers, and draw the sample."""
    if settings.stratify_by and settings.stratify_by not in log.segments:
        raise ValueError(f"{settings.stratify_by!r} is not a segment column of this log ({', '.join(log.segments) or 'it has none'})")
    traffic = sampling.query_traffic(load_table(log, "daily"), tuple(log.segments), window_days=settings.window_days,
                                     end=settings.end, stratify_by=settings.stratify_by)
    tiered = sampling.assign_tiers(traffic, settings.boundaries)
    exclude = earlier_queries(log) if settings.exclude_earlier else ()
    sample = sampling.draw_sample(tiered, settings.quotas, settings.seed, exclude=exclude)
    return Drawn(log, settings, tiered, sample, traffic.attrs.get("window"))


def tier_table(drawn: Drawn) -> list[str]:
    """The sample summary as a text table, for the command line."""
    stratified = bool(drawn.settings.stratify_by)
    header = ["tier"] + ([drawn.settings.stratify_by] if stratified else []) + [
        "queries in log", "impressions", "share", "excluded", "sampled", "method", "weight min", "weight max"]
    rows = [[cell["tier"]] + ([cell["stratum"]] if stratified else []) + [
        f"{cell['queries_in_log']:,}", f"{cell['impressions']:,}", f"{cell['impressions_share']:.3f}", f"{cell['excluded']:,}",
        f"{cell['sampled']:,}", cell["method"]] + ([f"{cell['weight_min']:,.1f}", f"{cell['weight_max']:,.1f}"] if cell["sampled"] else ["", ""])
        for cell in drawn.sample.summary.to_dict("records")]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    window = drawn.window
    lines = [f"Query log {drawn.log.name!r}, seed {drawn.seed}, tiers {drawn.settings.boundaries}, "
             + (f"window {window[0]:%Y-%m-%d} to {window[1]:%Y-%m-%d}" if window else "the whole log")]
    for row in [header, *rows]:
        lines.append("  ".join(str(value).ljust(width) if i < 1 + stratified else str(value).rjust(width)
                               for i, (value, width) in enumerate(zip(row, widths))))
    return lines + [f"Warning: {sentence}" for sentence in sampling.shortfalls(drawn.sample.summary)]


def earlier_queries(log: QueryLog) -> set[str]:
    """The texts of every query already in the project's query sets, normalised as the log was."""
    texts = list(Query.objects.filter(collection__project=log.project_id).values_list("text", flat=True).distinct())
    if not texts:
        return set()
    normalized = Normalization(**log.normalization).apply(pa.array(texts, pa.string()))
    return {text for text in normalized.to_pylist() if text}


def query_id_of(text: str, stratum: str = "") -> str:
    """A stable id for a sampled query: the same query (and stratum) gets the same id in every sample."""
    return "q" + hashlib.blake2b(f"{text}\x1f{stratum}".encode(), digest_size=6).hexdigest()


@transaction.atomic
def save_sample(drawn: Drawn, *, name: str, user=None, description: str = "") -> QueryCollection:
    """Save the drawn sample as the query set `name`, each query with its raw log rows."""
    log = drawn.log
    if log.project.query_sets.filter(name=name).exists():
        raise ValueError(f"The project already has a query set named {name!r}.")
    chosen = drawn.sample.queries
    texts = sorted(set(chosen["query"]))
    raw_rows = _grouped(load_table(log, "rows", filters=[("query", "in", texts)]) if texts else None)
    variants = _grouped(load_table(log, "variants", filters=[("query", "in", texts)]) if texts else None)
    collection = QueryCollection.objects.create(
        project=log.project, name=name, description=description, source=QueryCollection.Source.SAMPLE, created_by=user,
        parameters={"log": str(log.uuid), "log_name": log.name, **drawn.settings.to_json(), "seed": drawn.seed,
                    "summary": records(drawn.sample.summary)},
    )
    queries = []
    for unit in chosen.to_dict("records"):
        spellings = sorted(variants.get(unit["query"], []), key=lambda v: (-v["count"], v["raw"]))
        rows = [row for row in raw_rows.get(unit["query"], [])
                if not drawn.settings.stratify_by or row.get(drawn.settings.stratify_by, "") == unit["stratum"]]
        queries.append(Query(
            collection=collection, query_id=query_id_of(unit["query"], unit["stratum"]),
            text=spellings[0]["raw"].strip() if spellings else unit["query"], tier=unit["tier"], weight=unit["weight"],
            segment=unit["stratum"],
            extra={"normalized": unit["query"], "stratum": unit["stratum"], "traffic": int(unit["traffic"]),
                   "share": unit["share"], "rank": int(unit["rank"]), "inclusion_probability": unit["inclusion_probability"],
                   "first_seen": _day(unit.get("first_seen")), "last_seen": _day(unit.get("last_seen")),
                   "segments": {column: unit.get(column, "") for column in log.segments},
                   "variants": [[v["raw"], v["count"]] for v in spellings[:SHOWN_VARIANTS]],
                   "log_rows": [jsonable({k: v for k, v in row.items() if k != "query"}) for row in rows]},
        ))
    Query.objects.bulk_create(queries, batch_size=500)
    return collection


def _grouped(table: pa.Table | None) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in table.to_pylist() if table is not None else ():
        grouped.setdefault(row["query"], []).append(row)
    return grouped


def _day(value) -> str | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).date().isoformat()




# ------------------------------------------------------------------------------------------ export

SAMPLE_CSV_COLUMNS = ("query_id", "query", "information_need", "tier", "segment", "weight", "traffic", "share",
                      "rank", "inclusion_probability", "first_seen", "last_seen")
QUERY_SET_CSV_COLUMNS = (*SAMPLE_CSV_COLUMNS, "references")  # references: a JSON list of texts


def query_set_csv(collection: QueryCollection) -> Iterator[str]:
    """The query set as CSV, streamed; the columns read back by the query-set import, plus a sample's
    traffic, share, rank and inclusion probability. Sampled queries come straight from public logs, so
    every cell is guarded against spreadsheet formulas (the import takes the guard off)."""
    return csv_chunks(_query_set_rows(collection))


def _query_set_rows(collection: QueryCollection) -> Iterator[list]:
    yield QUERY_SET_CSV_COLUMNS
    for query in collection.queries.order_by("pk").iterator(chunk_size=2000):
        extra = query.extra or {}
        yield ([query.query_id, query.text, query.information_need, query.tier, query.segment, query.weight]
               + [extra.get(key) for key in SAMPLE_CSV_COLUMNS[6:]]
               + [json.dumps(query.references, ensure_ascii=False) if query.references else ""])


def new_log_name(project: Project, filename: str) -> str:
    """A free name for a log imported from `filename`."""
    return first_free(project.query_logs, Path(filename).name.split(".")[0] or "query log")

