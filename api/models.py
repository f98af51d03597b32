"""Access tokens for the REST API, stored as a digest: personal ones (a user's, never more than their role) and
project ones (the project's, made by a lead for CI; they outlive their maker's membership)."""

import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

SECRET_PREFIX = "vrd_"
# How many characters of the secret a list shows, so that its owner can tell tokens apart.
SHOWN_PREFIX_LENGTH = len(SECRET_PREFIX) + 6


def digest_of(secret: str) -> str:
    """The stored form of a secret. SHA-256 without salt is enough: the secret is 256 random bits, not a password."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Scope(models.TextChoices):
    READ = "read", "Read"
    WRITE = "write", "Read and write"


class ApiTokenQuerySet(models.QuerySet):
    def of_project(self) -> "ApiTokenQuerySet":
        """The project tokens (no user), newest first."""
        return self.filter(user__isnull=True).select_related("created_by").order_by("-created_at", "pk")

    def usable(self) -> "ApiTokenQuerySet":
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)


class ApiToken(models.Model):
    """An access token for one project. The secret is shown once, at creation; only its digest is kept.

    A personal token has a `user` and acts with that user's current role. A project token has none: it belongs
    to the project, acts as a lead (write scope) or a viewer (read scope), and lives on when `created_by` leaves."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    project = models.ForeignKey("judgments.Project", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user or 'the project'} in {self.project}"

    @classmethod
    def issue(cls, *, user, project, name: str, scope: str, expires_at=None, created_by=None) -> tuple["ApiToken", str]:
        """A new token and its secret; the secret is never stored, so the caller shows it now or never.
        `user` None makes a project token, `created_by` saying which lead made it."""
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, project=project, name=name, scope=scope, expires_at=expires_at, created_by=created_by or user,
                                   prefix=secret[:SHOWN_PREFIX_LENGTH], digest=digest_of(secret))
        return token, secret

    @property
    def is_project_token(self) -> bool:
        return self.user_id is None

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    @property
    def may_write(self) -> bool:
        return self.scope == Scope.WRITE

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
