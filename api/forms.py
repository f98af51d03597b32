from django import forms

from judgments.models import Project

from .models import Scope

MAX_EXPIRY_DAYS = 366


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “CI gate of the ranker repository”.")
    project = forms.ModelChoiceField(queryset=Project.objects.none(), empty_label=None,
                                     help_text="A token reaches one project, and never more than your role in it allows.")
    scope = forms.ChoiceField(choices=Scope.choices, initial=Scope.READ, widget=forms.RadioSelect,
                              help_text="Read downloads lists and results; write also uploads runs and starts evaluations (leads only).")
    expires_in_days = forms.IntegerField(label="Expires after (days)", min_value=1, max_value=MAX_EXPIRY_DAYS, initial=90, required=False,
                                         help_text=f"1 to {MAX_EXPIRY_DAYS} days; leave empty for a token that does not expire.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = Project.objects.filter(memberships__user=user).order_by("name")
