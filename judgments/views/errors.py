"""Error pages that say what was wrong and where to go: a role without the right (403), a refused form
token (403), an address with nothing behind it (404), a bad query parameter (400), a request body refused
before it was read (411, 413, from `config.http_limits`). The 500 page is Django's own handler with
templates/500.html, which renders without a request, a database or context processors."""

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, TooManyFieldsSent
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import Resolver404

from .. import access


def refusal(request: HttpRequest, status: int, title: str, message: str, hint: str = "") -> TemplateResponse:
    """The error page, rendered: middleware and error handlers answer with it outside a view. When the
    address names a project the user belongs to, the page links back to it."""
    return _page(request, status, title, message, hint, _project_of(request))


def _page(request: HttpRequest, status: int, title: str, message: str, hint: str, project) -> TemplateResponse:
    context = {"title": title, "message": message, "hint": hint, "project": project}
    return TemplateResponse(request, "http_error.html", context, status=status).render()


def _project_of(request: HttpRequest):
    slug = request.resolver_match.kwargs.get("slug") if request.resolver_match else None
    if not slug or not hasattr(request, "user"):
        return None
    try:
        return access.project_for_user(request.user, slug)[0]
    except Http404:
        return None


def bad_request(request: HttpRequest, exception: Exception) -> TemplateResponse:
    """handler400. Only our own BadRequest messages are shown: other suspicious requests (a host not
    allowed, a broken cookie) say nothing an attacker could use."""
    if isinstance(exception, RequestDataTooBig):
        message = (f"The form sent more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 2**20:,.1f} MB besides its files "
                   "(DATA_UPLOAD_MAX_MEMORY_SIZE).")
    elif isinstance(exception, TooManyFieldsSent):
        message = f"The form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields."
    elif type(exception) is BadRequest:
        message = f"The page's address has a value it cannot use. {exception}"
    else:
        message = "The request could not be understood."
    return refusal(request, 400, "Bad request", message)


def forbidden(request: HttpRequest, exception: Exception) -> TemplateResponse:
    """handler403: the reason `access` gave (the role and what it may not do), and whom to ask."""
    project, hint = _project_of(request), ""
    if project is not None:
        leads = ", ".join(m.user.get_username() for m in project.memberships.leads().select_related("user"))
        hint = f"If your work needs it, ask a lead of {project.name} ({leads}) to change your role."
    return _page(request, 403, "Not allowed", str(exception) or "You may not do this.", hint, project)


def not_found(request: HttpRequest, exception: Exception) -> TemplateResponse:
    """handler404: what was not found, when a view said (never the URL patterns Django tried)."""
    said = exception.args[0] if exception.args else None
    if isinstance(exception, Resolver404) or not isinstance(said, str) or not said:
        message = "There is no page at this address."
    else:
        message = said if said.endswith(".") else f"{said}."
    return refusal(request, 404, "Not found", message,
                   "The address may be mistyped or out of date, or what it named was deleted or is not shared with you.")


def csrf_failure(request: HttpRequest, reason: str = "") -> TemplateResponse:
    """CSRF_FAILURE_VIEW: a form sent without a valid token, usually from a page open across a log-out."""
    return refusal(request, 403, "Form expired",
                   "The form was sent without a valid security token, so nothing was saved.",
                   "This happens when the page stayed open while you logged out or in again. Go back, reload the page "
                   "and send the form again.")
