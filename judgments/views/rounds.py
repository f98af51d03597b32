"""A lead's view of judgment rounds: set up, open and close, watch progress, hand pairs around."""

from uuid import UUID

from django.contrib import messages
from django.db.models import Count, Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access
from ..forms import FlagsPageParams, GoldForm, PlanForm, PublishForm, QueryPageParams, ReassignForm, ResetFlagsForm, RoundForm
from ..models import EditConflict, Judgment, JudgmentEdit, RoundTotals
from ..ops import grading, planning, rounds, serving_order, versions
from ..ops.actions import ActionRefused


@require_GET
def round_list(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    totals = {row.pop("round"): row for row in RoundTotals.objects.filter(round__project=project).values("round", "pairs", "complete", "done", "needed")}
    listed = project.rounds.select_related("pool", "guidelines").annotate(n_raters=Count("raters", distinct=True))
    rows = [(r, totals.get(r.pk, {})) for r in listed]
    return TemplateResponse(request, "judgments/rounds.html", {"project": project, "membership": membership, "rows": rows})


@require_http_methods(["GET", "POST"])
def round_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    if not project.guideline_versions.exists():
        messages.error(request, "Write the rater guidelines first: every round is bound to a guidelines version.")
        return redirect("judgments:guidelines-edit", slug)
    form = RoundForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            round = rounds.create_round(project, pool=form.cleaned_data["pool"], user=request.user, **form.round_settings())
        except ActionRefused as refusal:
            form.add_error(None, str(refusal))
        else:
            messages.success(request, "Round created as a draft: check it, then open it to raters.")
            return redirect(round)
    return TemplateResponse(request, "judgments/round_form.html", {"project": project, "membership": membership, "form": form})


@require_GET
def round_detail(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    latest = round.project.guideline_versions.first()
    totals = grading.kept_totals(round)
    plan = planning.plan_summary(round, totals)
    queries = rounds.query_report(round, **QueryPageParams(request.GET).keys())
    planning.mark_left_to_judge(queries.rows, plan)
    context = {
        "project": round.project, "membership": membership, "round": round, "scale": round.grading_scale,
        "totals": totals, "raters": rounds.rater_report(round), "recent_timed": f"{rounds.RECENT_TIMED:,}",
        "queries": queries,
        "newer_guidelines": latest if latest.pk != round.guidelines_id else None,
        "missing_pairs": rounds.missing_pairs(round, totals) if round.status != "draft" else 0,
        "reassign_form": ReassignForm(round=round), "reset_form": ResetFlagsForm(round=round),
        "flag_counts": rounds.flag_counts(round),
        "drift": versions.drift(round),
        "plan": plan,
        "ranking_job": serving_order.ranking_job(round),
        **versions.page_context(round, publish_form=PublishForm(round=round) if membership.can_manage else None),
    }
    return TemplateResponse(request, "judgments/round.html", context)


@require_http_methods(["GET", "POST"])
def round_plan(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    """Plan a draft round for prediction-powered estimates: raters label a random sample of N queries, an
    automatic judge the rest. "suggest" shows the N a target half-width needs; "plan" draws the sample."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    judges = planning.calibrated_judges(round.project)
    form = PlanForm(request.POST or None, project=round.project, judges=judges, initial=planning.plan_initial(round, judges))
    suggestion = None if judges else planning.NO_JUDGE
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if form.wants_suggestion or "suggest" in request.POST:
            suggestion = planning.suggest_size(round, half_width=data["half_width"], measure=data["measure"],
                                               judge=data["judge"], run=data["run"])
        if "suggest" in request.POST and suggestion.n is not None:
            form = PlanForm({**request.POST.dict(), "size": suggestion.n}, project=round.project, judges=judges)
        elif "plan" in request.POST:
            grounds = suggestion.grounds if suggestion and suggestion.n == data["size"] else {}
            try:
                sample = planning.plan_round(round, size=data["size"], by_tier=data["by_tier"], seed=data["seed"],
                                             suggested_from=grounds, user=request.user)
            except ValueError as refusal:  # ActionRefused, or a size the round cannot have
                form.add_error(None, str(refusal))
            else:
                messages.success(request, f"Raters will label a random sample of {sample.size:,} queries (seed {sample.seed}); "
                                          f"an automatic judge labels the rest.")
                return redirect(round)
    context = {"project": round.project, "membership": membership, "round": round, "form": form, "suggestion": suggestion,
               "judges": judges, "plan": planning.plan_summary(round, grading.kept_totals(round)),
               "n_queries": planning.count_round_queries(round), "min_labelled": planning.MIN_LABELLED}
    return TemplateResponse(request, "judgments/round_plan.html", context)


@require_POST
def round_plan_remove(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    return _lead_action(request, slug, round_uuid, planning.remove_plan,
                        "The sample is removed: raters label every query of the round.")


@require_http_methods(["GET", "POST"])
def round_edit(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    """The settings form. A save based on an older version of the round (another lead saved meanwhile)
    keeps the input and shows what differs; with htmx, a save answers with the fresh form."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = RoundForm(request.POST or None, project=round.project, round=round, initial=RoundForm.initial_for(round))
    if request.method == "POST" and form.is_valid():
        try:
            round = rounds.update_round(round, version=form.cleaned_data["version"], user=request.user, **form.round_settings())
        except ActionRefused as refusal:
            form.add_error(None, str(refusal))
        except EditConflict as conflict:
            form.show_conflict(conflict.current)
            round = conflict.current
        else:
            messages.success(request, "Round settings saved.")
            if not request.htmx:
                return redirect(round)
            form = RoundForm(project=round.project, round=round, initial=RoundForm.initial_for(round))
    context = {"project": round.project, "membership": membership, "form": form, "round": round}
    return TemplateResponse(request, "judgments/round_form.html#settings" if request.htmx else "judgments/round_form.html", context)


def _lead_action(request, slug: str, round_uuid: UUID, action, success: str) -> HttpResponse:
    round, _ = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    try:
        outcome = action(round)
    except ActionRefused as refusal:
        messages.error(request, str(refusal))
        return redirect(round)
    messages.success(request, success.format(outcome=outcome))
    return redirect(outcome if hasattr(outcome, "get_absolute_url") else round)


@require_POST
def round_open(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    return _lead_action(request, slug, round_uuid, rounds.open_round, "The round is open: its raters find it in their work queue.")


@require_POST
def round_close(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    return _lead_action(request, slug, round_uuid, rounds.close_round, "The round is closed: it takes no more judgments.")


@require_POST
def round_add_pairs(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    return _lead_action(request, slug, round_uuid, rounds.add_pool_pairs,
                        "{outcome[added]} new pool pairs added to the round ({outcome[overlap]} of them for overlap).")


@require_POST
def round_successor(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    return _lead_action(request, slug, round_uuid, lambda round: rounds.successor(round, user=request.user),
                        "New draft round “{outcome.name}” on the latest guidelines. Open it when ready; close the old one when its raters are done.")


@require_POST
def round_reassign(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    round, _ = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = ReassignForm(request.POST, round=round)
    if not form.is_valid() or form.cleaned_data["source"] == form.cleaned_data["target"]:
        messages.error(request, "Choose a rater of this round to take pairs from, and another rater (or everyone) to give them to.")
        return redirect(round)
    moved = rounds.reassign(round, form.cleaned_data["source"], form.cleaned_data["target"])
    target = form.cleaned_data["target"]
    messages.success(request, f"{moved:,} pairs of {form.cleaned_data['source'].username} went to {target.username if target else 'the shared queue'}.")
    return redirect(round)


@require_POST
def round_reset_flags(request: HttpRequest, slug: str, round_uuid: UUID) -> HttpResponse:
    round, _ = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    form = ResetFlagsForm(request.POST, round=round)
    if not form.is_valid() or not (form.cleaned_data["later"] or form.cleaned_data["unrateable"]):
        messages.error(request, "Choose which flags to reset.")
        return redirect("judgments:round-flags", slug, round_uuid)
    reset = rounds.reset_flags(round, later=form.cleaned_data["later"], unrateable=form.cleaned_data["unrateable"],
                               rater=form.cleaned_data["rater"], by=request.user)
    messages.success(request, f"Reset {reset['later']:,} judge-later flags and {reset['unrateable']:,} unrateable flags.")
    return redirect("judgments:round-flags", slug, round_uuid)


@require_GET
def round_flags(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    keys = FlagsPageParams(request.GET).keys()
    context = {"project": round.project, "membership": membership, "round": round, "counts": rounds.flag_counts(round),
               "unrateable": rounds.unrateable_flags(round, after=keys["after"]),
               "later": rounds.later_flags(round, after=keys["later_after"]), "page_size": rounds.FLAGS_PER_PAGE,
               "reset_form": ResetFlagsForm(round=round) if membership.can_manage else None}
    return TemplateResponse(request, "judgments/round_flags.html", context)


@require_GET
def round_query(request: HttpRequest, slug: str, round_uuid: UUID, query_id: str) -> TemplateResponse:
    """One query's pairs in the round, each document by its title (whole on demand), with every rater's
    verdict and explanation note and the pair's edit history, for leads and viewers; leads set gold grades here."""
    round, membership = access.round_for_user(request.user, slug, round_uuid, "can_read_reports")
    query = round.pool.query_set.queries.filter(query_id=query_id).first()
    if query is None:
        raise Http404("No such query in this round")
    items = (round.items.filter(query=query).select_related("document", "pair")
             .prefetch_related(Prefetch("judgments", Judgment.objects.select_related("rater").order_by("rater__username")),
                               Prefetch("edits", JudgmentEdit.objects.select_related("rater", "editor")), "machine_grades__judge")
             .order_by("-priority", "pk"))
    # One set of gold choices for every pair (not a form per pair: a query holds a hundred pairs or more).
    context = {"project": round.project, "membership": membership, "round": round, "query": query, "scale": round.grading_scale,
               "faithfulness_scale": round.faithfulness_grading_scale, "items": items,
               "gold_choices": GoldForm(round=round).fields["grade"].choices}
    return TemplateResponse(request, "judgments/round_query.html", context)


@require_POST
def round_gold(request: HttpRequest, slug: str, round_uuid: UUID, item_uuid: UUID) -> HttpResponse:
    round, _ = access.round_for_user(request.user, slug, round_uuid, "can_manage")
    item = access.item_of_round(round, item_uuid)
    form = GoldForm(request.POST, round=round)
    if form.is_valid():
        rounds.set_gold(item, form.cleaned_data["grade"])
        messages.success(request, f"{item.document.doc_id}: " + ("not a gold pair." if item.gold_grade is None else f"gold grade {item.gold_grade}."))
    else:
        messages.error(request, "Choose a grade of the round's scale.")
    return redirect("judgments:round-query", slug, round_uuid, item.query.query_id)
