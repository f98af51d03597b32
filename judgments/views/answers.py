"""Answer runs (a system's generated answers) and reference answers for a query set. Leads upload;
leads and viewers read; raters never see them."""

from uuid import UUID

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import access
from ..forms import AnswerRunUploadForm, ReferencesUploadForm, RunsParams, errors_text, page_of, query_params
from ..ops.answers import answer_coverage, answered_query_ids, import_references, load_answer_table
from ..ops.imports import INPUT_ERRORS
from .runs import run_list
from .uploads import upload_view

PAGE = 50


@require_GET
def answer_runs(request: HttpRequest, slug: str) -> TemplateResponse:
    """The project's answer runs, with their coverage of the query set asked for, or else of the set most answer runs answer."""
    return run_list(request, slug, related="answer_runs", query_ids=answered_query_ids, coverage=answer_coverage,
                    template="judgments/answer_runs.html", what="answer run", has="answers to")


@require_http_methods(["GET", "POST"])
def answer_run_upload(request: HttpRequest, slug: str) -> HttpResponse:
    return upload_view(request, slug, kind="import_answers", title="Upload an answer run",
                       make_form=lambda data, files, project: AnswerRunUploadForm(data, files, project=project))


@require_GET
def answer_run(request: HttpRequest, slug: str, answer_run_uuid: UUID) -> TemplateResponse:
    """An answer run: its facts, and its answers beside the reference answers of a query set, a page at a time."""
    run, membership = access.answer_run_for_user(request.user, slug, answer_run_uuid)
    project = run.project
    query_set = query_params(RunsParams(request.GET, project=project))["query_set"]
    table = load_answer_table(run)
    rows = [{"query_id": qid, "answer": answer, "cites": cites or []} for qid, answer, cites in
            zip(table["query_id"].to_pylist(), table["answer"].to_pylist(), table["cites"].to_pylist())]
    page = page_of(request, rows, PAGE)
    queries = {}
    if query_set is not None:
        queries = {q.query_id: q for q in query_set.queries.filter(query_id__in=[row["query_id"] for row in page])}
    for row in page:
        query = queries.get(row["query_id"])
        row["text"] = query.text if query else ""
        row["references"] = list(query.references) if query else []
        row["in_set"] = query is not None
    context = {"project": project, "membership": membership, "run": run, "page": page, "query_set": query_set,
               "query_sets": project.query_sets.all()}
    return TemplateResponse(request, "judgments/answer_run.html", context)


@require_POST
def query_set_references(request: HttpRequest, slug: str, set_uuid: UUID) -> HttpResponse:
    """Upload reference answers for queries of the set (added to theirs, or replacing them)."""
    collection, _membership = access.query_set_for_user(request.user, slug, set_uuid, "can_manage")
    form = ReferencesUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "No reference answers imported: " + errors_text(form))
        return redirect(collection)
    upload = form.cleaned_data["file"]
    try:
        counts = import_references(collection, upload, replace=form.cleaned_data["replace"], original_name=upload.name)
    except INPUT_ERRORS as problem:
        messages.error(request, f"No reference answers imported: {problem}")
        return redirect(collection)
    text = (f"Reference answers for {counts['queries']:,} quer{'y' if counts['queries'] == 1 else 'ies'}: "
            f"{counts['changed']:,} changed, {counts['new_references']:,} new answers.")
    if counts["unknown"]:
        text += (f" {len(counts['unknown']):,} query ids of the file are not in this set and were left out: "
                 f"{', '.join(counts['unknown'][:10])}{'…' if len(counts['unknown']) > 10 else ''}.")
    messages.success(request, text)
    return redirect(collection)
