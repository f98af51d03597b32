from uuid import UUID

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods

from .. import access
from ..forms import QueryForm, QueryImportForm, QuerySetForm, ReferencesUploadForm, SearchParams, page_of, query_params
from ..models import EditConflict, QueryCollection
from ..ops.log_sampling import query_set_csv as query_set_csv_lines
from .downloads import download
from .uploads import upload_view


@require_GET
def query_sets(request: HttpRequest, slug: str) -> TemplateResponse:
    project, membership = access.project_for_user(request.user, slug, "can_read_reports")
    sets = project.query_sets.annotate(query_count=Count("queries"))
    context = {"project": project, "membership": membership, "query_sets": sets}
    return TemplateResponse(request, "judgments/query_sets.html", context)


@require_http_methods(["GET", "POST"])
def query_set_import(request: HttpRequest, slug: str) -> HttpResponse:
    return upload_view(request, slug, kind="import_queries", title="Import a query set",
                       make_form=lambda data, files, project: QueryImportForm(data, files, project=project))


@require_http_methods(["GET", "POST"])
def query_set_create(request: HttpRequest, slug: str) -> HttpResponse:
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = QuerySetForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        collection = form.save(commit=False)
        collection.project, collection.created_by = project, request.user
        collection.source = QueryCollection.Source.MANUAL
        collection.save()
        messages.success(request, f"Query set “{collection.name}” created: add its queries below.")
        return redirect(collection)
    return TemplateResponse(request, "judgments/upload.html",
                            {"project": project, "membership": membership, "form": form, "title": "New query set"})


@require_GET
def query_set(request: HttpRequest, slug: str, set_uuid: UUID) -> TemplateResponse:
    collection, membership = access.query_set_for_user(request.user, slug, set_uuid, "can_read_reports")
    queries = collection.queries.all()
    search = query_params(SearchParams(request.GET))["q"]
    if search:
        queries = queries.filter(text__icontains=search) | queries.filter(query_id=search)
    page = page_of(request, queries, 50)
    context = {"project": collection.project, "membership": membership, "collection": collection, "page": page,
               "search": search, "form": QueryForm(collection=collection), "references_form": ReferencesUploadForm()}
    return TemplateResponse(request, "judgments/query_set.html", context)


@require_GET
def query_set_csv(request: HttpRequest, slug: str, set_uuid: UUID) -> StreamingHttpResponse:
    """The query set as CSV (a sample's tiers, traffic and weights included), streamed."""
    collection, _membership = access.query_set_for_user(request.user, slug, set_uuid, "can_read_reports")
    return download(query_set_csv_lines(collection), f"{slugify(collection.name) or 'queries'}.csv", "text/csv")


@require_http_methods(["GET", "POST"])
def query_edit(request: HttpRequest, slug: str, set_uuid: UUID, query_id: str | None = None) -> HttpResponse:
    """Add a query by hand (no `query_id`) or edit one."""
    collection, membership = access.query_set_for_user(request.user, slug, set_uuid, "can_manage")
    query = None
    if query_id is not None:
        query = collection.queries.filter(query_id=query_id).first()
        if query is None:
            raise Http404("No such query")
    form = QueryForm(request.POST or None, instance=query, collection=collection)
    if request.method == "POST" and form.is_valid():
        try:
            if query is None:
                saved = form.save(commit=False)
                saved.collection = collection
                saved.save()
            else:
                saved = form.save_edit()
        except EditConflict as conflict:
            form.show_conflict(conflict.current)
        else:
            messages.success(request, f"Query {saved.query_id} saved.")
            return redirect(collection)
    context = {"project": collection.project, "membership": membership, "collection": collection, "form": form, "query": query}
    return TemplateResponse(request, "judgments/query_form.html", context)
