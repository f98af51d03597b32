"""Imports of query sets, corpus documents and stored runs, shared by views, jobs and commands.

Each import either stores everything or nothing: files are read and checked in full before (or
inside the same transaction as) the first write.
"""

import hashlib
import logging
import os
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from evaluation.engine import EngineInputError, Run, read_run
from evaluation.engine.data import doc_id_hashes, run_file_parts

from ..core.storage import open_stored
from ..lib.fileformats import FileProblem, read_documents, read_queries, show
from ..models import Document, Project, Query, QueryCollection, StoredRun
from .jobs import Job, Progress, job_kind, mark_upload_removed

# What a bad input file raises; views and commands show these to the user as they are.
INPUT_ERRORS = (FileProblem, EngineInputError)
STASH = "uploads"

log = logging.getLogger(__name__)


class NameTaken(FileProblem):
    """The project already has an object of this kind with this name (the API answers 409)."""

    def __init__(self, path: str, what: str, name: str):
        super().__init__(path, f"the project already has {what} named {name!r}")


# ------------------------------------------------------------------------------------- uploads


def check_upload_size(name: str, size: int) -> None:
    limit = settings.UPLOAD_MAX_BYTES
    if size > limit:
        raise FileProblem(name, f"the file is {size / 2**20:,.1f} MB; the limit is {limit / 2**20:,.0f} MB (UPLOAD_MAX_BYTES)")


def stash_upload(project: Project, uploaded) -> str:
    """Keep an uploaded file in storage until the job that imports it has run; returns its name."""
    check_upload_size(uploaded.name, uploaded.size)
    return default_storage.save(f"{STASH}/{project.slug}/{uuid.uuid4().hex}/{Path(uploaded.name).name}", uploaded)


@dataclass(frozen=True)
class RemovedUpload:
    name: str
    size: int
    reason: str


def stashed_uploads(storage=default_storage) -> Iterator[str]:
    """Every stashed upload, STASH/<project>/<token>/<file name>, through the storage API."""
    try:
        projects = storage.listdir(STASH)[0]
    except FileNotFoundError:
        return
    for project in projects:
        for token in storage.listdir(f"{STASH}/{project}")[0]:
            for name in storage.listdir(f"{STASH}/{project}/{token}")[1]:
                yield f"{STASH}/{project}/{token}/{name}"


def clean_uploads(*, now: datetime | None = None, dry_run: bool = False, storage=default_storage) -> list[RemovedUpload]:
    """Remove the stashed uploads no job will import; returns what was (with `dry_run`: would be) removed.

    The upload of a queued or running job is never touched. A failed job's is kept UPLOAD_FAILED_KEEP_DAYS
    after the failure, so that the job can be retried; then the job is marked, which refuses its retry with
    a message, before the file goes. Any other upload (a log whose columns were never mapped, one a job
    left behind) goes once it is UPLOAD_ABANDONED_AFTER_HOURS old.
    """
    now = now or timezone.now()
    hours, days = settings.UPLOAD_ABANDONED_AFTER_HOURS, settings.UPLOAD_FAILED_KEEP_DAYS
    jobs_of = defaultdict(list)
    for job in Job.objects.filter(params__has_key="upload").exclude(params__has_key=Job.UPLOAD_REMOVED):
        jobs_of[job.params["upload"]].append(job)
    removed = []
    for name in stashed_uploads(storage):
        jobs = jobs_of[name]
        if any(job.state in (Job.State.QUEUED, Job.State.RUNNING) for job in jobs):
            continue
        failed = [job for job in jobs if job.state == Job.State.FAILED]
        if failed:
            if max(job.finished_at or job.created_at for job in failed) > now - timedelta(days=days):
                continue
            reason = f"its job failed more than {days} days ago"
            # Marked first: a lead retrying it now either wins (the file stays) or is refused.
            if not dry_run and not all(mark_upload_removed(job, now) for job in failed):
                continue
        else:
            if storage.get_modified_time(name) > now - timedelta(hours=hours):
                continue
            reason = f"no job imports it and it is more than {hours} hours old"
            if not dry_run and Job.objects.active().filter(params__upload=name).exists():
                continue  # its columns were mapped since the jobs were read
        removed.append(RemovedUpload(name, storage.size(name), reason))
        if not dry_run:
            storage.delete(name)
            _remove_empty_folder(storage, name.rsplit("/", 1)[0])
            log.info("removed the stashed upload %s: %s", name, reason)
    return removed


def _remove_empty_folder(storage, folder: str) -> None:
    """A file system keeps the upload's folder after its file is deleted; object stores have none."""
    try:
        path = storage.path(folder)
    except NotImplementedError:
        return
    with suppress(OSError):  # not empty after all, or gone
        os.rmdir(path)


@contextmanager
def _local_copy(name: str, progress=None) -> Iterator[Path]:
    """A stashed upload as a local file: the fast readers want one, and the stash may be remote."""
    total = default_storage.size(name) if progress else None
    with open_stored(name) as handle, tempfile.NamedTemporaryFile(suffix=Path(name).suffix) as local:
        while chunk := handle.read(8 << 20):
            local.write(chunk)
            if progress:
                progress(local.tell(), total, "Copying the upload")
        local.flush()
        yield Path(local.name)


def _label(stashed: str) -> str:
    return Path(stashed).name


def _silent(done: int, total: int | None = None, message: str = "") -> None:
    """Progress reporting for callers that do not follow it (commands, tests)."""


# ------------------------------------------------------------------------------------- queries


@transaction.atomic
def import_queries(project: Project, source: bytes | IO[bytes], filename: str, *, name: str, user=None,
                   description: str = "") -> tuple[QueryCollection, list[str]]:
    """Create the query set `name` from a CSV, TSV, JSONL or TREC topics file (its bytes, or a binary stream,
    read as it streams). Returns it and warnings."""
    parsed = read_queries(source, filename, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                          max_id_bytes=settings.INPUT_ID_MAX_BYTES)
    _check_lengths(parsed.queries, filename)
    if project.query_sets.filter(name=name).exists():
        raise NameTaken(filename, "a query set", name)
    collection = QueryCollection.objects.create(
        project=project, name=name, description=description, source=QueryCollection.Source.UPLOAD,
        parameters={"file": filename}, created_by=user,
    )
    Query.objects.bulk_create(
        Query(collection=collection, query_id=q.query_id, text=q.text, information_need=q.information_need,
              tier=q.tier, weight=q.weight, segment=q.segment, extra=q.extra, references=q.references)
        for q in parsed.queries
    )
    return collection, parsed.warnings


def _check_lengths(queries, filename: str) -> None:
    """Tiers and segments fit their database columns (the reader knows no database)."""
    for column in ("tier", "segment"):
        limit = Query._meta.get_field(column).max_length
        for query in queries:
            if len(getattr(query, column)) > limit:
                raise FileProblem(filename, f"{column} longer than {limit} characters: {show(getattr(query, column))}",
                                  query.line)


@job_kind("import_queries", "Import a query set")
def import_queries_job(job: Job, progress: Progress) -> dict:
    stashed = job.params["upload"]
    progress(0, 1, f"Reading {_label(stashed)}")
    with open_stored(stashed) as stream:
        collection, warnings = import_queries(
            job.project, stream, _label(stashed), name=job.params["name"], user=job.owner,
            description=job.params.get("description", ""),
        )
    default_storage.delete(stashed)
    return {"query_set": collection.name, "queries": collection.queries.count(), "warnings": warnings[:50],
            "link": collection.get_absolute_url()}


# -------------------------------------------------------------------------------------- corpus


@transaction.atomic
def import_corpus(project: Project, stream, filename: str, *, progress=None, total_bytes: int | None = None) -> dict:
    """Add new documents and update changed ones from a JSONL or CSV file; report the counts."""
    counts = {"added": 0, "updated": 0, "unchanged": 0}
    now = timezone.now()
    for batch in read_documents(stream, filename, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                                max_id_bytes=settings.INPUT_ID_MAX_BYTES, max_field_bytes=settings.CORPUS_FIELD_MAX_BYTES):
        existing = dict(
            Document.objects.corpus().filter(project=project, doc_id__in=[row.doc_id for row in batch]).values_list("doc_id", "pk")
        )
        taken = Document.objects.filter(project=project, answer_run__isnull=False, doc_id__in=[row.doc_id for row in batch])
        if taken.exists():  # never overwrite a graded answer with a corpus document
            raise FileProblem(filename, f"the id {taken.first().doc_id!r} belongs to a generated answer graded in an "
                                        f"answer round; give the corpus document another id")
        current = dict(Document.objects.filter(pk__in=existing.values()).values_list("pk", "fields"))
        new, changed = [], []
        for row in batch:
            pk = existing.get(row.doc_id)
            if pk is None:
                new.append(Document(project=project, doc_id=row.doc_id, fields=row.fields, updated_at=now))
            elif current[pk] != row.fields:
                changed.append(Document(pk=pk, fields=row.fields, updated_at=now))
        Document.objects.bulk_create(new, batch_size=1000)
        Document.objects.bulk_update(changed, ["fields", "updated_at"], batch_size=1000)
        counts["added"] += len(new)
        counts["updated"] += len(changed)
        counts["unchanged"] += len(batch) - len(new) - len(changed)
        if progress:
            done = sum(counts.values())
            position = _stream_position(stream)
            progress(position or done, total_bytes, f"{done:,} documents read")
    return counts


def _stream_position(stream) -> int | None:
    try:
        return stream.tell()
    except (OSError, AttributeError, ValueError):
        return None


@job_kind("import_corpus", "Import corpus documents")
def import_corpus_job(job: Job, progress: Progress) -> dict:
    stashed = job.params["upload"]
    with _local_copy(stashed, progress) as path, path.open("rb") as stream:
        counts = import_corpus(job.project, stream, _label(stashed), progress=progress, total_bytes=path.stat().st_size)
    default_storage.delete(stashed)
    return {**counts, "documents in corpus": job.project.documents.corpus().count()}


# ---------------------------------------------------------------------------------------- runs


def import_run(project: Project, source: Path | bytes, filename: str, *, name: str, system: str, description: str = "",
               user=None, progress=None, origin: str = StoredRun.Origin.UPLOAD) -> tuple[StoredRun, bool]:
    """Validate a TREC, JSON or Parquet run with the engine's reader and store it once as Parquet.

    Returns the stored run and whether it is new; the same bytes uploaded again give the run
    already stored. A bad line raises the engine's error (file, line, problem) and stores nothing.
    A TREC file on disk is read a part of whole queries at a time (RUN_PART_BYTES), so that memory
    follows the part, not the file; a file the parts cannot vouch for (a query whose lines are not
    together, a bad line) is read whole, which also words the error. `progress(done, total, message)`
    hears from every phase, each long one as it goes.
    """
    report = progress or _silent
    digest = _sha256(source, report)
    existing = project.runs.filter(sha256=digest).first()
    if existing:
        return existing, False
    if project.runs.filter(name=name).exists():
        raise NameTaken(filename, "a run", name)
    facts = {"name": name, "system": system, "description": description, "original_name": filename, "user": user, "progress": report,
             "origin": origin}
    if _readable_in_parts(source):
        try:
            stored = store_run(project, _run_parts(source, filename), digest, **facts)
        except (EngineInputError, _QueryComesBack):
            pass  # read whole below, for the error's exact line (or, for scattered queries, the run)
        else:
            report(1, 1, "Stored")
            return stored, True
    run = read_run(source, name=filename, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                   max_id_bytes=settings.INPUT_ID_MAX_BYTES, max_unpacked_bytes=settings.DECOMPRESSED_MAX_BYTES,
                   progress=report)
    stored = store_run(project, run, digest, **facts)
    report(1, 1, "Stored")
    return stored, True


PARQUET_ROWS = 1 << 20  # rows per Parquet row group, written one at a time with progress between
RUN_PART_BYTES = 2 << 20  # a big TREC run is read this much at a time (about 45 MB of memory per part)


class _QueryComesBack(Exception):
    """A query's lines are not together in the file: its parts cannot be stored one after the other."""


def _readable_in_parts(source: Path | bytes) -> bool:
    """A TREC text file on disk big enough to be worth reading in parts (JSON and Parquet are read whole)."""
    if not isinstance(source, Path) or source.suffix.lower() in (".json", ".parquet"):
        return False
    with source.open("rb") as handle:
        head = handle.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    return head not in (b"[", b"{") and source.stat().st_size > RUN_PART_BYTES


def _run_parts(path: Path, filename: str) -> Iterator[Run]:
    """The run a part of whole queries at a time, each read by the engine's reader."""
    seen: set[str] = set()
    with path.open("rb") as handle:
        for data in run_file_parts(handle, RUN_PART_BYTES):
            part = read_run(data, name=filename, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                            max_id_bytes=settings.INPUT_ID_MAX_BYTES)
            if not seen.isdisjoint(part.query_ids):
                raise _QueryComesBack
            seen.update(part.query_ids)
            yield part


def store_run(project: Project, run: Run | Iterable[Run], digest: str, *, name: str, system: str, description: str = "",
              original_name: str = "", user=None, progress=None, origin: str = StoredRun.Origin.UPLOAD) -> StoredRun:
    """Write a validated run, or its parts (each with whole queries, none twice), as Parquet in the engine's
    ranking order, and record it. Nothing is recorded until every part is written."""
    report = progress or _silent
    whole = isinstance(run, Run)
    parts = [run] if whole else run
    counts = {"rows": 0, "queries": 0, "depth": 0, "tag": ""}
    documents = None if whole else _DistinctCounter()
    with tempfile.TemporaryFile() as parquet:
        writer = None
        try:
            for part in parts:
                table = part.to_arrow()
                writer = writer or pq.ParquetWriter(parquet, table.schema, compression="zstd")
                for start in range(0, max(table.num_rows, 1), PARQUET_ROWS):
                    writer.write_table(table.slice(start, PARQUET_ROWS))
                    report(counts["rows"] + min(start + PARQUET_ROWS, table.num_rows), None, "Writing Parquet")
                counts.update(rows=counts["rows"] + len(part), queries=counts["queries"] + len(part.query_ids),
                              depth=max(counts["depth"], int(np.diff(part.offsets).max(initial=0))), tag=part.run_id or "")
                if whole:
                    documents = pc.count_distinct(table.column("doc_id")).as_py()
                else:
                    documents.add(doc_id_hashes(table.column("doc_id")))
        finally:
            if writer is not None:
                writer.close()
        stored = StoredRun(
            project=project, name=name, system=system, description=description, original_name=original_name, sha256=digest,
            run_tag=counts["tag"], uploaded_by=user, origin=origin, n_queries=counts["queries"], n_rows=counts["rows"],
            n_documents=documents if whole else documents.count(),
            depth=counts["depth"])
        report(0, None, "Storing the Parquet file")
        parquet.seek(0)
        with transaction.atomic():
            stored.file.save(f"{digest}.parquet", File(parquet), save=False)
            stored.save()
    return stored


class _DistinctCounter:
    """Counts distinct 64-bit hashes with little memory: they are spread over 16 temporary files by their top
    bits as they come, and each file is then read and counted alone (a sixteenth of them in memory at once)."""

    BUCKETS = 16

    def __init__(self):
        self.folder = tempfile.TemporaryDirectory(prefix="verdict-distinct-")
        self.files = [open(Path(self.folder.name) / str(bucket), "wb") for bucket in range(self.BUCKETS)]

    def add(self, hashes: np.ndarray) -> None:
        buckets = (hashes >> np.uint64(60)).astype(np.int8)
        for bucket, handle in enumerate(self.files):
            hashes[buckets == bucket].tofile(handle)

    def count(self) -> int:
        total = 0
        for handle in self.files:
            handle.close()
            values = np.fromfile(handle.name, dtype=np.uint64)
            values.sort()
            total += int(values.size and 1 + np.count_nonzero(values[1:] != values[:-1]))
        self.folder.cleanup()
        return total


def _sha256(source: Path | bytes, report, message: str = "Checking whether these bytes are already stored") -> str:
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    with open(source, "rb") as handle:
        return handle_sha256(handle, source.stat().st_size, report, message)


def handle_sha256(handle, total: int | None, report=_silent, message: str = "") -> str:
    """The SHA-256 of an open binary file, read in 8 MiB blocks."""
    digest = hashlib.sha256()
    while chunk := handle.read(8 << 20):
        digest.update(chunk)
        report(handle.tell(), total, message)
    return digest.hexdigest()


def load_run_table(run: StoredRun, columns: list[str] | None = None, filters=None) -> pa.Table:
    with open_stored(run.file.name) as handle:
        return pq.read_table(handle, columns=columns, filters=filters)


def load_run(run: StoredRun) -> Run:
    return Run.from_arrow(load_run_table(run), name=run.name)


@job_kind("import_run", "Import a run")
def import_run_job(job: Job, progress: Progress) -> dict:
    stashed = job.params["upload"]
    with _local_copy(stashed, progress) as path:
        stored, created = import_run(
            job.project, path, _label(stashed), name=job.params["name"], system=job.params["system"],
            description=job.params.get("description", ""), user=job.owner, progress=progress,
        )
    default_storage.delete(stashed)
    outcome = "stored" if created else f"already stored as {stored.name!r}: nothing new was saved"
    return {"run": stored.name, "outcome": outcome, "queries": stored.n_queries, "rows": stored.n_rows,
            "link": stored.get_absolute_url()}



def start_upload_job(kind: str, project: Project, user, upload, **params) -> Job:
    """Stash an uploaded file and queue the job that imports it (views and, later, the API)."""
    from .jobs import start_job

    return start_job(kind=kind, project=project, owner=user, params={"upload": stash_upload(project, upload), **params})
