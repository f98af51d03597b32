"""Who may see and do what. Every view gets its objects through these functions.

Outsiders get 404 (never a hint that the object exists); members without the right get 403.
"""

from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.http import Http404

from .models import Job, Membership, Project

CAPABILITIES = ("can_manage", "can_read_reports", "can_grade")


def project_for_user(user, slug: str, need: str | None = None) -> tuple[Project, Membership]:
    """The project `slug` and the user's membership; 404 for non-members, 403 without `need`."""
    membership = (
        Membership.objects.select_related("project").filter(project__slug=slug, user_id=user.pk).first()
        if user.is_authenticated
        else None
    )
    if membership is None:
        raise Http404("No such project")
    require(membership, need)
    return membership.project, membership


def job_for_user(user, slug: str, job_uuid: UUID, need: str = "can_read_reports") -> tuple[Job, Membership]:
    """A job of a project the user belongs to; jobs are for leads and viewers by default."""
    project, membership = project_for_user(user, slug, need)
    job = Job.objects.filter(project=project, uuid=job_uuid).first()
    if job is None:
        raise Http404("No such job")
    return job, membership


def member_of_project(project: Project, member_uuid: UUID) -> Membership:
    membership = project.memberships.select_related("user").filter(uuid=member_uuid).first()
    if membership is None:
        raise Http404("No such member")
    return membership


def require(membership: Membership, need: str | None) -> None:
    if need is None:
        return
    if need not in CAPABILITIES:
        raise ValueError(f"unknown capability {need!r}")
    if not getattr(membership, need):
        raise PermissionDenied(f"Your role ({membership.get_role_display()}) does not allow this.")
