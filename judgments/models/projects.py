"""Projects, their members and invitations, and the display template raters see."""

import base64
import hashlib
import uuid

from django.conf import settings
from django.core.cache import cache
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac



# Query and document ids hold up to 512 characters, so that every id the readers accept (INPUT_ID_MAX_BYTES,
# at most 512 UTF-8 bytes) fits.
ID_LENGTH = 512

class EditConflict(Exception):
    """Someone saved the object after the editor loaded it; `current` is the object as saved now."""

    def __init__(self, current):
        super().__init__(f"{current} was saved by someone else meanwhile")
        self.current = current

class Versioned(models.Model):
    """An object leads edit in forms. `version` counts its saved edits: a form sends back the version it
    was loaded with, and a save based on an older one is refused rather than silently undoing the edit
    saved in between (optimistic locking: nothing stays locked while a lead reads the form)."""

    version = models.PositiveIntegerField(default=1, editable=False)

    class Meta:
        abstract = True

    def save_edit(self, based_on: int, fields) -> None:
        """Write `fields` if the row is still at version `based_on`, counting the edit; raises EditConflict
        with the row as saved now when another edit came first."""
        manager = type(self)._default_manager
        values = {column: getattr(self, column) for column in (self._meta.get_field(name).attname for name in fields)}
        if manager.filter(pk=self.pk, version=based_on).update(version=F("version") + 1, **values) != 1:
            raise EditConflict(manager.get(pk=self.pk))
        self.version = based_on + 1

class Project(Versioned):
    """One judgment effort for one search product or index."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    gate_run_days = models.PositiveIntegerField(
        "Keep runs the CI gate uploads (days)", null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Runs uploaded with origin “gate” are deleted this many days after upload unless promoted or used by an "
                  "evaluation or a pool; leave empty to keep them.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("judgments:project", args=[self.slug])

    def display_template(self) -> list["DisplayField"]:
        """The display template's lines in order. Every pair a rater sees is shown through it, so it is
        cached: for a minute at most, and saving or deleting a line clears it at once (in every web
        process when CACHE_URL is shared)."""
        return cache.get_or_set(DisplayField.cache_key(self.pk), lambda: list(self.display_fields.all()), 60)

class Role(models.TextChoices):
    LEAD = "lead", "Lead"
    RATER = "rater", "Rater"
    VIEWER = "viewer", "Viewer"

class MembershipQuerySet(models.QuerySet):
    def leads(self) -> "MembershipQuerySet":
        return self.filter(role=Role.LEAD)

class Membership(models.Model):
    """A user's role in a project. What each role may do is decided here and nowhere else."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    added_at = models.DateTimeField(default=timezone.now)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["user__username"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"

    @property
    def can_manage(self) -> bool:
        return self.role == Role.LEAD

    @property
    def can_read_reports(self) -> bool:
        return self.role in (Role.LEAD, Role.VIEWER)

    @property
    def can_grade(self) -> bool:
        return self.role in (Role.LEAD, Role.RATER)

class InvitationQuerySet(models.QuerySet):
    def pending(self) -> "InvitationQuerySet":
        return self.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())

    def for_token(self, token: str) -> "InvitationQuerySet":
        return self.filter(token_hash=Invitation.hash_of(token))

class Invitation(models.Model):
    """An invitation to join a project with a role, sent to an e-mail address, accepted through a secret link.

    The link's token is an HMAC of the invitation's random uuid under SECRET_KEY, so a lead can copy the
    link again; the database keeps only the token's SHA-256, which finds the invitation from a link but
    cannot be turned back into one. A new SECRET_KEY voids every link."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} ({self.role}) to {self.project}"

    def save(self, *args, **kwargs) -> None:
        self.token_hash = self.hash_of(self.token)
        super().save(*args, **kwargs)

    @property
    def token(self) -> str:
        digest = salted_hmac("judgments.Invitation", self.uuid.hex, algorithm="sha256").digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    @staticmethod
    def hash_of(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def get_absolute_url(self) -> str:
        return reverse("judgments:invitation", args=[self.token])

    @property
    def status(self) -> str:
        if self.accepted_at:
            return self.Status.ACCEPTED
        if self.revoked_at:
            return self.Status.REVOKED
        return self.Status.PENDING if self.expires_at > timezone.now() else self.Status.EXPIRED

class DisplayField(models.Model):
    """One line of a project's display template: which document field raters see, and how."""

    class Render(models.TextChoices):
        TEXT = "text", "Text"
        LINK = "link", "Link"
        IMAGE = "image", "Image"
        LONG_TEXT = "long", "Long text (folded)"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="display_fields")
    field = models.CharField(max_length=100)
    label = models.CharField(max_length=100)
    render = models.CharField(max_length=8, choices=Render.choices, default=Render.TEXT)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "pk"]
        constraints = [models.UniqueConstraint(fields=["project", "field"], name="display_field_once")]

    @staticmethod
    def cache_key(project_pk: int) -> str:
        return f"display-template:{project_pk}"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        cache.delete(self.cache_key(self.project_id))

    def delete(self, *args, **kwargs):
        cache.delete(self.cache_key(self.project_id))
        return super().delete(*args, **kwargs)
