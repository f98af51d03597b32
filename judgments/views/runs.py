from collections import defaultdict
from collections.abc import Callable
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods

from .. import access
from ..forms import RunBrowseParams, RunsParams, RunUploadForm, query_params
from ..models import Judgment, Query
from ..ops.imports import load_run_table
from ..ops.pools import coverage_set, run_coverage, run_query_ids
from .uploads import upload_view


def run_list(request: HttpRequest, slug: str, *, related: str, query_ids: Callable, coverage: Callable, template: str,
             what: str, has: str) -> TemplateResponse:
    """The list of a project's stored runs or answer runs (`related`: the project's manager of them), each with its
    coverage (`coverage`) of the query set asked for, or else of the set most of them answer (`query_ids`: one
    run's query ids). `what` and `has` name them on the page."""
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    asked = query_params(RunsParams(request.GET, project=project, newest_by_default=False))["query_set"]
    answered = {run.pk: query_ids(run) for run in getattr(project, related).all()}
    chosen = coverage_set(project, asked, list(answered.values()))
    context = {"project": project, "membership": membership, "rows": coverage(project, chosen.query_set, answered),
               "query_set": chosen.query_set, "query_sets": project.query_sets.all(), "chosen": chosen, "by_default": not asked,
               "what": what, "has": has}
    return TemplateResponse(request, template, context)


@require_GET
def runs(request: HttpRequest, slug: str) -> TemplateResponse:
    """The project's runs, with their coverage of the query set asked for, or else of the set most runs answer."""
    return run_list(request, slug, related="runs", query_ids=run_query_ids, coverage=run_coverage,
                    template="judgments/runs.html", what="run", has="results for")


@require_http_methods(["GET", "POST"])
def run_upload(request: HttpRequest, slug: str) -> HttpResponse:
    return upload_view(request, slug, kind="import_run", title="Upload a run",
                       make_form=lambda data, files, project: RunUploadForm(data, files, project=project))


@require_GET
def run(request: HttpRequest, slug: str, run_uuid: UUID) -> TemplateResponse:
    """A stored run: its facts, and its top results for one query with the documents' fields."""
    stored, membership = access.run_for_user(request.user, slug, run_uuid, "can_read_reports")
    project = stored.project
    params = query_params(RunBrowseParams(request.GET))
    query_id, depth = params["query"], params["k"]
    results = []
    if query_id:
        table = load_run_table(stored, filters=[("query_id", "=", query_id), ("rank", "<=", depth)])
        rows = table.to_pylist()
        documents = {d.doc_id: d for d in project.documents.corpus().filter(doc_id__in=[row["doc_id"] for row in rows])}
        template = project.display_template()
        verdicts = defaultdict(list)
        for doc_id, grade in Judgment.objects.of_query(project, query_id).values_list("item__document__doc_id", "grade"):
            verdicts[doc_id].append("unrateable" if grade is None else grade)
        for row in rows:
            row["verdicts"] = verdicts.get(row["doc_id"], [])
            document = documents.get(row["doc_id"])
            row["document"] = document
            row["title"] = document.title(template) if document else ""
            results.append(row)
    query = Query.objects.filter(collection__project=project, query_id=query_id).first() if query_id else None
    context = {"project": project, "membership": membership, "run": stored, "query_id": query_id, "k": depth,
               "results": results, "query": query}
    return TemplateResponse(request, "judgments/run.html", context)
