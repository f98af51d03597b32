"""A round's automatic judges: add one, run it, read its machine grades and its calibration; the project's
endpoints (LLM, and the embeddings of its semantic judges). Leads do everything, viewers read; raters see none of
it (403): machine grades and calibration would bias their own grading."""

import math
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q
from django.forms import model_to_dict
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access, judges
from ..core import outbound_policy
from ..core import rate_limits
from ..forms import EmbeddingEndpointForm, JudgeForm, JudgeRunForm, LLMEndpointForm, page_of
from ..models import EmbeddingEndpoint, Job, JudgeCalibration, LLMEndpoint
from ..ops import automatic, embeddings, endpoints, grading, jobs
from ..ops.actions import ActionRefused

KIND_NAMES = {"token_overlap": "Token overlap", "semantic": "Semantic (sentence embeddings)", "llm": "LLM (chat endpoint)"}
KIND_HELP = {
    "token_overlap": "Compares each document with the query's reference texts, word by word (Evret's algorithm). "
                     "Needs reference texts on the queries; no model, no key.",
    "semantic": "Cosine similarity of all-MiniLM-L6-v2 sentence embeddings of the document and the reference texts "
                "(or of the project's embeddings endpoint's model), each distinct text embedded once.",
    "llm": "Asks a chat model (OpenAI, vLLM, Ollama, llama.cpp server) with the round's guidelines and grades.",
}


def kinds() -> list[dict]:
    return [{"kind": kind, "name": KIND_NAMES[kind], "help": KIND_HELP[kind], "availability": judges.availability(kind)}
            for kind in judges.KINDS]


@require_GET
def round_judges(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    listed = list(round.judges.select_related("calibration").annotate(
        n_judged=Count("grades", filter=Q(grades__outcome=judges.JUDGED)),
        n_could_not=Count("grades", filter=~Q(grades__outcome=judges.JUDGED))))
    for judge in listed:
        stored = getattr(judge, "calibration", None)
        judge.gate = automatic.stored_gate(judge, stored) if stored else None
    context = {"project": round.project, "membership": membership, "round": round, "judges": listed,
               "pairs": grading.kept_totals(round)["pairs"], "kinds": kinds(),
               "endpoint": LLMEndpoint.objects.filter(project=round.project).first(),
               "default_backend": embeddings.default_backend(round.project)}
    return TemplateResponse(request, "judgments/round_judges.html", context)


@require_http_methods(["GET", "POST"])
def judge_create(request: HttpRequest, slug: str, round_uuid: UUID, kind: str) -> HttpResponse:
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    if kind not in judges.KINDS:
        raise Http404("No such kind of judge")
    availability = judges.availability(kind)
    default_backend = embeddings.default_backend(round.project)
    form = JudgeForm(request.POST or None, kind=kind, default_backend=default_backend) if availability.available else None
    if form is not None and request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            judge = automatic.add_judge(round, name=data["name"], kind=kind, settings=data["settings"], user=request.user,
                                        min_kappa=data["min_kappa"], min_tau=data["min_tau"], min_pairs=data["min_pairs"],
                                        min_runs=data["min_runs"])
        except judges.JudgeSettingsError as problem:
            form.add_settings_error(problem)
        except ActionRefused as refusal:
            form.add_error(None, str(refusal))
        else:
            messages.success(request, f"Judge “{judge.name}” added. Calibrate it first: run it on a sample of the pairs "
                                      "the raters graded, then read its calibration report.")
            return redirect(judge)
    context = {"project": round.project, "membership": membership, "round": round, "form": form, "kind": kind,
               "kind_name": KIND_NAMES[kind], "kind_help": KIND_HELP[kind], "availability": availability,
               "endpoint": LLMEndpoint.objects.filter(project=round.project).first(), "default_backend": default_backend}
    return TemplateResponse(request, "judgments/judge_form.html", context)


@require_GET
def judge_detail(request: HttpRequest, slug: str, round_uuid: UUID, judge_uuid: UUID) -> TemplateResponse:
    judge, membership = access.judge_for_user(request.user, slug, round_uuid, judge_uuid, "can_read_reports")
    round = judge.round
    grades = (judge.grades.select_related("item__query", "item__document").prefetch_related("item__judgments__rater")
              .order_by("item__query_id", "-item__priority", "item_id"))
    outcomes = judge.grades.aggregate(judged=Count("pk", filter=Q(outcome=judges.JUDGED)),
                                      could_not=Count("pk", filter=~Q(outcome=judges.JUDGED)))
    problems = judge.grades.exclude(outcome=judges.JUDGED).values_list("problem").annotate(n=Count("pk")).order_by("-n")
    runs = Job.objects.filter(project=round.project, kind="run_judge", params__judge=str(judge.uuid))[:10]
    stored = JudgeCalibration.objects.filter(judge=judge).first()
    gate = automatic.stored_gate(judge, stored) if stored else None
    context = {"project": round.project, "membership": membership, "round": round, "judge": judge,
               "scale": round.grading_scale, "pairs": grading.kept_totals(round)["pairs"], "outcomes": outcomes,
               "problems": [(problem.replace("_", " "), n) for problem, n in problems], "runs": runs,
               "page": page_of(request, grades, 50), "calibration": stored,
               "gate": gate, "step": 3 if gate and gate["passed"] else 2 if gate else 1,
               "run_form": JudgeRunForm(judge=judge, gate_passed=bool(gate and gate["passed"])) if membership.can_manage else None,
               "estimates": automatic.run_estimates(judge) if membership.can_manage else None,
               "availability": judges.availability(judge.kind)}
    if judge.kind == "semantic":
        made = embeddings.grade_embedders(judge) if outcomes["judged"] or outcomes["could_not"] else []
        context.update(embedder=embeddings.embedder_label(embeddings.current_embedder(judge)),
                       grade_embedders=[embeddings.embedder_label(described) for described in made])
    return TemplateResponse(request, "judgments/judge.html", context)


@require_POST
def judge_run(request: HttpRequest, slug: str, round_uuid: UUID, judge_uuid: UUID) -> HttpResponse:
    judge, _membership = access.judge_for_user(request.user, slug, round_uuid, judge_uuid, "can_manage")
    form = JudgeRunForm(request.POST, judge=judge)
    if not form.is_valid():
        problems = [f"{form.fields[name].label or name}: {errors[0]}" for name, errors in form.errors.items() if name != "pairs"]
        messages.error(request, "Choose which pairs to grade" + (f" ({'; '.join(problems)})." if problems else "."))
        return redirect(judge)
    return redirect(automatic.start_run(judge, form.choice(), user=request.user,
                                        token_budget=form.cleaned_data.get("token_budget")))


@require_POST
def job_cancel(request: HttpRequest, slug: str, job_uuid: UUID) -> HttpResponse:
    job, _membership = access.job_for_user(request.user, slug, job_uuid, "can_manage")
    if not job.cancellable:
        messages.error(request, "Only an unfinished job of a kind that can stop halfway can be cancelled.")
    elif jobs.cancel_job(job) == Job.State.RUNNING:
        messages.success(request, "Asked the job to stop: it keeps what it finished.")
    return redirect(job)


@require_http_methods(["GET", "POST"])
def llm_endpoint(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's endpoints: the LLM endpoint, and the embeddings (default backend and endpoint) of its semantic
    judges; each form saves on its own button."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    endpoint = LLMEndpoint.objects.filter(project=project).first()
    found = embeddings.project_embeddings(project)
    posted = request.POST if request.method == "POST" else None
    saving_embeddings = posted is not None and "save_embeddings" in posted
    initial = {"base_url": endpoint.base_url, "model": endpoint.model, "api_key_env": endpoint.api_key_env,
               "max_in_flight": endpoint.max_in_flight, "requests_per_minute": endpoint.requests_per_minute,
               "tokens_per_minute": endpoint.tokens_per_minute} if endpoint else {}
    form = LLMEndpointForm(None if saving_embeddings else posted, initial=initial)
    embedding_form = EmbeddingEndpointForm(posted if saving_embeddings else None, prefix="embeddings", initial=model_to_dict(
        found or EmbeddingEndpoint(), fields=["default_backend", "base_url", "model", "max_length", "batch_size", "api_key_env"]))
    if saving_embeddings and embedding_form.is_valid():
        found = embeddings.save_embedding_endpoint(project, **embedding_form.cleaned_data)
        messages.success(request, f"Embeddings saved: default backend {found.default_backend}"
                                  + (f"; endpoint API key: {found.key_status}." if found.base_url else "; no endpoint."))
        return redirect("judgments:llm-endpoint", slug)
    if posted is not None and not saving_embeddings and form.is_valid():
        endpoint = endpoints.save_llm_endpoint(project, **form.cleaned_data)
        messages.success(request, f"LLM endpoint saved; API key: {endpoint.key_status}.")
        return redirect("judgments:llm-endpoint", slug)
    context = {"project": project, "membership": membership, "form": form, "endpoint": endpoint,
               "embedding_form": embedding_form, "embeddings": found, "backends": embeddings.backend_statuses(project),
               "allowed_variables": outbound_policy.allowed_key_variables(), "prefix": settings.ENDPOINT_KEY_VARIABLE_PREFIX,
               "limits_shared": rate_limits.shared_url() is not None}
    return TemplateResponse(request, "judgments/llm_endpoint.html", context)


@require_GET
def judge_calibration(request: HttpRequest, slug: str, round_uuid: UUID, judge_uuid: UUID) -> TemplateResponse:
    judge, membership = access.judge_for_user(request.user, slug, round_uuid, judge_uuid, "can_read_reports")
    stored = JudgeCalibration.objects.filter(judge=judge).first()
    context = {"project": judge.round.project, "membership": membership, "round": judge.round, "judge": judge,
               "stored": stored, "machine_grades_now": judge.grades.count()}
    if stored:
        pairs = stored.data["pairs"]
        systems = stored.data.get("systems")
        context.update(data=stored.data, pairs=pairs, systems=systems, gate=automatic.stored_gate(judge, stored),
                       confusion=list(zip(pairs["labels"], pairs["confusion"])),
                       disagreement_queries=len({d.get("query_id") for d in pairs.get("disagreements", [])}),
                       tau_by_chance=tau_by_chance(systems["n_runs"]) if systems else None,
                       made_by=[embeddings.embedder_label(described) for described in stored.data.get("embedders", [])],
                       backend_problem=embeddings.calibration_backend_problem(judge, stored.data))
    return TemplateResponse(request, "judgments/judge_calibration.html", context)


def tau_by_chance(runs: int) -> str:
    """The chance that a judge grading at random still orders `runs` runs exactly as the raters do (tau 1): 1 in runs!."""
    return f"1 in {math.factorial(runs):,}" if runs >= 2 else ""


@require_POST
def judge_calibration_compute(request: HttpRequest, slug: str, round_uuid: UUID, judge_uuid: UUID) -> HttpResponse:
    judge, _membership = access.judge_for_user(request.user, slug, round_uuid, judge_uuid, "can_manage")
    return redirect(automatic.start_calibration(judge, user=request.user))
