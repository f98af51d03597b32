"""Makes an API token from the command line: a project token, or with --user a member's personal token."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from api.forms import MAX_EXPIRY_DAYS, ProjectTokenForm
from api.models import ApiToken, Scope
from judgments.management.commands._base import ProjectCommand


class Command(ProjectCommand):
    help = "Make an API token for a project and print its secret (shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="the project's slug (as in its web address)")
        parser.add_argument("--name", required=True, help="what the token is for, e.g. 'CI gate'")
        parser.add_argument("--scope", choices=Scope.values, default=Scope.READ,
                            help="read (acts as a viewer) or write (acts as a lead); a personal token never exceeds its owner's role")
        parser.add_argument("--user", help="a member's username: a personal token of theirs; without it, a project token")
        parser.add_argument("--expires-in-days", type=int, default=None, help=f"1 to {MAX_EXPIRY_DAYS}; default: never")

    def handle(self, *args, project, name, scope, user, expires_in_days, **options):
        project = self.project(project)
        form = ProjectTokenForm({"name": name, "scope": scope, "expires_in_days": expires_in_days})
        if not form.is_valid():
            raise CommandError("; ".join(f"{field}: {' '.join(messages)}" for field, messages in form.errors.items()))
        owner = self.member(project, user) if user else None
        token, secret = ApiToken.issue(user=owner, project=project, name=form.cleaned_data["name"], scope=form.cleaned_data["scope"],
                                       expires_at=form.expires_at())
        kind = f"personal token of {owner.username}" if owner else "project token"
        self.stderr.write(f"Made {kind} “{token.name}” ({token.scope}) for {project.slug}; its secret follows, shown only now.")
        self.stdout.write(secret)

    def member(self, project, username: str):
        owner = get_user_model().objects.filter(username=username, memberships__project=project).first()
        if owner is None:
            raise CommandError(f"{username!r} is not a member of {project.slug}: a personal token reaches a project of its owner's")
        return owner
