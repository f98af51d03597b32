"""Files the API sends: streamed downloads, and label files with a strong ETag answering If-None-Match with 304,
rendered once per state and kept in storage."""

import hashlib
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable

from django.core.cache import cache
from django.core.files import File
from django.core.files.storage import default_storage
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import content_disposition_header, parse_etags

from judgments.models import Round
from judgments.ops import judgment_files


# An export bigger than this is spooled to a temporary file while its digest is computed.
SPOOL_MAX_BYTES = 8 << 20
# Where judgment-list files, once written, are kept for the next downloads: versions' as <sha256>.<format>,
# rounds' as rounds/<round>/<format>-<sha256> (the current state's only).
RENDERED_DIR = "api/rendered"
# How long a round's list rendered in one state is remembered (its file stays until a newer state replaces it).
EXPORT_CACHE_SECONDS = 7 * 24 * 3600
# The longest a request waits for another one rendering the same file, and the life of a dead renderer's lock.
RENDER_LOCK_SECONDS = 120


def file_doc(*content_types: str, etag: bool = False) -> dict:
    """The OpenAPI description of a 200 that is a file (django-ninja cannot infer it from a response class)."""
    response = {"description": "The file" + (" (strong ETag; 304 when If-None-Match holds it)" if etag else ""),
                "content": {kind: {"schema": _file_schema(kind)} for kind in content_types}}
    responses = {200: response}
    if etag:
        responses[304] = {"description": "Not modified: the file is the one whose ETag was sent in If-None-Match"}
    return {"responses": responses}


def _file_schema(content_type: str) -> dict:
    """Text is a string (generated clients decode it), a JSON file any JSON value, anything else bytes."""
    if content_type.startswith("text/"):
        return {"type": "string"}
    return {} if content_type == "application/json" else {"type": "string", "format": "binary"}


def etagged_stored(request: HttpRequest, field_file, key: str, filename: str, content_type: str) -> HttpResponse:
    """A stored file that never changes (a run's Parquet) read from storage a block at a time, with the SHA-256
    of its bytes as a strong ETag: computed on the first download and kept in the cache under `key` (the
    object's uuid: a name in storage can be reused once its file is deleted), so a 304 reads nothing."""
    cache_key = f"api:sha256:{key}"
    digest = cache.get(cache_key)
    if digest is None:
        with field_file.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        cache.set(cache_key, digest, EXPORT_CACHE_SECONDS)
    etag = f'"{digest}"'
    if _not_modified(request, etag):
        return _unmodified_response(etag)
    return _file(FileResponse(field_file.open("rb"), content_type=content_type), filename, etag)


def etagged_chunks(request: HttpRequest, chunks: Iterable[str], filename: str, content_type: str) -> HttpResponse:
    """A file written now from `chunks` (a query set's CSV), spooled while its SHA-256 is computed: a strong
    ETag, and a 304 sends nothing when the client holds the same bytes."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES)
    etag = f'"{_write(spool, chunks)}"'
    if _not_modified(request, etag):
        spool.close()
        return _unmodified_response(etag)
    return _file(FileResponse(spool, content_type=f"{content_type}; charset=utf-8"), filename, etag)


def _not_modified(request: HttpRequest, etag: str) -> bool:
    wanted = parse_etags(request.headers.get("If-None-Match", ""))
    return "*" in wanted or etag in wanted


def _unmodified_response(etag: str) -> HttpResponse:
    response = HttpResponseNotModified()
    response["ETag"] = etag
    return response


def etagged_immutable(request: HttpRequest, digest: str, chunks: Callable[[], Iterable[str]], filename: str, content_type: str) -> HttpResponse:
    """A file that never changes, named by `digest` (a published version's SHA-256 and format): its ETag is
    known before anything is read, so a 304 reads nothing; the file is written once to storage, under
    RENDERED_DIR, by one request while any others asking at the same time wait for it, and every later
    download streams it from there (gunicorn sends it with sendfile)."""
    etag = f'"{digest}"'
    if _not_modified(request, etag):
        return _unmodified_response(etag)
    name = f"{RENDERED_DIR}/{digest}"

    def render() -> str:
        if not default_storage.exists(name):
            _store(name, chunks())
        return name

    _once(f"api:rendered:{digest}", lambda: name if default_storage.exists(name) else None, render)
    return _file(FileResponse(default_storage.open(name, "rb"), content_type=f"{content_type}; charset=utf-8"), filename, etag)


def labels_export(request: HttpRequest, round: Round, fmt: str, filename: str, *, newest_change=judgment_files.UNREAD) -> HttpResponse:
    """A round's judgment list now, with the SHA-256 of its bytes as a strong ETag. The list is rendered once
    per state of the round's labels (`judgment_files.labels_state`), kept in storage, and its digest kept in
    the cache under that state: a download then costs one indexed row read (none if `newest_change` was read
    with the round) and a file sent, a 304 no file. Raises ValueError when the format cannot hold the round's ids."""
    key = f"api:export:{round.uuid}:{fmt}:{judgment_files.labels_state(round, newest_change=newest_change)}"
    digest = _once(key, lambda: cache.get(key), lambda: _render_labels(round, fmt))
    etag = f'"{digest}"'
    if _not_modified(request, etag):
        return _unmodified_response(etag)
    try:
        stored = default_storage.open(_labels_name(round, fmt, digest), "rb")
    except FileNotFoundError:  # the file of a state left and come back to (settings changed twice): render it again
        cache.delete(key)
        return labels_export(request, round, fmt, filename)  # the state read again
    content_type = judgment_files.FORMATS[fmt].content_type
    return _file(FileResponse(stored, content_type=f"{content_type}; charset=utf-8"), filename, etag)


def _labels_name(round: Round, fmt: str, digest: str) -> str:
    return f"{RENDERED_DIR}/rounds/{round.uuid}/{fmt}-{digest}"


def _render_labels(round: Round, fmt: str) -> str:
    """Write the round's list in `fmt` from one snapshot, keep it, and note its digest under the snapshot's
    state; the round's files of older states are deleted, and so are the labels changes before it."""
    with judgment_files.snapshot():
        state = judgment_files.labels_state(round)
        judgment_files.check_exportable(round, fmt)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES) as spool:
            digest = _write(spool, judgment_files.export(round, fmt))
            name = _labels_name(round, fmt, digest)
            if not default_storage.exists(name):
                _save(name, spool)
    cache.set(f"api:export:{round.uuid}:{fmt}:{state}", digest, EXPORT_CACHE_SECONDS)
    folder = f"{RENDERED_DIR}/rounds/{round.uuid}"
    for older in default_storage.listdir(folder)[1]:
        if older.startswith(f"{fmt}-") and older != name.rsplit("/", 1)[1]:
            default_storage.delete(f"{folder}/{older}")
    judgment_files.prune_labels_changes(round)
    return digest


def _once(key: str, found: Callable[[], str | None], make: Callable[[], str]) -> str:
    """`found()`, or else `make()` run by one request at a time for `key` (a lock in the cache: Redis in
    production, so across processes and machines): the others wait until it is done and use its result
    rather than all rendering the same file at once. A lock left by a dead process expires."""
    if (value := found()) is not None:
        return value
    lock = f"{key}:lock"
    deadline = time.monotonic() + RENDER_LOCK_SECONDS
    while not cache.add(lock, 1, RENDER_LOCK_SECONDS):
        time.sleep(0.05)
        if (value := found()) is not None:
            return value
        if time.monotonic() > deadline:
            return make()
    try:
        return found() or make()
    finally:
        cache.delete(lock)


def _write(spool, chunks: Iterable[str]) -> str:
    """Write the chunks to `spool`, rewound after; the SHA-256 of their bytes."""
    digest = hashlib.sha256()
    for chunk in chunks:
        data = chunk.encode()
        digest.update(data)
        spool.write(data)
    spool.seek(0)
    return digest.hexdigest()


def _store(name: str, chunks: Iterable[str]) -> None:
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES) as spool:
        _write(spool, chunks)
        _save(name, spool)


def _save(name: str, spool) -> None:
    saved = default_storage.save(name, File(spool))
    if saved != name:  # another request stored the same bytes first: keep one copy
        default_storage.delete(saved)


def _file(response: HttpResponse, filename: str, etag: str) -> HttpResponse:
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["ETag"] = etag
    return response


def clean_rendered(storage=default_storage) -> list[str]:
    """Delete the kept files nothing can ask for any more: the lists of rounds that are gone, and the files of
    versions that are gone (their project was deleted). Returns the names deleted. Run hourly (api.tasks)."""
    from judgments.models import JudgmentListVersion

    if not storage.exists(RENDERED_DIR):
        return []
    folders, files = storage.listdir(RENDERED_DIR)
    deleted = []
    if "rounds" in folders:
        rounds = set(Round.objects.values_list("uuid", flat=True))
        for folder in storage.listdir(f"{RENDERED_DIR}/rounds")[0]:
            if not _is_uuid_in(folder, rounds):
                for name in storage.listdir(f"{RENDERED_DIR}/rounds/{folder}")[1]:
                    storage.delete(f"{RENDERED_DIR}/rounds/{folder}/{name}")
                    deleted.append(f"{RENDERED_DIR}/rounds/{folder}/{name}")
    digests = set(JudgmentListVersion.objects.values_list("sha256", flat=True))
    for name in files:
        if name.split(".", 1)[0] not in digests:
            storage.delete(f"{RENDERED_DIR}/{name}")
            deleted.append(f"{RENDERED_DIR}/{name}")
    return deleted


def _is_uuid_in(text: str, uuids: set) -> bool:
    try:
        return uuid.UUID(text) in uuids
    except ValueError:
        return False

