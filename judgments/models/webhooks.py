"""Job webhooks and their deliveries."""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from .jobs import Job
from .projects import Project


class Webhook(models.Model):
    """A URL that hears, from the worker, when each job of the project ends: a JSON POST signed with its own secret
    (judgments.ops.webhooks). Leads set it; its secret is sealed (judgments.core.secrets), shown once when made."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField("URL", max_length=500)
    secret_sealed = models.TextField(editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.url

    @property
    def secret_purpose(self) -> str:
        return f"job-webhook:{self.uuid}"

    def set_secret(self, secret: str) -> None:
        from ..core.secrets import seal

        self.secret_sealed = seal(secret, purpose=self.secret_purpose)

    def secret(self) -> str:
        from ..core.secrets import unseal

        return unseal(self.secret_sealed, purpose=self.secret_purpose)

class WebhookDelivery(models.Model):
    """One event for one webhook, as signed and sent (the same bytes on every try), and how its tries went."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="+")
    event = models.CharField(max_length=40)
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
