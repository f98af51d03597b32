"""Pools: list, and one pool with its report (pairs per query, what each run alone found, overlap)."""

from typing import Any
from uuid import UUID

from django.db.models import Count
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from judgments import access
from judgments.models import Job, Pool

from .auth import object_access, project_access
from .paging import Page, PageParams, page
from .schemas import ERRORS

router = Router(tags=["pools"])

# A pool's state is its latest build job's: pairs are added by that job.
STATES = {Job.State.QUEUED: "building", Job.State.RUNNING: "building", Job.State.FAILED: "failed", Job.State.SUCCEEDED: "ready",
          Job.State.PARTIAL: "ready"}


class PoolOut(Schema):
    uuid: UUID
    name: str
    kind: str = Field(description="documents or answers")
    state: str = Field(description="building (a build job is queued or running), failed (the latest build failed) or ready")
    n_pairs: int
    depth: int
    query_set: UUID
    runs: list[UUID] = Field(description="The pooled stored runs (answer pools: the answer runs)")


class PoolDetail(PoolOut):
    report: dict[str, Any] = Field(description="pairs_per_query, total_pairs, unique_by_system (per run contribution), "
                                               "overlap, missing_from_corpus, queries_without_pairs")


def _states(pools: list[Pool]) -> dict[int, str]:
    """Each pool's state from its latest build job (one query for the page)."""
    jobs = (Job.objects.filter(kind="build_pool", project_id__in={pool.project_id for pool in pools}, params__pool__in=[pool.pk for pool in pools])
            .order_by("created_at").values_list("params__pool", "state"))
    return {pool_pk: STATES.get(state, "ready") for pool_pk, state in jobs}


def _pool_out(pool: Pool, states: dict[int, str]) -> dict:
    runs = pool.answer_runs.all() if pool.kind == Pool.Kind.ANSWERS else pool.runs.all()
    return {"uuid": pool.uuid, "name": pool.name, "kind": pool.kind, "state": states.get(pool.pk, "ready"), "n_pairs": pool.n_pairs,
            "depth": pool.depth, "query_set": pool.query_set.uuid, "runs": [run.uuid for run in runs]}


def _with_counts(pools):
    return pools.annotate(n_pairs=Count("pairs", distinct=True)).select_related("query_set").prefetch_related("runs", "answer_runs")


@router.get("/{slug}/pools", response={200: Page[PoolOut], **ERRORS}, summary="The project's pools")
def list_pools(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_read_reports")
    result = page(request, _with_counts(project.pools).order_by("-created_at", "pk"), params)
    states = _states(result["items"])
    result["items"] = [_pool_out(pool, states) for pool in result["items"]]
    return result


@router.get("/{slug}/pools/{uuid}", response={200: PoolDetail, **ERRORS}, summary="A pool and its report")
def get_pool(request: HttpRequest, slug: str, uuid: UUID):
    found = object_access(request, slug, access.pool_for_user, uuid, "can_read_reports")
    pool = _with_counts(Pool.objects.filter(pk=found.pk)).get()
    return {**_pool_out(pool, _states([pool])), "report": pool.report}
