from functools import wraps

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.http import Http404
from django.urls import include, path


def needs_mail(view):
    """Password reset works by mail: without EMAIL_URL its pages do not exist."""

    @wraps(view)  # keeps the view's login_not_required mark
    def wrapped(request, *args, **kwargs):
        if not settings.EMAIL_ENABLED:
            raise Http404("Password reset needs mail (EMAIL_URL).")
        return view(request, *args, **kwargs)

    return wrapped


account_urls = [
    path(str(url.pattern), needs_mail(url.callback), name=url.name) if url.name.startswith("password_reset") else url
    for url in auth_urls.urlpatterns
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include(account_urls)),
    path("", include("evaluation.urls")),
    path("", include("judgments.urls")),
]

handler400 = "judgments.views.errors.bad_request"
