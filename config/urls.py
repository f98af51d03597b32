from functools import wraps

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_GET

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


account_urls = [
    path(str(url.pattern), needs_mail(url.callback), name=url.name) if url.name.startswith("password_reset") else url
    for url in auth_urls.urlpatterns
]

urlpatterns = [
    path("favicon.ico", favicon),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include(account_urls)),
    path("", include("evaluation.urls")),
    path("", include("judgments.urls")),
]

handler400 = "judgments.views.errors.bad_request"
handler403 = "judgments.views.errors.forbidden"
handler404 = "judgments.views.errors.not_found"
