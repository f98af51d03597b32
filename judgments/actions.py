"""Operations across models. Views, commands, tasks and (later) the API all call these."""

from django.db import transaction
from django.utils.text import slugify

from .models import EditConflict, GuidelinesVersion, Membership, Project, Role


class ActionRefused(ValueError):
    """The operation would break a rule of the project; the message says which, for the user."""


def first_free(siblings, base: str, *, field: str = "name", numbered: str = "{base} ({n})") -> str:
    """`base`, or the first of "base (2)", "base (3)"... (`numbered`) that no object of `siblings` has in `field`."""
    candidate, n = base, 1
    while siblings.filter(**{field: candidate}).exists():
        n += 1
        candidate = numbered.format(base=base, n=n)
    return candidate


def unique_project_slug(name: str) -> str:
    return first_free(Project.objects, slugify(name)[:70] or "project", field="slug", numbered="{base}-{n}")


@transaction.atomic
def create_project(*, name: str, creator, slug: str = "", description: str = "") -> Project:
    """Create a project; its creator becomes its first lead."""
    project = Project.objects.create(
        name=name, slug=slug or unique_project_slug(name), description=description, created_by=creator
    )
    Membership.objects.create(project=project, user=creator, role=Role.LEAD)
    return project


def add_member(project: Project, user, role: str) -> Membership:
    if project.memberships.filter(user=user).exists():
        raise ActionRefused(f"{user.username} is already a member of this project.")
    return Membership.objects.create(project=project, user=user, role=role)


@transaction.atomic
def change_role(membership: Membership, role: str) -> Membership:
    if membership.role == Role.LEAD and role != Role.LEAD:
        _keep_a_lead(membership)
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def remove_member(membership: Membership) -> None:
    if membership.role == Role.LEAD:
        _keep_a_lead(membership)
    membership.delete()


def _keep_a_lead(leaving: Membership) -> None:
    # Lock the project's lead rows so two leads demoting each other at once cannot both succeed.
    leads = list(Membership.objects.select_for_update().filter(project_id=leaving.project_id, role=Role.LEAD))
    if all(lead.pk == leaving.pk for lead in leads):
        raise ActionRefused("A project needs at least one lead: make someone else lead first.")


@transaction.atomic
def save_guidelines(project: Project, text: str, *, author, note: str = "", based_on: int | None = None) -> tuple[GuidelinesVersion, bool]:
    """Save the guidelines as a new version, unless the text is unchanged. Returns (version, created).

    `based_on` is the version number the lead started from (0: none yet): when a newer version was
    saved since, EditConflict carries it, rather than the lead's text silently dropping its changes.
    """
    # Lock the project row so two leads saving at once get consecutive version numbers.
    Project.objects.select_for_update().filter(pk=project.pk).first()
    latest = project.guideline_versions.first()
    if latest and latest.text == text:
        return latest, False
    if based_on is not None and based_on != (latest.number if latest else 0):
        raise EditConflict(latest)
    number = latest.number + 1 if latest else 1
    return GuidelinesVersion.objects.create(project=project, number=number, text=text, note=note, author=author), True
