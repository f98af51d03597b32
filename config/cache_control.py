"""`Cache-Control: no-store` on every answer that may hold one user's data, so that no browser cache, proxy or
CDN keeps a copy: the page that shows a new token's secret once, a project's labels downloaded on a shared
machine, an error page naming a project's leads.

That is every response to a logged-in request (pages, htmx partials, downloads, error pages) and every answer
of the API, whose callers Django sees as anonymous (they send a token, not a session), so it is known by its
path. Static files (WhiteNoise answers them before this middleware) and pages to anonymous visitors (the login
page, /healthz) keep their own headers. A response's other directives stay: no-store already outweighs them.

ETags keep working: no-store stops caches from keeping a body, not a client that keeps the ETag itself
(clients/verdict.py) from sending If-None-Match and getting a 304.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import get_script_prefix, reverse
from django.utils.cache import patch_cache_control


class NoStoreMiddleware:
    """Goes after AuthenticationMiddleware (it reads request.user) and before every middleware that may answer
    a logged-in request itself (RequestLimitsMiddleware's refusals)."""

    def __init__(self, get_response):
        self.get_response = get_response
        # The API's root as request.path_info spells it: reverse() puts the script prefix in front.
        self.api_root = "/" + reverse("api:api-root").removeprefix(get_script_prefix())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # One that says no-store already (never_cache) is left alone before request.user is read: /healthz must
        # answer 503, not fail loading a session cookie's user while the cache is down.
        if "no-store" in response.get("Cache-Control", ""):
            return response
        if request.path_info.startswith(self.api_root) or request.user.is_authenticated:
            patch_cache_control(response, no_store=True)
        return response
