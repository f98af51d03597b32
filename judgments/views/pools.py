from uuid import UUID

from django.contrib import messages
from django.db.models import Count, Exists, OuterRef, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access
from ..forms import AddRunsForm, PoolForm, RunsParams, errors_text, page_of, query_params
from ..lib.pooling import suggested_depth
from ..models import RoundItem
from ..models import Pool
from ..ops.answers import answered_query_ids
from ..ops.jobs import start_job
from ..ops.pools import PoolRefused, answer_coverage, coverage_set, create_answer_pool, create_pool, run_coverage, run_query_ids


def _queue_build(request, pool, runs) -> HttpResponse:
    hint = suggested_depth(pool.runs.count() + len(runs))
    if hint and pool.depth < hint[0]:
        messages.warning(request, f"{pool.runs.count() + len(runs)} systems are pooled at depth {pool.depth}: "
                                  f"TREC practice pools {hint[0]} to {hint[1]} deep when more than 3 systems take part.")
    job = start_job(kind="build_pool", project=pool.project, owner=request.user,
                    params={"pool": pool.pk, "runs": [run.pk for run in runs]})
    return redirect(job)


def judged_share(pool) -> dict[str, float | None]:
    """Per pooled run, the share of its pooled pairs that some round has judged (grades or flags)."""
    judged = Exists(RoundItem.objects.filter(pair=OuterRef("pk"), n_judged__gt=0))
    names = list(pool.runs.values_list("name", flat=True))
    counts = pool.pairs.annotate(judged=judged).aggregate(**{
        f"{kind}{i}": Count("pk", filter=Q(provenance__has_key=name, **({"judged": True} if kind == "j" else {})))
        for i, name in enumerate(names) for kind in ("n", "j")})
    return {name: counts[f"j{i}"] / counts[f"n{i}"] if counts[f"n{i}"] else None for i, name in enumerate(names)}


@require_GET
def pools(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership,
               "pools": project.pools.select_related("query_set").prefetch_related("runs", "answer_runs")}
    return TemplateResponse(request, "judgments/pools.html", context)


@require_http_methods(["GET", "POST"])
def pool_create(request: HttpRequest, slug: str) -> HttpResponse:
    """The pool form, with each run's coverage of the chosen query set (htmx swaps it in when the choice
    changes; without JavaScript, links reload the page with another set chosen)."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    asked = query_params(RunsParams(request.GET, project=project, newest_by_default=False))["query_set"]
    by_run = {run.pk: run_query_ids(run) for run in project.runs.all()}
    answered, what = _answered(project, by_run)
    found = coverage_set(project, asked, answered)
    chosen = found.query_set
    form = PoolForm(request.POST or None, project=project, initial={"query_set": chosen})
    form.fields["query_set"].widget.attrs.update({"hx-get": request.path, "hx-target": "#run-coverage", "hx-swap": "outerHTML"})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["kind"] == Pool.Kind.ANSWERS:
                # One pair per answer: small enough to build in the request, no job needed.
                pool = create_answer_pool(project, name=data["name"], query_set=data["query_set"],
                                          answer_runs=list(data["answer_runs"]), user=request.user)
                messages.success(request, f"Pool of answers built: {pool.report['total_pairs']:,} answers to grade.")
                return redirect(pool)
            pool = create_pool(project, name=data["name"], query_set=data["query_set"], depth=data["depth"],
                               strategy=data["strategy"], user=request.user)
        except PoolRefused as refusal:
            form.add_error("answer_runs" if data["kind"] == Pool.Kind.ANSWERS else None, str(refusal))
        else:
            return _queue_build(request, pool, list(data["runs"]))
    if request.method == "POST" and form.cleaned_data.get("query_set") not in (None, chosen):
        chosen = form.cleaned_data["query_set"]
        found = coverage_set(project, chosen, answered)
    context = {"project": project, "membership": membership, "form": form, "query_set": chosen,
               "chosen": found, "by_default": not asked and request.method == "GET", "what": what,
               "other_query_sets": project.query_sets.exclude(pk=chosen.pk) if chosen else [],
               "coverage": run_coverage(project, chosen, by_run), "answer_coverage": answer_coverage(project, chosen)}
    template = "judgments/pool_form.html#coverage" if request.htmx and request.method == "GET" else "judgments/pool_form.html"
    return TemplateResponse(request, template, context)


def _answered(project, by_run: dict[int, set[str]]) -> tuple[list[set[str]], str]:
    """The query ids each stored run answers (`by_run`), or each answer run without stored runs, and which they
    are: the form's default query set is the one they answer, not the newest (on the demo, the answer runs'
    questions)."""
    if by_run:
        return list(by_run.values()), "run"
    return [answered_query_ids(run) for run in project.answer_runs.all()], "answer run"


@require_GET
def pool(request: HttpRequest, slug: str, pool_uuid: UUID) -> TemplateResponse:
    pool, membership = access.pool_for_user(request.user, slug, pool_uuid, "can_read_reports")
    pairs = pool.pairs.select_related("query")
    answers = pool.kind == Pool.Kind.ANSWERS
    context = {"project": pool.project, "membership": membership, "pool": pool, "report": pool.report,
               "judged_share": {} if answers else judged_share(pool),
               "runs": pool.answer_runs.all() if answers else pool.runs.all(), "page": page_of(request, pairs, 50),
               "add_form": AddRunsForm(pool=pool) if membership.can_manage and not answers else None}
    return TemplateResponse(request, "judgments/pool.html", context)


@require_POST
def pool_add_runs(request: HttpRequest, slug: str, pool_uuid: UUID) -> HttpResponse:
    pool, membership = access.pool_for_user(request.user, slug, pool_uuid, "can_manage")
    form = AddRunsForm(request.POST, pool=pool)
    if pool.kind == Pool.Kind.ANSWERS:
        messages.error(request, "A pool of answers takes no stored runs: build another pool of answers instead.")
        return redirect(pool)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return redirect(pool)
    return _queue_build(request, pool, list(form.cleaned_data["runs"]))
