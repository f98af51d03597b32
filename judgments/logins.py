"""Login throttling (django-axes): whose address a failed login counts against, the page a paused login
gets, and lifting a pause. The settings are LOGIN_FAILURE_LIMIT, LOGIN_LOCKOUT_MINUTES and
TRUSTED_PROXY_COUNT."""

import ipaddress
import math
from datetime import datetime

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Max, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone


def client_address(request: HttpRequest) -> str | None:
    """The address failed logins are counted against: the connection's, or behind TRUSTED_PROXY_COUNT
    proxies the one the outermost proxy saw. Proxies append to X-Forwarded-For, so it is read from the
    right: whatever a client wrote into the header itself stays on the left and is never believed."""
    count = settings.TRUSTED_PROXY_COUNT
    if count:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= count and _is_address(forwarded[-count]):
            return forwarded[-count]
    return request.META.get("REMOTE_ADDR")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def lockout_response(request: HttpRequest, original_response, credentials) -> HttpResponse:
    """The login page again, saying why logging in is paused, until when, and who can lift the pause
    (HTTP 429 with Retry-After). It reads the same whether or not the username exists."""
    username = get_client_username(request, credentials) or ""
    until = paused_until(username, getattr(request, "axes_ip_address", None))
    seconds = max(1, math.ceil((until - timezone.now()).total_seconds()))
    context = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": request.POST.get("next") or request.GET.get("next", ""),
        "lockout_until": until,
        "lockout_minutes": math.ceil(seconds / 60),
    }
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def paused_until(username: str, address: str | None) -> datetime:
    """When the pause on `username` or `address` ends at the latest: LOGIN_LOCKOUT_MINUTES after the last
    failure of whichever reached the limit."""
    cool_off = settings.AXES_COOLOFF_TIME
    recent = AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - cool_off)
    ends = []
    for attempts in (recent.filter(username=username), recent.filter(ip_address=address)):
        found = attempts.aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
        if (found["failures"] or 0) >= settings.AXES_FAILURE_LIMIT:
            ends.append(found["last"] + cool_off)
    return max(ends, default=timezone.now() + cool_off)


def unlock(*, username: str | None = None, address: str | None = None) -> int:
    """Forget the failed logins of `username`, or from `address`, which lifts their pause. Returns how
    many failures were forgotten."""
    if bool(username) == bool(address):
        raise ValueError("name either a username or an address")
    attempts = AccessAttempt.objects.filter(username=username) if username else AccessAttempt.objects.filter(ip_address=address)
    failures = attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
    AxesProxyHandler.reset_attempts(username=username, ip_address=address)
    return failures
