"""Query logs: upload, map the columns, import as a job; then draw tiered samples and save them as query sets."""

import re
from uuid import UUID

from django.contrib import messages
from django.core.files.storage import default_storage
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access
from ..forms import LogMappingForm, LogUploadForm, SamplingForm, SaveSampleForm, errors_text
from ..lib import charts
from ..lib.querylog import LogProblem
from ..lib.sampling import shortfalls, traffic_curve
from ..ops import log_sampling
from ..ops.imports import stash_upload
from ..ops.jobs import start_job

PREVIEW_QUERIES = 100


@require_GET
def query_logs(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    context = {"project": project, "membership": membership, "logs": project.query_logs.all()}
    return TemplateResponse(request, "judgments/query_logs.html", context)


@require_http_methods(["GET", "POST"])
def log_upload(request: HttpRequest, slug: str) -> HttpResponse:
    """Step 1: the file. It is kept aside until its columns are mapped (step 2)."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = LogUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        stashed = stash_upload(project, form.cleaned_data["file"])
        earlier = log_sampling.same_file_logs(project, log_sampling.stashed_sha256(stashed)).last()
        if earlier:
            messages.warning(request, log_sampling.same_file_warning(earlier))
        return redirect("judgments:query-log-map", slug, stashed.split("/")[-2])
    return TemplateResponse(request, "judgments/upload.html",
                            {"project": project, "membership": membership, "form": form, "title": "Import a query log"})


def _stashed(project, token: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{32}", token):
        raise Http404("No such upload")
    folder = f"uploads/{project.slug}/{token}"
    try:
        _folders, files = default_storage.listdir(folder)
    except FileNotFoundError:
        files = []
    if not files:
        raise Http404("No such upload: it was imported already, removed because its columns were not mapped in time, "
                      "or it never finished uploading")
    return f"{folder}/{files[0]}"


@require_http_methods(["GET", "POST"])
def log_map(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """Step 2: which column holds the query, the time, the count and the segments; then the import job."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    stashed = _stashed(project, token)
    filename = stashed.rsplit("/", 1)[-1]
    context = {"project": project, "membership": membership, "filename": filename}
    try:
        preview = log_sampling.preview_upload(stashed)
    except LogProblem as problem:
        default_storage.delete(stashed)
        messages.error(request, str(problem))
        return redirect("judgments:query-log-upload", slug)
    guess = preview.guess
    initial = {"name": log_sampling.new_log_name(project, filename), "query_column": guess.query,
               "time_column": guess.time or "", "count_column": guess.count or "", "segment_columns": list(guess.segments)}
    form = LogMappingForm(request.POST or None, initial=initial, columns=preview.columns, project=project)
    if request.method == "POST" and form.is_valid():
        job = start_job(kind="import_query_log", project=project, owner=request.user,
                        params={"upload": stashed, **form.job_params()})
        return redirect(job)
    context.update(form=form, preview=preview)
    return TemplateResponse(request, "judgments/query_log_map.html", context)


@require_GET
def query_log(request: HttpRequest, slug: str, log_uuid: UUID) -> TemplateResponse:
    """A log's counts, the raw spellings its normalisation merged, and the sampling form; with
    ?preview=1, the tiers, the traffic curve and the sample those settings draw."""
    log, membership = access.query_log_for_user(request.user, slug, log_uuid, "can_read_reports")
    previewing = "preview" in request.GET
    form = SamplingForm(request.GET if previewing else SamplingForm.initial_data(), log=log)
    context = {"project": log.project, "membership": membership, "log": log, "form": form,
               "merged": log_sampling.merged_variants(log),
               "same_file": log_sampling.same_file_logs(log.project, log.sha256, exclude=log) if log.sha256 else []}
    if previewing and form.is_valid():
        context.update(_preview(log, form))
    return TemplateResponse(request, "judgments/query_log.html", context)


def _preview(log, form: SamplingForm) -> dict:
    try:
        drawn = log_sampling.draw(log, form.settings())
    except ValueError as problem:
        form.add_error(None, str(problem))
        return {}
    boundaries = [(rank + 0.5, label) for ranks in list(drawn.sample.boundaries_rank.values())[:1]
                  for rank, label in zip(ranks, ("head | torso", "torso | tail"))]
    stratified = bool(drawn.settings.stratify_by)
    chart = charts.loglog(traffic_curve(drawn.tiered), [] if stratified else boundaries)
    seeded = form.data.copy()
    seeded["seed"] = drawn.seed
    name = f"{log.name} sample {drawn.seed}"
    return {"drawn": drawn, "chart": chart, "summary": drawn.sample.summary.to_dict("records"),
            "shortfalls": shortfalls(drawn.sample.summary),
            "queries": drawn.sample.queries.head(PREVIEW_QUERIES).to_dict("records"),
            "save_form": SaveSampleForm(initial={"name": name}, project=log.project), "settings_query": seeded.urlencode(),
            "seeded_fields": [(key, value) for key in seeded for value in seeded.getlist(key) if key != "preview"]}


@require_POST
def log_sample_save(request: HttpRequest, slug: str, log_uuid: UUID) -> HttpResponse:
    """Draw the sample the settings describe (the preview put its seed in them) and save it as a query set."""
    log, membership = access.query_log_for_user(request.user, slug, log_uuid, "can_manage")
    settings_form = SamplingForm(request.POST, log=log)
    save_form = SaveSampleForm(request.POST, project=log.project)
    if not (settings_form.is_valid() and save_form.is_valid()):
        messages.error(request, "The sample was not saved: " + errors_text(settings_form, save_form))
        return redirect(log)
    try:
        drawn = log_sampling.draw(log, settings_form.settings())
        collection = log_sampling.save_sample(drawn, name=save_form.cleaned_data["name"], user=request.user,
                                              description=save_form.cleaned_data["description"])
    except ValueError as problem:
        messages.error(request, str(problem))
        return redirect(log)
    messages.success(request, f"Saved {collection.queries.count():,} sampled queries as “{collection.name}” (seed {drawn.seed}).")
    for sentence in shortfalls(drawn.sample.summary):
        messages.warning(request, sentence)
    return redirect(collection)


@require_POST
def log_delete(request: HttpRequest, slug: str, log_uuid: UUID) -> HttpResponse:
    log, membership = access.query_log_for_user(request.user, slug, log_uuid, "can_manage")
    log_sampling.delete_query_log(log)
    messages.success(request, f"Query log “{log.name}” deleted; query sets sampled from it keep their queries.")
    return redirect("judgments:query-logs", slug)
