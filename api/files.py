"""Files the API sends: streamed downloads, and label files with a strong ETag answering If-None-Match with 304."""

import hashlib
import tempfile
from collections.abc import Callable, Iterable

from django.core.files import File
from django.core.files.storage import default_storage
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import content_disposition_header, parse_etags


# An export bigger than this is spooled to a temporary file while its digest is computed.
SPOOL_MAX_BYTES = 8 << 20
# Where published versions' files, once written in a format, are kept for the next downloads.
RENDERED_DIR = "api/rendered"


def file_doc(*content_types: str, etag: bool = False) -> dict:
    """The OpenAPI description of a 200 that is a file (django-ninja cannot infer it from a response class)."""
    response = {"description": "The file" + (" (strong ETag; 304 when If-None-Match holds it)" if etag else ""),
                "content": {kind: {"schema": {"type": "string", "format": "binary"}} for kind in content_types}}
    responses = {200: response}
    if etag:
        responses[304] = {"description": "Not modified: the labels are those of the ETag sent in If-None-Match"}
    return {"responses": responses}


def stream_stored(field_file, filename: str, content_type: str) -> FileResponse:
    """A stored file (runs, answers) read from storage a block at a time."""
    return FileResponse(field_file.open("rb"), as_attachment=True, filename=filename, content_type=content_type)


def _not_modified(request: HttpRequest, etag: str) -> bool:
    wanted = parse_etags(request.headers.get("If-None-Match", ""))
    return "*" in wanted or etag in wanted


def _unmodified_response(etag: str) -> HttpResponse:
    response = HttpResponseNotModified()
    response["ETag"] = etag
    return response


def etagged_export(request: HttpRequest, chunks: Iterable[str], filename: str, content_type: str) -> HttpResponse:
    """A file whose ETag is the SHA-256 of its bytes: the export is written once (to memory, or a temporary
    file past SPOOL_MAX_BYTES) while hashed, then sent, or answered 304 if the client holds those bytes."""
    digest = hashlib.sha256()
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES)
    for chunk in chunks:
        data = chunk.encode()
        digest.update(data)
        spool.write(data)
    etag = f'"{digest.hexdigest()}"'
    if _not_modified(request, etag):
        spool.close()
        return _unmodified_response(etag)
    spool.seek(0)
    return _file(FileResponse(spool, content_type=f"{content_type}; charset=utf-8"), filename, etag)


def etagged_immutable(request: HttpRequest, digest: str, chunks: Callable[[], Iterable[str]], filename: str, content_type: str) -> HttpResponse:
    """A file that never changes, named by `digest` (a published version's SHA-256 and format): its ETag is
    known before anything is read, so a 304 reads nothing; the file is written once to storage, under
    RENDERED_DIR, and every later download streams it from there (gunicorn sends it with sendfile)."""
    etag = f'"{digest}"'
    if _not_modified(request, etag):
        return _unmodified_response(etag)
    name = f"{RENDERED_DIR}/{digest}"
    if not default_storage.exists(name):
        _store(name, chunks())
    return _file(FileResponse(default_storage.open(name, "rb"), content_type=f"{content_type}; charset=utf-8"), filename, etag)


def _store(name: str, chunks: Iterable[str]) -> None:
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES) as spool:
        for chunk in chunks:
            spool.write(chunk.encode())
        spool.seek(0)
        saved = default_storage.save(name, File(spool))
    if saved != name:  # another request stored the same bytes first: keep one copy
        default_storage.delete(saved)


def _file(response: HttpResponse, filename: str, etag: str) -> HttpResponse:
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["ETag"] = etag
    return response
