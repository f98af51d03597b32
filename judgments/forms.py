from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q

from .models import Project, Role


class ProjectForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = ["name", "slug", "description"]
        help_texts = {"slug": "Used in the project's web address. Leave empty to derive it from the name."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["slug"].required = False

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if slug and Project.objects.filter(slug=slug).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("Another project already uses this address.")
        return slug


class AddMemberForm(forms.Form):
    user = forms.CharField(label="Username or e-mail", max_length=254)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.RATER)

    def clean_user(self):
        value = self.cleaned_data["user"].strip()
        users = get_user_model().objects.filter(Q(username__iexact=value) | Q(email__iexact=value), is_active=True)
        matches = list(users[:2])
        if len(matches) != 1:
            raise forms.ValidationError(
                "No active user has this username or e-mail." if not matches else "Several users match: use the username."
            )
        return matches[0]


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
