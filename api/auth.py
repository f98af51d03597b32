"""Who a bearer token is, and what it may reach.

A token reaches ONE project, with a scope (read or write). A personal token never grants more than its owner's
current role in that project: every request reads the membership afresh, so a demoted or removed member's
tokens shrink or stop at once. A project token has no owner: it acts as a lead with the write scope and as a
viewer with the read scope (never as a rater: grading is a person's), whoever made it and whether they are still
a member. Another project's objects are 404, as for outsiders in the app.
"""

import functools
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.db import connection
from django.db.models import Q
from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from judgments import access
from judgments.core import rows
from judgments.models import Membership, Project, Role

from .errors import ApiError, RateLimited, Unauthenticated
from .models import SECRET_PREFIX, ApiToken, digest_of

# last_used_at is written at most this often per token, not on every request.
LAST_USED_GRANULARITY = timedelta(minutes=1)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class BearerToken(HttpBearer):
    """`Authorization: Bearer vrd_...`; request.auth becomes (token, membership)."""

    def __call__(self, request: HttpRequest):
        if not request.headers.get(self.header):
            raise Unauthenticated("Send a token: Authorization: Bearer vrd_... (make one on the API tokens page).")
        found = super().__call__(request)
        if found is None:
            raise Unauthenticated("The Authorization header must read: Bearer vrd_...")
        return found

    def authenticate(self, request: HttpRequest, secret: str) -> tuple[ApiToken, Membership]:
        token, membership = find_token(secret.strip())
        enforce_rate_limit(token)
        note_use(token)
        token.actor = token.user if token.user_id else ProjectTokenActor()
        # The finders of judgments.access read the project's membership again unless told this request's.
        token.actor.membership_now = membership
        return token, membership


class ProjectTokenActor(AnonymousUser):
    """Whom judgments.access sees behind a project token: no person (nothing it makes has a maker), only the
    role the token's scope gives it, set as `membership_now`."""

    is_authenticated = True


_TOKEN_MODELS = (ApiToken, Project, get_user_model(), Membership)


@functools.cache
def _token_sql() -> str:
    """The token with its project, owner and the owner's membership there, in one statement: this runs on every
    API request (raw: building it with the ORM cost more than running it)."""
    token, project, user, membership = (rows.table(model) for model in _TOKEN_MODELS)
    return (f"SELECT {rows.columns(*_TOKEN_MODELS)} FROM {token} JOIN {project} ON {project}.id = {token}.project_id "
            f"LEFT JOIN {user} ON {user}.id = {token}.user_id LEFT JOIN {membership} ON {membership}.project_id = {token}.project_id "
            f"AND {membership}.user_id = {token}.user_id WHERE {token}.digest = %s")


def find_token(secret: str) -> tuple[ApiToken, Membership]:
    """The usable token with this secret and the membership it acts with (its owner's in its project, or the
    role a project token's scope gives); 401 saying why otherwise (a wrong secret tells nothing more)."""
    row = None
    if secret.startswith(SECRET_PREFIX):
        with connection.cursor() as cursor:
            cursor.execute(_token_sql(), [digest_of(secret)])
            row = cursor.fetchone()
    if row is None:
        raise Unauthenticated("This token is not valid.")
    token, token.project, user, membership = rows.instances(row, _TOKEN_MODELS)
    if token.state != "active":
        raise Unauthenticated(f"This token is {token.state}: make a new one on the API tokens page.")
    if token.is_project_token:
        return token, Membership(project=token.project, role=Role.LEAD if token.may_write else Role.VIEWER)
    token.user = user
    if not user.is_active:
        raise Unauthenticated("This token is not valid.")
    if membership.pk is None:
        raise Unauthenticated("This token's owner is no longer a member of its project.")
    membership.project, membership.user = token.project, user
    return token, membership


def enforce_rate_limit(token: ApiToken) -> None:
    """At most API_RATE_LIMIT requests per token per clock minute, counted in the shared cache (Redis in
    production, so that every web process counts together). 0 turns the limit off."""
    limit = settings.API_RATE_LIMIT
    if not limit:
        return
    now = timezone.now().timestamp()
    window = int(now // 60)
    key = f"api:rate:{token.pk}:{window}"
    cache.add(key, 0, timeout=120)
    try:
        count = cache.incr(key)
    except ValueError:  # the key expired between add and incr: this request opens the window
        cache.set(key, count := 1, timeout=120)
    if count > limit:
        raise RateLimited(retry_after=max(1, int((window + 1) * 60 - now + 0.999)), limit=limit)


def note_use(token: ApiToken) -> None:
    """Records when the token was last used, at most once a minute: a conditional UPDATE, skipped when fresh."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_GRANULARITY:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_GRANULARITY)
    ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
    token.last_used_at = now


def require_write(request: HttpRequest) -> None:
    """403 for a read-scoped token."""
    token, _ = request.auth
    if not token.may_write:
        raise ApiError(403, "This token is read-only: changes need a token with the write scope.")


def project_access(request: HttpRequest, slug: str, need: str | None) -> tuple[Project, Membership]:
    """The token's project if `slug` names it, with the owner's current membership.

    404 for any other project (never a hint that it exists); 403 when the owner's role lacks `need` (one of
    judgments.access.CAPABILITIES) or when a read-scoped token asks to change something."""
    token, membership = request.auth
    if slug != token.project.slug:
        raise Http404("No such project")
    if request.method not in SAFE_METHODS:
        require_write(request)
    access.require(membership, need)
    return membership.project, membership


def object_access(request: HttpRequest, slug: str, finder, uuid: UUID, need: str | None):
    """An object of the token's project, through the app's own access function `finder` (e.g.
    judgments.access.run_for_user), so that the API and the pages apply the same rules."""
    project_access(request, slug, need)
    token, _ = request.auth
    found, _ = finder(token.actor, slug, uuid, need)
    return found


def object_with(request: HttpRequest, slug: str, need: str, model, related: str, uuid: UUID, extra: str = "") -> tuple[Any, tuple]:
    """object_access's fast path for the downloads CI jobs run by the hundred: the token's project's `model`
    with this uuid and its foreign key `related`, in one raw statement, with the values of `extra` columns
    (SQL naming the model's table `{table}`); 404 when there is none."""
    project, _ = project_access(request, slug, need)
    field = model._meta.get_field(related)
    table, joined = rows.table(model), rows.table(field.related_model)
    found = rows.fetch_one((model, field.related_model), f"JOIN {joined} ON {joined}.id = {table}.{field.column}",
                           f"{table}.project_id = %s AND {table}.uuid = %s",
                           [project.pk, model._meta.get_field("uuid").get_db_prep_value(uuid, connection)], extra.format(table=table))
    if found is None:
        raise Http404(f"No such {model._meta.verbose_name}")
    (found_object, related_object), values = found
    setattr(found_object, related, related_object)
    found_object.project = project
    return found_object, values

