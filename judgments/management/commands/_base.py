"""What the import and pooling commands share: finding the project and reporting bad input."""

from django.core.management.base import BaseCommand, CommandError

from judgments.models import Project


class ProjectCommand(BaseCommand):
    """A command whose first argument is a project slug; bad input exits non-zero with the problem."""

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug (as in its web address)")

    def project(self, slug: str) -> Project:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project with the slug {slug!r}")
        return project
