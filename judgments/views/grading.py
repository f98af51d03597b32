"""The rater's screens: one pair at a time (keyboard-driven, htmx), and one query's pairs at once.

Every form posts to the pair's own URL, so a grade can only ever land on the pair the rater saw.
With htmx the answer is the next pair's fragment; without JavaScript it is a redirect to it.
"""

from functools import lru_cache
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.text import Truncator
from django.views.decorators.http import require_GET, require_http_methods

from .. import access
from ..forms import GradeParams, query_params
from ..lib.guidelines import render
from ..models import Claim, Judgment, Round, RoundItem, UnrateableReason
from ..ops import grading


@lru_cache(maxsize=32)
def _guidelines_html(version_pk: int, text: str) -> str:
    return render(text)  # versions never change, so their HTML can be kept


def _number(post, name: str) -> int | None:
    text = post.get(name, "").strip()
    try:
        return int(text) if text else None
    except ValueError:
        raise grading.GradingRefused(f"{text!r} is not a grade.") from None


def _verdict(post) -> grading.Verdict:
    value, faithfulness = _number(post, "grade"), _number(post, "faithfulness")
    # Browsers count a line break as one character against maxlength and send it as two (CRLF).
    note = post.get("note", "").replace("\r\n", "\n").strip()
    return grading.Verdict(grade=value, faithfulness=faithfulness, unrateable=post.get("unrateable", "").strip(),
                           unrateable_note=post.get("unrateable_note", "").strip(), note=note)


def _short(text: str) -> str:
    return Truncator(text).chars(80)


def _said_on_screen(round: Round, item: RoundItem | None, judgment: Judgment | None, progress: grading.Progress,
                    saved: str, error: str) -> str:
    """What the live region says when a pair is swapped in: what was saved (`saved`), then the pair now shown."""
    if error:
        return f"Not saved: {error}"
    if item is None:
        return saved + ("Nothing left for you in this round." if round.is_open else "This round takes no judgments now.")
    if judgment is not None:
        return (f"{saved}Your judged pair: {_short(item.query.text)}, "
                f"{judgment.in_words(round.grading_scale, round.faithfulness_grading_scale)}. Choose again to change it.")
    place, of = progress.judged + 1, progress.judged + progress.remaining
    return f"{saved}Next: {_short(item.query.text)}, {place:,} of {of:,}."


def _screen(request, round: Round, membership, item: RoundItem | None, *, judgment: Judgment | None = None,
            just_judged: bool = False, error: str = "", previous: Judgment | None = None,
            typed: grading.Verdict | None = None, saved: str = "") -> TemplateResponse:
    """The grading screen; `typed` is a refused verdict, which the rater gets back as they left it to fix;
    `saved` says what the rater's last request saved (for the live region)."""
    rater = request.user
    shown = typed or judgment
    progress = grading.progress_of(round, rater)
    every = settings.GRADING_BREAK_EVERY
    take_a_break = bool(just_judged and every and progress.judged and progress.judged % every == 0)
    unrateable_refused = bool(typed and typed.unrateable)
    context = {
        "project": round.project, "membership": membership, "round": round, "item": item, "judgment": judgment,
        "scale": round.grading_scale, "faithfulness_scale": round.faithfulness_grading_scale, "progress": progress, "error": error, "reasons": UnrateableReason.choices,
        "take_a_break": take_a_break,
        "previous": previous or grading.previous_judgment(round, rater, before=judgment),
        "note": shown.note if shown else "", "unrateable": shown.unrateable if shown else "",
        "unrateable_note": shown.unrateable_note if shown else "", "unrateable_refused": unrateable_refused,
        "note_max": grading.NOTE_MAX_LENGTH, "unrateable_note_max": grading.UNRATEABLE_NOTE_MAX_LENGTH,
        "said": _said_on_screen(round, item, judgment, progress, saved, error) if request.htmx else "",
        "focus": ("break-done" if take_a_break else "unrateable-note" if unrateable_refused else "grades" if item else "grading-done"),
    }
    if item is not None:
        item.round = round
        context.update(grading.shown_document(round.project, item.document, round.project.display_template()))
    if request.htmx:  # the guidelines panel is outside the swapped fragment
        return TemplateResponse(request, "judgments/grade.html#grader", context)
    context["guidelines_html"] = _guidelines_html(round.guidelines_id, round.guidelines.text)
    return TemplateResponse(request, "judgments/grade.html", context)


@require_GET
def grade(request: HttpRequest, slug: str, round_uuid: UUID) -> TemplateResponse:
    """The pair to judge now."""
    round, membership = access.grading_round_for_user(request.user, slug, round_uuid)
    item = grading.next_item(round, request.user) if round.is_open else None
    return _screen(request, round, membership, item, just_judged=query_params(GradeParams(request.GET))["judged"])


@require_http_methods(["GET", "POST"])
def grade_item(request: HttpRequest, slug: str, round_uuid: UUID, item_uuid: UUID) -> HttpResponse:
    """GET: a pair the rater judged (to change it) or holds. POST: their verdict on it, or "later"."""
    round, membership = access.grading_round_for_user(request.user, slug, round_uuid)
    item = access.item_of_round(round, item_uuid, related=request.method == "GET")
    if request.method == "GET":
        judgment = Judgment.objects.filter(item=item, rater=request.user).first()
        if judgment is None and not Claim.objects.filter(item=item, rater=request.user).exists():
            raise Http404("This pair is not in your queue")
        return _screen(request, round, membership, item, judgment=judgment)
    bulk = request.POST.get("bulk") == "1"
    typed = None
    try:
        if "later" in request.POST:
            grading.put_off(item, request.user)
            recorded, created = None, False
            saved = f"Put off for later: {_short(item.query.text)}. "
        else:
            typed = _verdict(request.POST)
            recorded, created = grading.record(item, request.user, typed)
            saved = f"Saved: {recorded.in_words(round.grading_scale, round.faithfulness_grading_scale)}. "
    except grading.GradingRefused as refusal:
        if bulk:
            return _bulk_answer(request, round, membership, item, error=str(refusal))
        # The same pair comes back with the verdict as the rater left it, with or without JavaScript:
        # a redirect would lose the reason and the texts (and the pair, if it is no longer theirs).
        judgment = Judgment.objects.filter(item=item, rater=request.user).first()
        return _screen(request, round, membership, item, judgment=judgment, error=str(refusal), typed=typed)
    if bulk:
        return _bulk_answer(request, round, membership, item)
    if request.htmx:
        following = grading.next_item(round, request.user, current_query_id=item.query_id)
        # A new judgment is the rater's latest, which is where the back key goes.
        return _screen(request, round, membership, following, just_judged=created, previous=recorded if created else None,
                       saved=saved)
    # Without JavaScript the live region is not read: the next page says what was saved, once.
    if recorded is None:
        messages.info(request, saved.strip())
    else:
        title = _short(item.document.title(round.project.display_template()))
        messages.success(request, f"Saved: {recorded.in_words(round.grading_scale, round.faithfulness_grading_scale)} "
                                  f"for “{title}” (query “{_short(item.query.text)}”).")
    return redirect(reverse("judgments:grade", args=[slug, round_uuid]) + ("?judged=1" if created else ""))


def _bulk_answer(request, round, membership, item, error: str = "") -> HttpResponse:
    if not request.htmx:
        judgment = None if error else Judgment.objects.filter(item=item, rater=request.user).first()
        if error:
            messages.error(request, error)
        elif judgment is not None:  # without JavaScript the row cannot say it: the page does, once
            title = _short(item.document.title(round.project.display_template()))
            words = judgment.in_words(round.grading_scale, round.faithfulness_grading_scale)
            messages.success(request, f"Saved: {words} for “{title}”.")
        return redirect("judgments:grade-bulk", round.project.slug, round.uuid, item.query.query_id)
    judgment = Judgment.objects.filter(item=item, rater=request.user).first()
    template = round.project.display_template()
    said, focus = _said_on_bulk_page(request, round, item, judgment, template, error)
    context = {"round": round, "project": round.project, "scale": round.grading_scale, "row": (item, judgment),
               "faithfulness_scale": round.faithfulness_grading_scale,
               "shown": grading.shown_document(round.project, item.document, template), "error": error,
               "progress": grading.progress_of(round, request.user), "said": said, "focus": focus}
    return TemplateResponse(request, "judgments/grade_bulk.html#bulk-row", context)


def _said_on_bulk_page(request, round, item, judgment, template, error: str) -> tuple[str, str]:
    """The live region's words after a grade on the one-page view, and the grades to focus: the next
    pair of the page the rater has not judged (after this one, then from the top), else this one's."""
    here = f"grades-{item.uuid}"
    if error or judgment is None:
        return f"Not saved: {error}", here
    saved = (f"Saved: {judgment.in_words(round.grading_scale, round.faithfulness_grading_scale)} "
             f"for {_short(item.document.title(template))}.")
    rows = grading.items_for_bulk(round, request.user, item.query)
    at = next((n for n, (row, _) in enumerate(rows) if row.pk == item.pk), -1)
    following = next(((n, row) for n, (row, mine) in enumerate(rows[at + 1:] + rows[:at + 1])
                      if mine is None), None)
    if following is None:
        return f"{saved} Every pair of this query on this page is judged.", here
    n, row = following
    return (f"{saved} Next: {_short(row.document.title(template))}, {(at + 1 + n) % len(rows) + 1:,} of {len(rows):,}.",
            f"grades-{row.uuid}")


@require_GET
def grade_bulk(request: HttpRequest, slug: str, round_uuid: UUID, query_id: str) -> TemplateResponse:
    """Every pooled document of one query on one page, each graded in place."""
    round, membership = access.grading_round_for_user(request.user, slug, round_uuid)
    query = round.pool.query_set.queries.filter(query_id=query_id).first()
    if query is None:
        raise Http404("No such query in this round")
    template = round.project.display_template()
    rows = [((item, judgment), grading.shown_document(round.project, item.document, template)) for item, judgment in grading.items_for_bulk(round, request.user, query)]
    first_open = next((item for (item, judgment), _ in rows if judgment is None), rows[0][0][0] if rows else None)
    context = {"project": round.project, "membership": membership, "round": round, "query": query, "rows": rows, "first_open": first_open,
               "scale": round.grading_scale, "faithfulness_scale": round.faithfulness_grading_scale, "progress": grading.progress_of(round, request.user)}
    return TemplateResponse(request, "judgments/grade_bulk.html", context)
