"""Answer runs (a system's generated answers, stored once as Parquet) and reference answers for a query
set, shared by views, jobs and commands. The engine's readers validate both; nothing is half-imported.
Its twin for ranked runs is `imports.py` (import_run, store_run)."""

import io
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.db import transaction

from evaluation.engine.answers import Answer, read_predictions, read_references

from ..core.storage import open_stored
from ..lib.fileformats import FileProblem
from ..models import AnswerRun, Project, Query, QueryCollection
from .imports import NameTaken, _label, _local_copy, _sha256, _silent
from .jobs import Job, Progress, job_kind

ANSWER_SCHEMA = pa.schema([("query_id", pa.string()), ("answer", pa.string()), ("cites", pa.list_(pa.string()))])


class AnswerRunExists(FileProblem):
    """These bytes are already stored as an answer run of the project (`run`): nothing new is saved."""

    def __init__(self, path: str, run: AnswerRun):
        self.run = run
        super().__init__(path, f"these bytes are already stored as the answer run {run.name!r}: nothing new was saved")


def _source(file) -> tuple[Path | bytes, str]:
    """A path stays a path (hashed and read in blocks); a file object or bytes are read whole (uploads are capped)."""
    if isinstance(file, (str, Path)):
        return Path(file), _file_name(file)
    return (file if isinstance(file, bytes) else file.read()), _file_name(file)


def _file_name(file) -> str:
    """The name a path, bytes or a file object go by in messages."""
    if isinstance(file, (str, Path)):
        return Path(file).name
    return Path(getattr(file, "name", "") or "answers").name


def import_answer_run(project: Project, file, *, name: str, system: str, description: str = "", user=None,
                      original_name: str | None = None, progress=None) -> AnswerRun:
    """Validate generated answers (JSONL {"query_id", "answer", "cites"} or TSV query_id<TAB>answer) with the
    engine's reader and store them once as Parquet (query_id, answer, cites) with their sha256.

    `file` is a path, bytes or a binary file object. The same bytes again raise AnswerRunExists (naming the run
    that has them); a bad line raises the engine's `file:line: problem` error; either way nothing is stored.
    """
    report = progress or _silent
    source, default_name = _source(file)
    label = original_name or default_name
    digest = _sha256(source, report)
    existing = project.answer_runs.filter(sha256=digest).first()
    if existing:
        raise AnswerRunExists(label, existing)
    if project.answer_runs.filter(name=name).exists():
        raise NameTaken(label, "an answer run", name)
    report(0, None, "Reading the answers")
    predictions = read_predictions(source if isinstance(source, Path) else io.BytesIO(source), name=label,
                                   max_line_bytes=settings.INPUT_LINE_MAX_BYTES, max_id_bytes=settings.INPUT_ID_MAX_BYTES)
    if not predictions:
        raise FileProblem(label, "no answers in the file")
    table = pa.table({"query_id": list(predictions), "answer": [a.answer for a in predictions.values()],
                      "cites": [list(a.cites) for a in predictions.values()]}, schema=ANSWER_SCHEMA)
    run = AnswerRun(project=project, name=name, system=system, description=description, original_name=label, sha256=digest,
                    uploaded_by=user, n_queries=len(predictions), n_citing=sum(1 for a in predictions.values() if a.cites))
    report(0, None, "Storing the Parquet file")
    with tempfile.TemporaryFile() as parquet:
        pq.write_table(table, parquet, compression="zstd")
        parquet.seek(0)
        with transaction.atomic():
            run.file.save(f"{digest}.parquet", File(parquet), save=False)
            run.save()
    report(1, 1, "Stored")
    return run


def load_answer_table(run: AnswerRun, filters=None) -> pa.Table:
    with open_stored(run.file.name) as handle:
        return pq.read_table(handle, filters=filters)


def read_answer_run(run: AnswerRun) -> dict[str, Answer]:
    """The run's answers: query id -> the engine's Answer, in file order."""
    table = load_answer_table(run)
    return {qid: Answer(answer, tuple(cites or ())) for qid, answer, cites in
            zip(table["query_id"].to_pylist(), table["answer"].to_pylist(), table["cites"].to_pylist())}


def answered_query_ids(run: AnswerRun) -> set[str]:
    with open_stored(run.file.name) as handle:
        return set(pq.read_table(handle, columns=["query_id"])["query_id"].to_pylist())


def answer_coverage(project: Project, query_set: QueryCollection | None,
                    answered_by: dict[int, set[str]] | None = None) -> list[tuple[AnswerRun, dict | None]]:
    """Each answer run with, for `query_set`, how many of its queries with reference answers it answers.
    `answered_by`: each answer run's query ids by its pk, when already read."""
    runs = list(project.answer_runs.select_related("uploaded_by"))
    if query_set is None:
        return [(run, None) for run in runs]
    with_references = set(query_set.queries.exclude(references=[]).values_list("query_id", flat=True))
    rows = []
    for run in runs:
        answered = answered_by[run.pk] if answered_by is not None else answered_query_ids(run)
        missing = sorted(with_references - answered)
        rows.append((run, {"with_references": len(with_references), "answered": len(with_references & answered),
                           "missing": len(missing), "missing_examples": missing[:5]}))
    return rows


@job_kind("import_answers", "Import an answer run")
def import_answers_job(job: Job, progress: Progress) -> dict:
    stashed = job.params["upload"]
    with _local_copy(stashed, progress) as path:
        try:
            run = import_answer_run(job.project, path, name=job.params["name"], system=job.params["system"],
                                    description=job.params.get("description", ""), user=job.owner,
                                    original_name=_label(stashed), progress=progress)
            outcome = "stored"
        except AnswerRunExists as duplicate:
            run, outcome = duplicate.run, f"already stored as {duplicate.run.name!r}: nothing new was saved"
    default_storage.delete(stashed)
    return {"answer run": run.name, "outcome": outcome, "answers": run.n_queries, "citing": run.n_citing,
            "link": run.get_absolute_url()}


# ------------------------------------------------------------------------------------- references


@transaction.atomic
def import_references(query_set: QueryCollection, file, *, replace: bool = False, original_name: str | None = None) -> dict:
    """Reference answers for queries of `query_set` from JSONL {"query_id", "answers"} or TSV
    query_id<TAB>answer (a path, bytes or a binary file object), read with the engine's reader as the file
    streams: each named query's references are replaced (`replace`) or added to (answers it already has
    are not repeated). All or nothing.

    Returns counts and the ids in the file that are not in the set (left out); a file whose ids are all
    unknown is refused."""
    label = original_name or _file_name(file)
    references = read_references(file, name=label, max_line_bytes=settings.INPUT_LINE_MAX_BYTES,
                                 max_id_bytes=settings.INPUT_ID_MAX_BYTES)
    if not references:
        raise FileProblem(label, "no reference answers in the file")
    queries = {q.query_id: q for q in query_set.queries.select_for_update().filter(query_id__in=list(references))}
    unknown = [qid for qid in references if qid not in queries]
    if len(unknown) == len(references):
        raise FileProblem(label, f"none of its {len(references):,} query ids is in the query set {query_set.name!r}, "
                                 f"e.g. {', '.join(unknown[:3])}")
    changed = []
    added = 0
    for qid, answers in references.items():
        query = queries.get(qid)
        if query is None:
            continue
        before = list(query.references or [])
        after = list(dict.fromkeys(answers)) if replace else before + [a for a in dict.fromkeys(answers) if a not in before]
        if after != before:
            added += len([a for a in after if a not in before])
            query.references = after
            changed.append(query)
    Query.objects.bulk_update(changed, ["references"], batch_size=500)
    return {"queries": len(references) - len(unknown), "changed": len(changed), "new_references": added, "unknown": unknown}


def references_of(query_set: QueryCollection, query_ids: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Query id -> reference answers, for the set's queries that have some."""
    queries = query_set.queries.exclude(references=[])
    if query_ids is not None:
        queries = queries.filter(query_id__in=list(query_ids))
    return {qid: list(refs) for qid, refs in queries.values_list("query_id", "references") if refs}
