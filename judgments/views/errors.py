"""Error pages that say what was wrong: a bad query parameter (400), a request body refused before it
was read (411, 413, from `judgments.http_limits`)."""

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest
from django.template.response import TemplateResponse


def refusal(request: HttpRequest, status: int, title: str, message: str) -> TemplateResponse:
    """The error page, rendered: middleware and error handlers answer with it outside a view."""
    return TemplateResponse(request, "http_error.html", {"title": title, "message": message}, status=status).render()


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
