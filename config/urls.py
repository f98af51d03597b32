from functools import wraps

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.decorators.http import require_GET

from api.api import api
from api.http import unknown_address, with_head_and_405
from config.health import healthz


def needs_mail(view):
    """Password reset works by mail: without EMAIL_URL its pages do not exist."""

    @wraps(view)  # keeps the view's login_not_required mark
    def wrapped(request, *args, **kwargs):
        if not settings.EMAIL_ENABLED:
            raise Http404("Password reset needs mail (EMAIL_URL).")
        return view(request, *args, **kwargs)

    return wrapped


@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links; a temporary redirect, since the static file's
    name changes with its content."""
    return redirect(static("img/favicon.svg"))


def bearer_only(patterns):
    """The API authenticates each request by its bearer token, not by session: its views need no login
    (LoginRequiredMiddleware) and no CSRF token (no cookie grants anything there); RequestLimitsMiddleware
    gives their bodies the members' limits and answers them in JSON (`bearer_token`). Each answers HEAD, and a
    wrong method in JSON (api/http.py)."""
    for pattern in patterns:
        pattern.callback = with_head_and_405(pattern.callback)
        pattern.callback.login_required = False
        pattern.callback.csrf_exempt = True
        pattern.callback.bearer_token = True
    return patterns


api_patterns, api_app, api_namespace = api.urls

account_urls = [
    path(str(url.pattern), needs_mail(url.callback), name=url.name) if url.name.startswith("password_reset") else url
    for url in auth_urls.urlpatterns
]

urlpatterns = [
    path("favicon.ico", favicon),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("docs/", include("config.docs")),
    path("accounts/", include(account_urls)),
    path("api/", include((bearer_only(api_patterns), api_app), namespace=api_namespace)),
    re_path(r"^api/", unknown_address),
    path("", include("api.urls")),
    path("", include("evaluation.urls")),
    path("", include("judgments.urls")),
]

handler400 = "judgments.views.errors.bad_request"
handler403 = "judgments.views.errors.forbidden"
handler404 = "judgments.views.errors.not_found"
