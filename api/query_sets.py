"""Query sets: list, and each set's queries as CSV (the app's own export)."""

from datetime import datetime
from uuid import UUID

from django.db.models import Count
from django.http import HttpRequest
from django.utils.text import slugify
from ninja import Query, Router, Schema

from judgments import access
from judgments.ops.log_sampling import query_set_csv

from .auth import object_access, project_access
from .files import etagged_chunks, file_doc
from .paging import Page, PageParams, page
from .schemas import ERRORS

router = Router(tags=["query sets"])


class QuerySetOut(Schema):
    uuid: UUID
    name: str
    n_queries: int
    created_at: datetime


@router.get("/{slug}/query-sets", response={200: Page[QuerySetOut], **ERRORS}, summary="The project's query sets")
def list_query_sets(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_read_reports")
    sets = project.query_sets.annotate(n_queries=Count("queries")).order_by("-created_at", "pk")
    return page(request, sets, params)


@router.get("/{slug}/query-sets/{uuid}/queries.csv", response=ERRORS, openapi_extra=file_doc("text/csv", etag=True),
            summary="A query set's queries as CSV")
def download_queries(request: HttpRequest, slug: str, uuid: UUID):
    collection = object_access(request, slug, access.query_set_for_user, uuid, "can_read_reports")
    return etagged_chunks(request, query_set_csv(collection), f"{slugify(collection.name) or 'queries'}.csv", "text/csv")
