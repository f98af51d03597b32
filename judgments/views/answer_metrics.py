"""Which automatic answer metric agrees with the raters, for an answer round: the page and its downloads.

Leads and viewers read it (as the agreement report); raters never do: it shows consensus grades and the
systems' scores. The page and its downloads compute the report on request, for up to
`answer_metrics.ANSWERS_ON_PAGE` answers; bigger rounds use the `answer_metrics` command.
"""

import json
from datetime import datetime
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from .. import access
from ..lib.verdicts import Verdict
from ..models import Pool, Round
from ..ops import answer_metrics, judgment_files
from .downloads import download

STATISTICS = (("tau", "Kendall's tau-b"), ("rho", "Spearman's rho"))


def _answer_round(user, slug: str, round_uuid: UUID):
    round, membership = access.round_for_user(user, slug, round_uuid, "can_read_reports")
    round = Round.objects.select_related("project", "guidelines", "pool__query_set").get(pk=round.pk)
    if round.pool.kind != Pool.Kind.ANSWERS:
        raise Http404("This round grades documents, not answers")
    return round, membership


@require_GET
def round_answer_metrics(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    round, membership = _answer_round(request.user, slug, round_uuid)
    context = {"project": round.project, "membership": membership, "round": round, "limit": answer_metrics.ANSWERS_ON_PAGE}
    try:
        data = answer_metrics.compute(round, limit=answer_metrics.ANSWERS_ON_PAGE)
    except answer_metrics.TooManyAnswers as problem:
        context["problem"] = str(problem)
    else:
        answer_metrics.keep(round, data)
        context.update(data=data, verdict=answer_metrics.verdict_text(data, reasons=False), rows=_rows(data),
                       decision=Verdict.from_json(data["verdict"]["decision"]),
                       computed_at=datetime.fromisoformat(data["computed_at"]))
    return TemplateResponse(request, "judgments/round_answer_metrics.html", context)


def _rows(data: dict) -> list[dict]:
    system = data["system_level"]["correlations"]
    best = data["verdict"]["best"]
    return [{"metric": metric, "best": metric == best, "tied": metric in data["verdict"]["tied"],
             "unproven": metric in data["verdict"]["unproven"], "undefined_because": found["undefined_because"],
             "wins": data["verdict"]["wins"].get(metric), "lead": data["verdict"]["leads"].get(metric),
             "answer": [found[key] for key, _ in STATISTICS],
             "system": [system[metric][key] for key, _ in STATISTICS] if metric in system else None}
            for metric, found in data["per_answer"].items()]


@require_GET
def round_answer_metrics_download(request: HttpRequest, slug: str, round_uuid: UUID, fmt: str) -> HttpResponse:
    round, _membership = _answer_round(request.user, slug, round_uuid)
    if fmt not in ("csv", "json"):
        raise Http404("The report downloads as csv or json")
    try:
        data = answer_metrics.compute(round, limit=answer_metrics.ANSWERS_ON_PAGE)
    except answer_metrics.TooManyAnswers as problem:
        messages.error(request, str(problem))
        return redirect("judgments:round-answer-metrics", slug, round_uuid)
    answer_metrics.keep(round, data)
    filename = f"{judgment_files.file_stem(round)}_answer_metrics.{fmt}"
    if fmt == "json":
        return download(json.dumps({**data, "verdict_text": answer_metrics.verdict_text(data)}, indent=2, ensure_ascii=False),
                        filename, "application/json")
    return download("".join(answer_metrics.report_csv(data)), filename, "text/csv")
