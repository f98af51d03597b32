from datetime import timedelta

from django import forms
from django.utils import timezone

from judgments.models import Project

from .models import Scope

MAX_EXPIRY_DAYS = 366


class ProjectTokenForm(forms.Form):
    """A project token: what it is for, its scope, when it expires."""

    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “CI gate of the ranker repository”.")
    scope = forms.ChoiceField(choices=Scope.choices, initial=Scope.READ, widget=forms.RadioSelect,
                              help_text="Read acts as a viewer (downloads lists and results); write acts as a lead (also uploads, "
                                        "starts evaluations and deletes).")
    expires_in_days = forms.IntegerField(label="Expires after (days)", min_value=1, max_value=MAX_EXPIRY_DAYS, initial=90, required=False,
                                         help_text=f"1 to {MAX_EXPIRY_DAYS} days; leave empty for a token that does not expire.")

    def expires_at(self):
        days = self.cleaned_data["expires_in_days"]
        return timezone.now() + timedelta(days=days) if days else None


class TokenForm(ProjectTokenForm):
    """A personal token: as a project token, for one of the user's projects, within the user's role there."""

    project = forms.ModelChoiceField(queryset=Project.objects.none(), empty_label=None,
                                     help_text="A token reaches one project, and never more than your role in it allows.")
    field_order = ["name", "project", "scope", "expires_in_days"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = Project.objects.filter(memberships__user=user).order_by("name")
        self.fields["scope"].help_text = "Read downloads lists and results; write also uploads runs and starts evaluations (leads only)."
