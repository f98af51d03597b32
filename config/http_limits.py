"""What a request may send, enforced before Django reads the body.

Django reads a request body lazily, but CsrfViewMiddleware reads request.POST (spooling an upload to a
temporary file) before LoginRequiredMiddleware and the view run. `RequestLimitsMiddleware` answers from
the headers alone: an anonymous body meant for a page that needs a login gets the login redirect, and a
body whose Content-Length is over the limit gets 413, in both cases without a byte of it being read.
`UploadLimitHandler` then stops any single upload as it passes UPLOAD_MAX_BYTES, whatever the headers
said, so that no temporary file grows past the limit.

The REST API's views (marked `bearer_token`, see config/urls.py) authenticate by token, not session: their
callers are anonymous here, so they get the members' limits, their refusals as JSON, and their bodies are
left for the view to read after it has checked the token.
"""

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve

from judgments.views.errors import refusal

# Beside its file, an upload's body carries the multipart boundaries and the form's other fields.
FORM_ALLOWANCE_BYTES = 1 << 20
# All an anonymous visitor may post is a login or password-reset form: a few hundred bytes.
ANONYMOUS_BODY_MAX_BYTES = 64 << 10


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


class RequestLimitsMiddleware:
    """Refuses, from the headers alone, the bodies no view would accept. Goes after AuthenticationMiddleware
    (it needs request.user) and answers before any middleware's process_view, CSRF's included, runs."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.login_required = LoginRequiredMiddleware(get_response)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.refusal(request) or self.get_response(request)
        if getattr(request, "refused_upload", None) and _by_token(_view_of(request)):
            # An API view reads its files itself, after the token: one stopped at the limit is missing from them, so
            # the view refused the request as incomplete and stored nothing. Say why instead.
            _field, [upload] = request.refused_upload
            return _refuse(request, 413, "Too large", f"{upload.name} is over the limit of {_megabytes(settings.UPLOAD_MAX_BYTES)} "
                                                      "(UPLOAD_MAX_BYTES): the upload was stopped there. Nothing was saved.")
        return response

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> None:
        """An upload UploadLimitHandler stopped is in request.FILES as a RefusedUpload, for its form to refuse."""
        if request.method == "POST" and request.content_type == "multipart/form-data" and not _by_token(view_func):
            request.FILES  # noqa: B018 (parsed here at the latest, so that a stopped upload is known)
            if refused := getattr(request, "refused_upload", None):
                request.FILES.setlist(*refused)

    def refusal(self, request: HttpRequest) -> HttpResponse | None:
        if "\x00" in request.path_info:  # never part of an address; PostgreSQL would choke on it further down
            return _refuse(request, 400, "Bad request", "The address has a NUL character in it.")
        declared = request.META.get("CONTENT_LENGTH") or ""
        if not declared:
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                # Django reads a body without a length as empty: say so rather than lose the form.
                return _refuse(request, 411, "Length required", "Send the request with a Content-Length header.")
            return None
        try:
            length = int(declared)
        except ValueError:
            return _refuse(request, 400, "Bad request", "The Content-Length header is not a number.")
        if length <= 0:
            return None
        if not request.user.is_authenticated and not _by_token(_view_of(request)):
            return self._anonymous(request, length)
        if request.content_type == "multipart/form-data":
            limit, what = settings.UPLOAD_MAX_BYTES + FORM_ALLOWANCE_BYTES, "UPLOAD_MAX_BYTES"
        else:
            limit, what = settings.DATA_UPLOAD_MAX_MEMORY_SIZE, "DATA_UPLOAD_MAX_MEMORY_SIZE"
        if length > limit:
            return _refuse(request, 413, "Too large", f"The request is {_megabytes(length)}; the limit is "
                                                      f"{_megabytes(limit)} ({what}). Nothing was saved.")
        return None

    def _anonymous(self, request: HttpRequest, length: int) -> HttpResponse | None:
        view = _view_of(request)
        if view is None:
            return None  # Django answers 404 without reading the body
        if getattr(view, "login_required", True):
            return self.login_required.handle_no_permission(request, view)
        if length > ANONYMOUS_BODY_MAX_BYTES:
            return refusal(request, 413, "Too large", f"The request is {_megabytes(length)}: log in first.")
        return None


def _view_of(request: HttpRequest):
    try:
        return resolve(request.path_info).func
    except Resolver404:
        return None


def _by_token(view) -> bool:
    return getattr(view, "bearer_token", False)


def _refuse(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    """The error page, or for the API the JSON error its clients read (codes as in api/errors.py)."""
    if _by_token(_view_of(request)):
        from api.errors import CODES

        return JsonResponse({"detail": message, "code": CODES.get(status, "bad_request")}, status=status)
    return refusal(request, status, title, message)


class RefusedUpload(UploadedFile):
    """Stands in for an upload stopped at the limit, so that its form says why the file is missing."""

    def __init__(self, name: str, received: int):
        super().__init__(file=None, name=name, size=received)
        self.stopped_at_limit = True


class UploadLimitHandler(FileUploadHandler):
    """First of FILE_UPLOAD_HANDLERS: counts each file's bytes as they arrive and stops reading the request
    as soon as one passes UPLOAD_MAX_BYTES (the handlers after it never see those bytes)."""

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > settings.UPLOAD_MAX_BYTES:
            self.request.refused_upload = (self.field_name, [RefusedUpload(self.file_name, self.received)])
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler keeps the file
