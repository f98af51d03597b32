"""Uploads through the API: stored runs, answer runs, query sets, corpus documents and reference answers, each
imported in the request by the app's own import function (the engine's readers), all or nothing.

A file is never held whole in memory here: past FILE_UPLOAD_MAX_MEMORY_SIZE Django spools it to a temporary
file as it arrives, and the importers read that file by path (the run reader maps it). A bad file is a 400
whose detail is the reader's `file:line: problem`; nothing is stored, and the temporary file goes with the
request. The POSTs on paths the read routers serve are added to those routers (see api.py).
"""

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, File, Form, Router, Schema, Status, UploadedFile

from judgments import access
from judgments.models import StoredRun
from judgments.ops.answers import AnswerRunExists, import_answer_run, import_references
from judgments.ops.imports import INPUT_ERRORS, NameTaken, check_upload_size, import_corpus, import_queries, import_run

from . import query_sets, runs
from .auth import object_access, project_access
from .errors import ApiError
from .schemas import ERRORS, ErrorOut

router = Router(tags=["imports"])

UPLOAD_ERRORS = {**ERRORS, 409: ErrorOut, 413: ErrorOut}
SUFFIXES = {"trec": ".txt", "json": ".json", "parquet": ".parquet"}


@contextmanager
def local_path(upload: UploadedFile, suffix: str | None = None) -> Iterator[Path]:
    """The upload as a file on disk, named with `suffix` (by default its own): the temporary file Django
    spooled it to, or for a small upload kept in memory, a temporary copy. The readers pick the format by it."""
    suffix = suffix if suffix is not None else Path(upload.name).suffix.lower()
    with tempfile.TemporaryDirectory(prefix="verdict-api-") as folder:
        path = Path(folder) / f"upload{suffix}"
        if hasattr(upload, "temporary_file_path"):
            os.symlink(upload.temporary_file_path(), path)
        else:
            with path.open("wb") as copy:
                for chunk in upload.chunks():
                    copy.write(chunk)
        yield path


@contextmanager
def refused_as_api_errors() -> Iterator[None]:
    """The importers' refusals as API errors: a name in use is 409, a bad file 400 with its `file:line: problem`."""
    try:
        yield
    except NameTaken as taken:
        raise ApiError(409, str(taken)) from None
    except INPUT_ERRORS as problem:
        raise ApiError(400, str(problem), "bad_file") from None


def _checked(upload: UploadedFile) -> str:
    """The upload's base name, once its size is within UPLOAD_MAX_BYTES (413 otherwise)."""
    name = clean_text(Path(upload.name or "upload").name, "file")
    with refused_as_api_errors():
        try:
            check_upload_size(name, upload.size)
        except INPUT_ERRORS as problem:
            raise ApiError(413, str(problem)) from None
    return name


@runs.router.post("/{slug}/runs", response={200: runs.RunOut, 201: runs.RunOut, **UPLOAD_ERRORS},
                  summary="Upload a run (TREC, JSON or Parquet)",
                  description="Validated by the metric engine's reader and stored once as Parquet. 201 with the new run; "
                              "200 with the stored run when these bytes are already stored (under any name); 409 when "
                              "another run has the name; 400 with `file:line: problem` and nothing stored on a bad file. "
                              "`origin=gate` (the CI gate's uploads) puts the run under the project's retention "
                              "(`gate_run_days`): deleted that many days later unless promoted or in use.")
def upload_run(request: HttpRequest, slug: str, file: File[UploadedFile], name: Form[str],
               system: Form[str] = "", format: Form[Literal["trec", "json", "parquet"] | None] = None,
               origin: Form[StoredRun.Origin] = StoredRun.Origin.UPLOAD):
    project, _ = project_access(request, slug, "can_manage")
    filename = _checked(file)
    with refused_as_api_errors(), local_path(file, SUFFIXES.get(format)) as path:
        stored, created = import_run(project, path, filename, name=_name(name), system=clean_text(system, "system") or _name(name),
                                     user=request.auth[0].user, origin=origin)
    return Status(201 if created else 200, runs.run_out(request, stored))


@runs.answers_router.post("/{slug}/answer-runs", response={200: runs.AnswerRunOut, 201: runs.AnswerRunOut, **UPLOAD_ERRORS},
                          summary="Upload an answer run (JSONL or TSV)",
                          description="201 with the new answer run; 200 with the stored one when these bytes are already "
                                      "stored; 409 when another answer run has the name; 400 with `file:line: problem`.")
def upload_answer_run(request: HttpRequest, slug: str, file: File[UploadedFile], name: Form[str], system: Form[str] = ""):
    project, _ = project_access(request, slug, "can_manage")
    filename = _checked(file)
    with refused_as_api_errors():
        try:
            with local_path(file) as path:
                stored = import_answer_run(project, path, name=_name(name), system=clean_text(system, "system") or _name(name),
                                           user=request.auth[0].user, original_name=filename)
        except AnswerRunExists as existing:
            return Status(200, runs.answer_run_out(request, existing.run))
    return Status(201, runs.answer_run_out(request, stored))


@query_sets.router.post("/{slug}/query-sets", response={201: query_sets.QuerySetOut, **UPLOAD_ERRORS},
                        summary="Import a query set (CSV, TSV, JSONL or TREC topics)")
def upload_query_set(request: HttpRequest, slug: str, file: File[UploadedFile], name: Form[str], description: Form[str] = ""):
    project, _ = project_access(request, slug, "can_manage")
    filename = _checked(file)
    with refused_as_api_errors(), local_path(file) as path, path.open("rb") as stream:
        collection, _warnings = import_queries(project, stream, filename, name=_name(name), user=request.auth[0].user,
                                               description=clean_text(description, "description"))
    return Status(201, {"uuid": collection.uuid, "name": collection.name, "n_queries": collection.queries.count(),
                        "created_at": collection.created_at})


class CorpusOut(Schema):
    created: int = Field(description="Documents added")
    updated: int = Field(description="Documents whose fields changed")
    unchanged: int


@router.post("/{slug}/corpus", response={200: CorpusOut, **UPLOAD_ERRORS}, summary="Import corpus documents (JSONL or CSV)",
             description="Adds new documents and updates changed ones, all or nothing.")
def upload_corpus(request: HttpRequest, slug: str, file: File[UploadedFile]):
    project, _ = project_access(request, slug, "can_manage")
    filename = _checked(file)
    with refused_as_api_errors(), local_path(file) as path, path.open("rb") as stream:
        counts = import_corpus(project, stream, filename)
    return {"created": counts["added"], "updated": counts["updated"], "unchanged": counts["unchanged"]}


class ReferencesOut(Schema):
    n_references: int = Field(description="Reference answers added")
    queries: int = Field(description="Queries of the set the file names")
    changed: int = Field(description="Queries whose references changed")
    unknown: list[str] = Field(description="Query ids of the file that are not in the set (left out)")


@router.post("/{slug}/query-sets/{uuid}/references", response={200: ReferencesOut, **UPLOAD_ERRORS},
             summary="Upload reference answers for a query set's queries (JSONL or TSV)")
def upload_references(request: HttpRequest, slug: str, uuid: UUID, file: File[UploadedFile], replace: Form[bool] = False):
    collection = object_access(request, slug, access.query_set_for_user, uuid, "can_manage")
    filename = _checked(file)
    with refused_as_api_errors(), local_path(file) as path:
        counts = import_references(collection, path, replace=replace, original_name=filename)
    return {"n_references": counts["new_references"], "queries": counts["queries"], "changed": counts["changed"],
            "unknown": counts["unknown"]}


def _name(name: str) -> str:
    name = clean_text(name, "name")
    if not name:
        raise ApiError(400, "name: give a name that is not blank.")
    return name


def clean_text(value: str, field: str) -> str:
    """A text field stripped; a NUL character (which no database column takes) is a 400, as the app's forms say."""
    if "\x00" in value:
        raise ApiError(400, f"{field}: null characters are not allowed.")
    return value.strip()

