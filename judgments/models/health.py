"""Health checks: a project's settings, the checks and their triggers' states."""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from .projects import Project


class HealthSettings(models.Model):
    """A project's staleness checks: how often, against which thresholds, and whom to tell."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="health_settings")
    every_days = models.PositiveIntegerField(default=30)  # the scheduled check runs when the last is this old
    cutoffs = models.JSONField(default=list)  # reported cutoffs for the unjudged share; [] = 10 and 20
    unjudged_warn = models.FloatField(default=0.20)
    unjudged_stale = models.FloatField(default=0.30)
    head_judged_share = models.FloatField(default=0.50)
    new_head_queries = models.PositiveIntegerField(default=20)
    age_days = models.PositiveIntegerField(default=180)
    age_warn = models.FloatField(default=0.25)
    age_stale = models.FloatField(default=0.50)
    # The agreement trigger fires (warn) once the newest graded round has this many grades and its gate still lacks
    # evidence (no pair graded by two raters); empty: it never fires for that, it only says so.
    agreement_fire_after = models.PositiveIntegerField(null=True, blank=True, default=50)
    notify = models.BooleanField(default=True)
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret_sealed = models.TextField(blank=True, editable=False)  # judgments.core.secrets.seal

    def thresholds(self):
        from ..lib.staleness import Thresholds

        return Thresholds(unjudged_warn=self.unjudged_warn, unjudged_stale=self.unjudged_stale,
                          cutoffs=tuple(self.cutoffs or (10, 20)), head_judged_share=self.head_judged_share,
                          new_head_queries=self.new_head_queries, age_days=self.age_days, age_warn=self.age_warn,
                          age_stale=self.age_stale, agreement_fire_after=self.agreement_fire_after)

    @property
    def secret_purpose(self) -> str:
        return f"health-webhook:{self.project_id}"

    def set_webhook_secret(self, secret: str) -> None:
        from ..core.secrets import seal

        self.webhook_secret_sealed = seal(secret, purpose=self.secret_purpose) if secret else ""

    def webhook_secret(self) -> str:
        from ..core.secrets import unseal

        return unseal(self.webhook_secret_sealed, purpose=self.secret_purpose) if self.webhook_secret_sealed else ""

class HealthCheck(models.Model):
    """One run of the staleness checks: each trigger's value and state, as measured then."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="health_checks")
    at = models.DateTimeField(default=timezone.now)
    triggers = models.JSONField(default=dict)  # {key: staleness.Trigger.to_json()}
    firing = models.BooleanField(default=False)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["project", "at"], name="health_check_project_time")]

class TriggerState(models.Model):
    """Where a trigger stands between checks: since when it fires (None: it does not), and a lead's snooze."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trigger_states")
    trigger = models.CharField(max_length=20)
    first_fired_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    snooze_reason = models.CharField(max_length=300, blank=True)
    snoozed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "trigger"], name="trigger_state_per_project")]

    def is_snoozed(self, now=None) -> bool:
        return bool(self.snoozed_until and self.snoozed_until > (now or timezone.now()))
