"""Projects: the token's project, and its summary."""

from django.http import HttpRequest
from ninja import Field, Router, Schema

from judgments.models import Query

from .auth import project_access
from .schemas import ERRORS

router = Router(tags=["projects"])


class ProjectItem(Schema):
    slug: str
    name: str
    role: str


class ProjectCounts(Schema):
    queries: int
    documents: int
    runs: int
    rounds: int


class ProjectOut(ProjectItem):
    scale: dict | None
    counts: ProjectCounts
    gate_run_days: int | None = Field(None, description="Days the runs the CI gate uploads are kept unless promoted; null: kept.")


class ProjectList(Schema):
    items: list[ProjectItem]
    next: str | None = None


@router.get("", response={200: ProjectList, **ERRORS}, summary="The projects this token can see (its own)")
def list_projects(request: HttpRequest):
    token, membership = request.auth
    return {"items": [{"slug": token.project.slug, "name": token.project.name, "role": membership.role}], "next": None}


@router.get("/{slug}", response={200: ProjectOut, **ERRORS}, summary="A project: counts and the scale of its latest round")
def get_project(request: HttpRequest, slug: str):
    project, membership = project_access(request, slug, None)
    latest_round = project.rounds.order_by("-created_at").values_list("scale", flat=True).first()
    counts = {
        "queries": Query.objects.filter(collection__project=project).count(),
        "documents": project.documents.filter(answer_run__isnull=True).count(),
        "runs": project.runs.count(),
        "rounds": project.rounds.count(),
    }
    return {"slug": project.slug, "name": project.name, "role": membership.role, "scale": latest_round, "counts": counts,
            "gate_run_days": project.gate_run_days}
