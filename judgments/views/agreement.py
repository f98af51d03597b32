"""A round's agreement report, its adjudication queue, and its judgment list in and out.

Leads and viewers read all of it; only leads change settings, adjudicate or import. Raters see none
of it: the report names other raters' grades.
"""

import json
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from .. import access
from ..forms import AdjudicationForm, AdjudicationPageParams, AgreementSettingsForm, ExportForm, JudgmentImportForm, errors_text, query_params
from ..lib import charts
from ..lib.judgment_formats import JudgmentFileProblem
from ..models import Adjudication, AgreementReport, EditConflict, Round
from ..ops import judgment_files, reports, versions
from ..ops.jobs import start_job
from .downloads import download


@require_GET
def round_agreement(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    return _agreement_page(request, round, membership, AgreementSettingsForm(instance=round) if membership.can_manage else None)


def _agreement_page(request: HttpRequest, round: Round, membership, settings_form: AgreementSettingsForm | None) -> TemplateResponse:
    stored = AgreementReport.objects.filter(round=round).first()
    context = {"project": round.project, "membership": membership, "round": round, "stored": stored,
               "judgments_now": reports.kept_grade_count(round),
               "settings_form": settings_form}
    if stored:
        data = stored.data
        for pair in data["pairs"]:
            pair["rows"] = list(zip(data["labels"], pair["confusion"]))
        gate = reports.gate(round, data["summary"])
        context.update(
            data=data, gate=gate, gate_links=reports.gate_links(round, gate, can_manage=membership.can_manage),
            graded=_graded(data), pair_kappa=_pair_kappa(data["scale_kind"]),
            statistics=_statistics(data), heatmap=_heatmap(data),
            bars=charts.stacked_bars(data["distributions"], [str(v) for v in data["labels"]]),
            bars_height=20 + 30 * len(data["distributions"]),
            drift=charts.line([(week["start"][:10], week["alpha"]) for week in data["drift"]], low=-0.2),
            worst_queries=_worst_queries(round, data["queries"]),
            faithfulness_statistics=_statistics(data["faithfulness"]) if data.get("faithfulness") else None)
    return TemplateResponse(request, "judgments/round_agreement.html", context)


def _worst_queries(round: Round, queries: list[dict], shown: int = 50) -> list[dict]:
    """The first `shown` queries worst agreement first, each with its text and, when alpha is undefined, why."""
    rows = reports.queries_best_read(queries)[:shown]
    texts = dict(round.pool.query_set.queries.filter(query_id__in=[row["group"] for row in rows]).values_list("query_id", "text"))
    return [{**row, "text": texts.get(row["group"], ""), "reading": reports.query_alpha_reading(row)} for row in rows]


STATISTIC_NAMES = {"percent_agreement": "Percent agreement", "fleiss_kappa": "Fleiss' kappa",
                   "alpha_nominal": "Krippendorff's alpha (nominal)", "alpha_ordinal": "Krippendorff's alpha (ordinal)",
                   "alpha_interval": "Krippendorff's alpha (interval)", "alpha_ratio": "Krippendorff's alpha (ratio)",
                   "gwet_ac1": "Gwet's AC1",
                   "mean_pairwise_kappa": "Cohen's kappa, mean over rater pairs"}


def _statistics(data: dict) -> list[dict]:
    # In STATISTIC_NAMES' order: PostgreSQL's jsonb keeps keys shortest first, not in the order they were stored.
    order = list(STATISTIC_NAMES)
    statistics = sorted(data["summary"]["statistics"].items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))
    names = STATISTIC_NAMES | ({"mean_pairwise_kappa": "Cohen's kappa (quadratic weights), mean over rater pairs",
                                "fleiss_kappa": "Fleiss' kappa (unweighted)"} if data.get("scale_kind") == "graded" else {})
    return [{"key": key, "name": names.get(key, key), **value} for key, value in statistics]


def _graded(data: dict) -> dict:
    """Everyone who graded the round and their grades, pairs graded once included (the statistics leave those out)."""
    counts = data["distributions"]
    return {"raters": len(counts), "grades": sum(sum(row.values()) for row in counts.values())}


def _pair_kappa(scale_kind: str) -> dict:
    """The kappa the heat map and the band show: quadratic weights on a graded scale, none on a binary one."""
    if scale_kind == "graded":
        return {"key": "kappa_quadratic", "name": "quadratic-weighted Cohen's kappa", "column": "Quadratic-weighted"}
    return {"key": "kappa", "name": "Cohen's kappa (unweighted)", "column": "Unweighted"}


def _heatmap(data: dict) -> charts.Heatmap | None:
    raters = sorted({p["rater_a"] for p in data["pairs"]} | {p["rater_b"] for p in data["pairs"]})
    if not raters:
        return None
    kappa = _pair_kappa(data["scale_kind"])["key"]
    values = {}
    for pair in data["pairs"]:
        values[(pair["rater_a"], pair["rater_b"])] = values[(pair["rater_b"], pair["rater_a"])] = pair[kappa]
    return charts.heatmap(raters, lambda a, b: values.get((a, b)))


@require_GET
def round_agreement_download(request: HttpRequest, slug: str, round_uuid: UUID, fmt: str) -> HttpResponse:
    round, _membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    if fmt not in ("csv", "json"):
        raise Http404("The report downloads as csv or json")
    stored = AgreementReport.objects.filter(round=round).first()
    if stored is None:
        messages.error(request, "There is no report to download yet: compute it first.")
        return redirect("judgments:round-agreement", slug, round_uuid)
    data = {**stored.data, "gate": reports.gate(round, stored.data["summary"]).to_json()}
    filename = f"{judgment_files.file_stem(round)}_agreement.{fmt}"
    if fmt == "json":
        return download(json.dumps(data, indent=2, ensure_ascii=False), filename, "application/json")
    return download("".join(reports.report_csv(data)), filename, "text/csv")


@require_POST
def round_agreement_compute(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    round, _membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    job = start_job(kind="agreement_report", project=round.project, owner=request.user, params={"round": str(round.uuid)})
    return redirect(job)


@require_POST
def round_agreement_settings(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    """Save the consensus and gate settings; a mistake, or another lead's save since the page was loaded,
    shows the page again with the input kept."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = AgreementSettingsForm(request.POST, instance=round)
    if form.is_valid():
        try:
            form.save_edit()
        except EditConflict as conflict:
            form.show_conflict(conflict.current)
        else:
            messages.success(request, "Consensus and gate settings saved.")
            return redirect("judgments:round-agreement", slug, round_uuid)
    return _agreement_page(request, Round.objects.select_related("project").get(pk=round.pk), membership, form)


@require_GET
def round_adjudication(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    """Pairs whose grades differ by at least the round's margin, widest first: each document by its title,
    each grade with its rater and note, the label the consensus rule gives, and the lead's label."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    page = reports.disagreement_page(round, after=query_params(AdjudicationPageParams(request.GET))["after"])
    context = {"project": round.project, "membership": membership, "round": round, "rows": page.rows, "page": page,
               "page_size": reports.ADJUDICATION_PAGE,
               "scale": round.grading_scale, "form": AdjudicationForm(scale=round.grading_scale)}
    return TemplateResponse(request, "judgments/round_adjudication.html", context)


@require_POST
def round_adjudicate(request: HttpRequest, slug: str, round_uuid: UUID, item_uuid: UUID) -> HttpResponse:
    round, _membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    item = access.item_of_round(round, item_uuid, related=False)
    form = AdjudicationForm(request.POST, scale=round.grading_scale)
    if not form.is_valid():
        messages.error(request, errors_text(form))
    elif form.cleaned_data["grade"] is None:
        Adjudication.objects.filter(item=item).delete()
        messages.success(request, "Adjudication removed: the consensus rule decides this pair again.")
    else:
        Adjudication.objects.update_or_create(item=item, defaults={"grade": form.cleaned_data["grade"], "note": form.cleaned_data["note"],
                                                                   "lead": request.user})
        messages.success(request, "Final label saved.")
    after = query_params(AdjudicationPageParams(request.GET))["after"]
    return redirect(reverse("judgments:round-adjudication", args=[slug, round_uuid]) + (f"?{urlencode({'after': after})}" if after else "")
                    + f"#pair-{item.uuid}")


@require_GET
def round_export(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    """The export form; with ?format=..., the download itself, streamed."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    form = ExportForm(request.GET if "format" in request.GET else None, round=round)
    if form.is_bound and form.is_valid():
        fmt, options = form.cleaned_data["format"], form.options()
        try:
            judgment_files.check_exportable(round, fmt)
        except ValueError as problem:
            form.add_error(None, str(problem))
        else:
            return download(judgment_files.export(round, fmt, options), judgment_files.export_filename(round, fmt, options),
                            judgment_files.FORMATS[fmt].content_type)
    context = {"project": round.project, "membership": membership, "round": round, "form": form,
               "unrateable": judgment_files.unrateable_pairs(round),
               "import_form": JudgmentImportForm() if membership.can_manage else None, **versions.page_context(round)}
    return TemplateResponse(request, "judgments/round_export.html", context)


@require_POST
def round_import(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    round, _membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = JudgmentImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            report = judgment_files.import_judgments(round, upload, upload.name, rater=form.cleaned_data["rater"] or None,
                                                     dry_run=form.cleaned_data["dry_run"], editor=request.user)
        except (JudgmentFileProblem, ValueError) as problem:
            messages.error(request, f"Nothing was imported: {problem}")
        else:
            messages.success(request, report.summary + (" (dry run: nothing changed)." if report.dry_run else "."))
    else:
        messages.error(request, "Nothing was imported: " + errors_text(form))
    return redirect("judgments:round-export", slug, round_uuid)
