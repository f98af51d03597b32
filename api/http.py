"""HTTP around the API's operations, which django-ninja leaves out: HEAD is answered as GET without the body (same
status and headers), a method an address does not serve is a JSON 405 with its Allow header, and an address under
/api/ that nothing serves is a JSON 404, so that every answer of the API is JSON `{"detail", "code"}`."""

from collections.abc import Callable
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from .api import error


def with_head_and_405(view: Callable) -> Callable:
    """`view` (one address's operations) answering HEAD wherever it answers GET, and a wrong method in JSON."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method != "HEAD":
            return _not_allowed_in_json(request, _answer(view, request, *args, **kwargs))
        request.method = "GET"
        try:
            response = _answer(view, request, *args, **kwargs)
        finally:
            request.method = "HEAD"
        return _without_body(_not_allowed_in_json(request, response))

    return wrapped


def _answer(view: Callable, request: HttpRequest, *args, **kwargs) -> HttpResponse:
    """The view's answer; django-ninja's own pages (the root /api/ outside DEBUG) raise Http404 past its handlers."""
    try:
        return view(request, *args, **kwargs)
    except Http404:
        return unknown_address(request)


def _not_allowed_in_json(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    if response.status_code != 405 or response.get("Content-Type", "").startswith("application/json"):
        return response
    allowed = set(response["Allow"].replace(" ", "").split(","))
    methods = ", ".join(sorted(allowed | ({"HEAD"} if "GET" in allowed else set())))
    return error(request, 405, f"{request.method} is not allowed here: this address answers {methods}.", headers={"Allow": methods})


def _without_body(response: HttpResponse) -> HttpResponse:
    """The response's status and headers, no body; a streamed file is closed unread. Content-Length stays what
    the GET would send, when it is known."""
    if not response.streaming:
        response["Content-Length"] = str(len(response.content))
        response.content = b""
        return response
    response.close()
    bodiless = HttpResponse(status=response.status_code)
    for header, value in response.items():
        bodiless[header] = value
    return bodiless


@csrf_exempt
def unknown_address(request: HttpRequest) -> HttpResponse:
    """Any address under /api/ that no operation serves (the last API pattern)."""
    return error(request, 404, f"No API operation at {request.path}: see /api/openapi.json for those there are.")


unknown_address.login_required = False
unknown_address.bearer_token = True
