"""Operations across models. Views, commands, tasks and (later) the API all call these."""

import logging
import smtplib
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from ..models import EditConflict, GuidelinesVersion, Invitation, Membership, Project, Role

log = logging.getLogger(__name__)


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
def create_project(*, name: str, creator, slug: str = "", description: str = "", gate_run_days: int | None = None) -> Project:
    """Create a project; its creator becomes its first lead. `gate_run_days`: how long runs the CI gate uploads are
    kept (None: for good)."""
    project = Project.objects.create(
        name=name, slug=slug or unique_project_slug(name), description=description, created_by=creator,
        gate_run_days=gate_run_days,
    )
    Membership.objects.create(project=project, user=creator, role=Role.LEAD)
    return project


def add_member(project: Project, user, role: str) -> Membership:
    """Add `user` directly, for scripts, the demo and tests; people join through invitations (`invite_member`)."""
    if project.memberships.filter(user=user).exists():
        raise ActionRefused(f"{user.username} is already a member of this project.")
    return Membership.objects.create(project=project, user=user, role=role)


def invite_member(project: Project, *, email: str, role: str, invited_by, absolute_url: Callable[[str], str]) -> tuple[Invitation, bool]:
    """Invite `email` to the project with `role`, and mail the link when mail is on (EMAIL_ENABLED).
    Returns the invitation and whether the mail went out.

    Every address gets an invitation, whether an account uses it or not: nothing here tells a lead which
    addresses have accounts. `absolute_url` turns the link's path into a full address for the mail."""
    if project.invitations.pending().filter(email__iexact=email).exists():
        raise ActionRefused(f"{email} already has a pending invitation (below): copy its link, or revoke it first.")
    invitation = Invitation.objects.create(project=project, email=email, role=role, invited_by=invited_by,
                                           expires_at=timezone.now() + timedelta(days=settings.INVITATION_DAYS))
    if not settings.EMAIL_ENABLED:
        return invitation, False
    inviter = invited_by.get_full_name() or invited_by.username
    body = (f"{inviter} invites you to join the project “{project.name}” on Verdict as {invitation.get_role_display().lower()}.\n\n"
            f"Open this link, log in and accept:\n{absolute_url(invitation.get_absolute_url())}\n\n"
            f"The link works until {timezone.localtime(invitation.expires_at):%Y-%m-%d %H:%M %Z}. Verdict has no sign-up: "
            f"without an account, ask {inviter} or an administrator to create one for {email}.\n")
    try:
        EmailMessage(f"Invitation to {project.name} on Verdict", body, to=[email]).send()
    except (OSError, smtplib.SMTPException):
        log.exception("The invitation mail to %s could not be sent", email)
        return invitation, False
    return invitation, True


def acceptance_problem(invitation: Invitation, user) -> str | None:
    """Why `user` (or anybody, for a used, withdrawn or expired link) cannot accept the invitation, or None.
    An account with an e-mail address must have the invited one, so that a forwarded or leaked link does
    not let just anyone in."""
    status = invitation.status
    if status == Invitation.Status.ACCEPTED:
        return f"This invitation was accepted on {timezone.localtime(invitation.accepted_at):%Y-%m-%d}; a link works once."
    if status == Invitation.Status.REVOKED:
        return "This invitation was withdrawn by a lead of the project."
    if status == Invitation.Status.EXPIRED:
        return (f"This invitation expired on {timezone.localtime(invitation.expires_at):%Y-%m-%d}: "
                "ask the person who invited you for a new one.")
    if not user.is_authenticated:
        return None
    if user.email and user.email.lower() != invitation.email.lower():
        return (f"This invitation is for {invitation.email}, and you are logged in as {user.username} ({user.email}). "
                f"Log out and log in with the account that uses {invitation.email}, or ask a lead to invite {user.email}.")
    membership = invitation.project.memberships.filter(user=user).first()
    if membership is not None:
        return f"You are already a member of this project ({membership.get_role_display().lower()}): ask a lead to change your role."
    return None


@transaction.atomic
def accept_invitation(invitation: Invitation, user) -> Membership:
    """Make `user` a member with the invited role; the link then stops working."""
    # Lock the invitation so that a double click or two accounts at once accept it only once.
    invitation = Invitation.objects.select_for_update().select_related("project").get(pk=invitation.pk)
    problem = acceptance_problem(invitation, user)
    if problem:
        raise ActionRefused(problem)
    try:
        with transaction.atomic():
            membership = Membership.objects.create(project=invitation.project, user=user, role=invitation.role)
    except IntegrityError:  # joined through another invitation at the same moment
        raise ActionRefused("You are already a member of this project.") from None
    invitation.accepted_by, invitation.accepted_at = user, timezone.now()
    invitation.save(update_fields=["accepted_by", "accepted_at"])
    return membership


def revoke_invitation(invitation: Invitation) -> None:
    if invitation.status != Invitation.Status.PENDING:
        raise ActionRefused(f"The invitation for {invitation.email} is no longer pending ({invitation.status.label.lower()}).")
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])


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
