"""The server's version, for clients that check they speak the same API: ``GET /api/v1/version`` and the
``X-Verdict-Version`` header on every answer to a request with a valid token.

Both need a token: an anonymous caller learns nothing of which release (and so which known bugs) runs here.
The version is the engine's (`evaluation.engine.__version__`), the one source the wheel is built from too.
"""

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema

from evaluation.engine import __version__

from .schemas import ERRORS

HEADER = "X-Verdict-Version"

router = Router(tags=["version"])


class ServerVersionOut(Schema):
    version: str


@router.get("/version", response={200: ServerVersionOut, **ERRORS}, summary="The server's version")
def version(request: HttpRequest):
    """Verdict's version on this server (major.minor.patch): a client warns when its major.minor differs."""
    return {"version": __version__}


class VersionHeaderMiddleware:
    """Adds the header to answers whose request the API authenticated (ninja sets request.auth then), refusals
    and downloads included."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, "auth", None) is not None:
            response[HEADER] = __version__
        return response
