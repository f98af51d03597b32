"""What the import and pooling commands share: finding the project and reporting bad input."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from judgments.models import Project
from judgments.ops.imports import INPUT_ERRORS, check_upload_size


class ProjectCommand(BaseCommand):
    """A command whose first argument is a project slug; bad input exits non-zero with the problem."""

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug (as in its web address)")

    def project(self, slug: str) -> Project:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project with the slug {slug!r}")
        return project


@contextmanager
def importing(file: Path, errors: tuple[type[Exception], ...] = INPUT_ERRORS) -> Iterator[None]:
    """Import `file` inside: a file over UPLOAD_MAX_BYTES is refused first; an unreadable file, or one of `errors`
    (the importer's refusals), exits non-zero with the problem."""
    try:
        check_upload_size(file.name, file.stat().st_size)
        yield
    except OSError as exc:
        raise CommandError(f"{file}: {exc.strerror}") from None
    except errors as problem:
        raise CommandError(str(problem)) from None
