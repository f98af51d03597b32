"""The REST API (django-ninja): one NinjaAPI, its error handlers, and the routers of each area.

Each area's endpoints live in their own module with their own Router; adding an area is one
`api.add_router` line below. An operation on a path another module already serves (POST .../runs beside
GET .../runs) goes on that module's router (`from .runs import router`; `@router.post(...)`): Django serves
only the first of two URL patterns with the same route, so a second router's copy would never be reached.
Everything answers JSON errors `{"detail", "code"}` (see errors.py).
"""

import logging

from django.core.exceptions import PermissionDenied, ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError

from . import (embedding_endpoint, evaluations, jobs, judge_estimates, judge_only, llm_endpoint, pools, projects, query_sets,
               round_setup, rounds, runs, tokens, unjudged, uploads, version, versions, webhooks)
from . import removal  # noqa: F401 (its operations go on the routers of runs, evaluations and projects)
from .auth import BearerToken
from .errors import CODES, ApiError

log = logging.getLogger(__name__)
api = NinjaAPI(
    title="Verdict",
    version="1",
    description="Search-relevance judgment lists, stored runs and evaluations. Authenticate with "
                "`Authorization: Bearer vrd_...` (a personal access token from the API tokens page, or a project token).",
    auth=BearerToken(),
    urls_namespace="api",
    # Swagger UI from the static files django-ninja ships (ninja is in INSTALLED_APPS): no CDN, and the
    # online validator badge (an image from swagger.io) is off.
    docs=Swagger(settings={"validatorUrl": None}),
)


def error(request: HttpRequest, status: int, detail: str, code: str | None = None, headers=None) -> HttpResponse:
    response = api.create_response(request, {"detail": detail, "code": code or CODES.get(status, "error")}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


@api.exception_handler(ApiError)
def api_error(request, exc: ApiError):
    return error(request, exc.status_code, exc.message, exc.code, exc.headers)


@api.exception_handler(AuthenticationError)
def unauthenticated(request, exc: AuthenticationError):
    return error(request, 401, "Send a valid token: Authorization: Bearer vrd_...", headers={"WWW-Authenticate": 'Bearer realm="verdict"'})


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    return error(request, exc.status_code, exc.message)


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    return error(request, 404, str(exc) or "Not found.")


@api.exception_handler(PermissionDenied)
def forbidden(request, exc: PermissionDenied):
    return error(request, 403, str(exc) or "Your role does not allow this.")


@api.exception_handler(DjangoValidationError)
def invalid(request, exc: DjangoValidationError):
    return error(request, 400, " ".join(exc.messages))


@api.exception_handler(ValidationError)
def invalid_request(request, exc: ValidationError):
    """Pydantic's refusals of a parameter or body, as one sentence naming each field."""
    problems = "; ".join(f"{'.'.join(str(part) for part in problem.get('loc', ()))}: {problem.get('msg', 'invalid')}" for problem in exc.errors)
    return error(request, 400, problems or "Invalid request.")


@api.exception_handler(Exception)
def unexpected(request, exc: Exception):
    """A bug or an outage: JSON like every other answer, with nothing of the exception in it (its message and
    traceback can name server paths and data); the log has them."""
    log.error("API %s %s failed", request.method, request.path, exc_info=exc)
    return error(request, 500, "An unexpected error stopped this request; the server's log has the details.", "server_error")


api.add_router("/v1/projects", projects.router)
api.add_router("/v1/projects", query_sets.router)
api.add_router("/v1/projects", runs.router)
api.add_router("/v1/projects", runs.answers_router)
api.add_router("/v1/projects", pools.router)
api.add_router("/v1/projects", rounds.router)
api.add_router("/v1/projects", round_setup.router)
api.add_router("/v1/projects", versions.router)
api.add_router("/v1/projects", uploads.router)
api.add_router("/v1/projects", jobs.router)
api.add_router("/v1/projects", evaluations.router)
api.add_router("/v1/projects", unjudged.router)
api.add_router("/v1/projects", judge_only.router)
api.add_router("/v1/projects", judge_estimates.router)
api.add_router("/v1/projects", llm_endpoint.router)
api.add_router("/v1/projects", embedding_endpoint.router)
api.add_router("/v1/projects", tokens.router)
api.add_router("/v1/projects", webhooks.router)
api.add_router("/v1", version.router)
