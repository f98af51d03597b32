"""Who may see and do what. Every view gets its objects through these functions.

Outsiders get 404 (never a hint that the object exists); members without the right get 403.
"""

from functools import cache
from uuid import UUID

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404

from .core import rows
from .models import (AnswerRun, Document, GuidelinesVersion, Invitation, Job, Membership, Pool, Project, QueryCollection, QueryLog, Round,
                     RoundItem, StoredRun)
from .ops import grading

# What each capability lets a member do, and which roles have it: the 403 page says both.
CAPABILITIES = {
    "can_manage": "changing the project and its work: only its leads may",
    "can_read_reports": "reading reports and exports: leads and viewers may",
    "can_grade": "grading: leads and raters may",
}


def project_for_user(user, slug: str, need: str | None = None) -> tuple[Project, Membership]:
    """The project `slug` and the user's membership; 404 for non-members, 403 without `need`. A user whose
    membership this request has already read (`membership_now`, set by the API's token check) is not read again."""
    membership = getattr(user, "membership_now", None)
    if membership is None or membership.project.slug != slug:
        membership = (
            Membership.objects.select_related("project").filter(project__slug=slug, user_id=user.pk).first()
            if user.is_authenticated
            else None
        )
    if membership is None:
        raise Http404("No such project")
    require(membership, need)
    return membership.project, membership


def _project_object(user, slug: str, need: str | None, related: str, what: str, select=(), **lookup):
    """One object of a project's `related` objects, for a member with `need`; 404 if there is none."""
    project, membership = project_for_user(user, slug, need)
    objects = getattr(project, related)
    found = (objects.select_related(*select) if select else objects).filter(**lookup).first()
    if found is None:
        raise Http404(f"No such {what}")
    return found, membership


def job_for_user(user, slug: str, job_uuid: UUID, need: str = "can_read_reports") -> tuple[Job, Membership]:
    """A job of a project the user belongs to; jobs are for leads and viewers by default."""
    return _project_object(user, slug, need, "jobs", "job", uuid=job_uuid)


def query_set_for_user(user, slug: str, set_uuid: UUID, need: str) -> tuple[QueryCollection, Membership]:
    return _project_object(user, slug, need, "query_sets", "query set", uuid=set_uuid)


def document_for_user(user, slug: str, doc_id: str, need: str) -> tuple[Document, Membership]:
    """A corpus document; the answers graded in answer rounds are not corpus documents."""
    document, membership = _project_object(user, slug, need, "documents", "document", doc_id=doc_id)
    if document.answer_run_id is not None:
        raise Http404("No such document")
    return document, membership


def run_for_user(user, slug: str, run_uuid: UUID, need: str) -> tuple[StoredRun, Membership]:
    return _project_object(user, slug, need, "runs", "run", uuid=run_uuid)


def answer_run_for_user(user, slug: str, run_uuid: UUID, need: str = "can_read_reports") -> tuple[AnswerRun, Membership]:
    """An answer run of the project; like stored runs, for leads and viewers (raters never see system outputs)."""
    return _project_object(user, slug, need, "answer_runs", "answer run", uuid=run_uuid)


def list_version_for_user(user, slug: str, version_uuid: UUID, need: str = "can_read_reports"):
    """A published judgment-list version of the project, for leads and viewers: it holds the labels, and raters
    never see grades but their own."""
    return _project_object(user, slug, need, "list_versions", "judgment-list version", select=("round", "lineage"), uuid=version_uuid)


def query_log_for_user(user, slug: str, log_uuid: UUID, need: str) -> tuple[QueryLog, Membership]:
    return _project_object(user, slug, need, "query_logs", "query log", uuid=log_uuid)


def evaluation_for_user(user, slug: str, evaluation_uuid: UUID, need: str = "can_read_reports"):
    """An evaluation of the project. Raters never see evaluations: scores would bias their grading."""
    return _project_object(user, slug, need, "evaluations", "evaluation", select=("round__guidelines", "round__pool"), uuid=evaluation_uuid)


def answer_evaluation_for_user(user, slug: str, evaluation_uuid: UUID, need: str = "can_read_reports"):
    """An answer evaluation of the project. Raters never see it, as for run evaluations."""
    return _project_object(user, slug, need, "answer_evaluations", "answer evaluation", select=("query_set",), uuid=evaluation_uuid)


def judge_only_evaluation_for_user(user, slug: str, evaluation_uuid: UUID, need: str = "can_read_reports"):
    """A judge-only evaluation of the project. Raters never see it, as for run evaluations."""
    return _project_object(user, slug, need, "judge_only_evaluations", "judge-only evaluation", select=("query_set",),
                           uuid=evaluation_uuid)


def judge_estimate_for_user(user, slug: str, estimate_uuid: UUID, need: str = "can_read_reports"):
    """An estimate with a judge of the project. Raters never see it: it shows the raters' labels and the judge's."""
    return _project_object(user, slug, need, "judge_estimates", "estimate with a judge", select=("round__pool__query_set", "judge"),
                           uuid=estimate_uuid)


def pool_for_user(user, slug: str, pool_uuid: UUID, need: str) -> tuple[Pool, Membership]:
    return _project_object(user, slug, need, "pools", "pool", uuid=pool_uuid)


def round_for_user(user, slug: str, round_uuid: UUID, need: str) -> tuple[Round, Membership]:
    return _project_object(user, slug, need, "rounds", "round", select=("guidelines",), uuid=round_uuid)


def judge_for_user(user, slug: str, round_uuid: UUID, judge_uuid: UUID, need: str):
    """An automatic judge of a round, with its round and project. Raters never see machine grades or
    calibration (they would bias their own grading): every judge page needs at least `can_read_reports`."""
    round, membership = round_for_user(user, slug, round_uuid, need)
    judge = round.judges.filter(uuid=judge_uuid).first()
    if judge is None:
        raise Http404("No such judge")
    judge.round = round
    return judge, membership


def grading_round_for_user(user, slug: str, round_uuid: UUID) -> tuple[Round, Membership]:
    """A round the user grades in: 403 for members who do not grade or are not among its raters.

    Every grade goes through here, so it is one raw query (membership, project, round, guidelines and
    "is a rater") instead of two ORM queries, whose building cost more than running them."""
    if not user.is_authenticated:
        raise Http404("No such project")
    with connection.cursor() as cursor:
        cursor.execute(_grading_round_sql(), {"user": user.pk, "slug": slug, "uuid": _UUID_OF_ROUND.get_db_prep_value(round_uuid, connection)})
        row = cursor.fetchone()
    if row is None:
        raise Http404("No such project")
    membership, project, *found = rows.instances(row[:-1], (Membership, Project, Round, GuidelinesVersion))
    membership.project = project
    require(membership, "can_grade")
    round, guidelines = found
    if round.pk is None:
        raise Http404("No such round")
    if not row[-1]:
        raise PermissionDenied("You are not a rater of this round.")
    round.project, round.guidelines = project, guidelines
    return round, membership


_UUID_OF_ROUND = Round._meta.get_field("uuid")


@cache
def _grading_round_sql() -> str:
    membership, project, round, guidelines = (rows.table(model) for model in (Membership, Project, Round, GuidelinesVersion))
    return (f"SELECT {rows.columns(Membership, Project, Round, GuidelinesVersion)}, "
            f"EXISTS (SELECT 1 FROM {rows.table(Round.raters.through)} rr WHERE rr.round_id = {round}.id AND rr.user_id = %(user)s) "
            f"FROM {membership} JOIN {project} ON {project}.id = {membership}.project_id "
            f"LEFT JOIN {round} ON {round}.project_id = {project}.id AND {round}.uuid = %(uuid)s "
            f"LEFT JOIN {guidelines} ON {guidelines}.id = {round}.guidelines_id "
            f"WHERE {project}.slug = %(slug)s AND {membership}.user_id = %(user)s")


def item_of_round(round: Round, item_uuid: UUID, *, related: bool = True) -> RoundItem:
    """A pair of the round; with `related`, its query, document and pool pair come in the same query."""
    item = grading.load_item(round=round, uuid=item_uuid, related=related)
    if item is None:
        raise Http404("No such pair in this round")
    item.round = round
    return item


def member_of_project(project: Project, member_uuid: UUID) -> Membership:
    membership = project.memberships.select_related("user").filter(uuid=member_uuid).first()
    if membership is None:
        raise Http404("No such member")
    return membership


def invitation_of_project(project: Project, invitation_uuid: UUID) -> Invitation:
    invitation = project.invitations.filter(uuid=invitation_uuid).first()
    if invitation is None:
        raise Http404("No such invitation")
    return invitation


def invitation_for_link(token: str) -> Invitation | None:
    """The invitation a link names, or None. Whoever holds the link may see it: the link is the secret."""
    return Invitation.objects.select_related("project", "invited_by").for_token(token).first()


def may_create_projects(user) -> bool:
    """Staff and superusers create projects; everyone else too when PROJECT_CREATION is "anyone"."""
    return user.is_authenticated and (user.is_superuser or user.is_staff or settings.PROJECT_CREATION == "anyone")


def require(membership: Membership, need: str | None) -> None:
    if need is None:
        return
    if need not in CAPABILITIES:
        raise ValueError(f"unknown capability {need!r}")
    if not getattr(membership, need):
        raise PermissionDenied(f"Your role ({membership.get_role_display().lower()}) does not allow {CAPABILITIES[need]}.")
