"""Long work through the API: building a pool (202 with its job), and following any job of the project.

Jobs are queued exactly as the app's pages queue them (judgments.ops.jobs.start_job, handed to Celery on commit).
"""

from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from judgments import access
from judgments.forms import PoolForm
from judgments.models import Job, Pool
from judgments.ops.jobs import CANCELLED_BEFORE_START, start_job
from judgments.ops.pools import PoolRefused, create_pool

from . import pools
from .auth import project_access
from .errors import ApiError
from .schemas import ERRORS, ErrorOut
from .uploads import clean_text

router = Router(tags=["jobs"])

STATES = {Job.State.QUEUED: "queued", Job.State.RUNNING: "running", Job.State.SUCCEEDED: "done",
          Job.State.PARTIAL: "finished_with_failures", Job.State.FAILED: "failed"}
# What a finished job made, by kind: (the API route that reads it, the job parameter naming it).
RESULTS = {"evaluate_runs": ("api:get_evaluation", "evaluation"), "build_pool": ("api:get_pool", "pool"),
           "evaluate_judge_only": ("api:get_judge_only_evaluation", "judge_only_evaluation"),
           "estimate_with_judge": ("api:get_judge_estimate", "judge_estimate")}


class JobOut(Schema):
    uuid: UUID
    kind: str
    state: str = Field(description="queued, running, done, finished_with_failures (it ended, but some of its parts "
                                   "failed: see failures), failed or cancelled")
    progress: float = Field(description="0 to 1: the share of the job's current step done")
    message: str = Field(description="What the job is doing, why it failed, or how many of its parts failed")
    failures: dict[str, int] = Field(description="Parts that failed, by cause (e.g. a judge run's pairs: "
                                                 "\"connection refused\": 5); empty unless finished_with_failures")
    url: str
    result_url: str | None = Field(description="Where the job's product is read, once the job is done")


def job_state(job: Job) -> str:
    if job.state == Job.State.FAILED and (job.error == CANCELLED_BEFORE_START or job.params.get("cancel")):
        return "cancelled"
    return STATES[job.state]


def job_url(request: HttpRequest, job: Job) -> str:
    return request.build_absolute_uri(reverse("api:get_job", args=[job.project.slug, job.uuid]))


def job_out(request: HttpRequest, job: Job) -> dict:
    done = job.state in (Job.State.SUCCEEDED, Job.State.PARTIAL)
    progress = 1.0 if done else min(1.0, job.progress_done / job.progress_total) if job.progress_total else 0.0
    failures = dict(job.failures) if job.state == Job.State.PARTIAL else {}
    result_url = None
    if done and job.kind in RESULTS:
        route, param = RESULTS[job.kind]
        result_url = request.build_absolute_uri(reverse(route, args=[job.project.slug, _result_uuid(job, param)]))
    message = job.error or (f"Finished with {job.failure_count:,} failures: " + ", ".join(
        f"{n:,} {cause}" for cause, n in failures.items()) if failures else job.progress_message)
    return {"uuid": job.uuid, "kind": job.kind, "state": job_state(job), "progress": progress, "message": message,
            "failures": failures, "url": job_url(request, job), "result_url": result_url}


def _result_uuid(job: Job, param: str) -> str:
    if param == "pool":  # the build job names its pool by primary key, as the app queues it
        return str(Pool.objects.values_list("uuid", flat=True).get(pk=job.params["pool"]))
    return job.params[param]


@router.get("/{slug}/jobs/{uuid}", response={200: JobOut, **ERRORS}, summary="A job: its state, progress and, once done, its result's URL")
def get_job(request: HttpRequest, slug: str, uuid: UUID):
    project_access(request, slug, "can_read_reports")
    job, _ = access.job_for_user(request.auth[0].actor, slug, uuid)
    return job_out(request, job)


def accepted(request: HttpRequest, response: HttpResponse, body: dict, job: Job) -> Status:
    """202 with the job's URL in the body and in Location."""
    response["Location"] = job_url(request, job)
    return Status(202, body)


class PoolIn(Schema):
    name: str
    query_set: UUID
    runs: list[UUID] = Field(description="Stored runs to pool")
    depth: int = Field(10, description="Documents pooled per run and query")
    strategy: Pool.Strategy = Field(Pool.Strategy.BEST_RANK, description="The order raters judge in when the budget is smaller than the pool")


class PoolStarted(Schema):
    pool: pools.PoolOut
    job: JobOut


@pools.router.post("/{slug}/pools", response={202: PoolStarted, **ERRORS, 409: ErrorOut},
                   summary="Build a pool of documents from stored runs (a job)",
                   description="Validated as the app's pool form validates it (a name in use is 409; runs that answer none "
                               "of the set's queries, an unknown run or query set, a depth out of range are 400 naming the field).")
def start_pool(request: HttpRequest, response: HttpResponse, slug: str, body: PoolIn):
    project, _ = project_access(request, slug, "can_manage")
    if project.pools.filter(name=clean_text(body.name, "name")).exists():
        raise ApiError(409, f"The project already has a pool named {body.name.strip()!r}.")
    user = request.auth[0].user
    form = PoolForm({"name": body.name, "kind": Pool.Kind.DOCUMENTS, "query_set": body.query_set, "runs": body.runs,
                     "depth": body.depth, "strategy": body.strategy}, project=project)
    if not form.is_valid():
        raise form_error(form)
    data = form.cleaned_data
    try:
        pool = create_pool(project, name=data["name"], query_set=data["query_set"], depth=data["depth"], strategy=data["strategy"], user=user)
    except PoolRefused as refusal:
        raise ApiError(400, str(refusal)) from None
    job = start_job(kind="build_pool", project=project, owner=user, params={"pool": pool.pk, "runs": [run.pk for run in data["runs"]]})
    pool = pools._with_counts(Pool.objects.filter(pk=pool.pk)).get()
    return accepted(request, response, {"pool": pools._pool_out(pool, {pool.pk: "building"}), "job": job_out(request, job)}, job)


def form_error(form) -> ApiError:
    """A Django form's refusal (the app's own validation) as one 400 naming each field: `field: message`."""
    return ApiError(400, "; ".join(f"{field if field != '__all__' else 'request'}: {' '.join(messages)}"
                                   for field, messages in form.errors.items()))
