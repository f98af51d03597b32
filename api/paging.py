"""Lists: `{"items": [...], "next": "<url of the next page or null>"}`, paged by ?limit= (at most 500) and ?offset=."""

from collections.abc import Callable
from typing import Annotated, Generic, TypeVar

from django.http import HttpRequest
from ninja import Field, Schema

MAX_LIMIT = 500

Item = TypeVar("Item")

# An exact-name filter: names are at most 200 characters, and PostgreSQL text cannot hold NUL.
NameParam = Annotated[str | None, Field(None, max_length=200, pattern=r"^[^\x00]*$", description="Only the object with exactly this name.")]


class PageParams(Schema):
    limit: int = Field(100, ge=1, le=MAX_LIMIT, description=f"Items per page, at most {MAX_LIMIT}.")
    offset: int = Field(0, ge=0, description="Items to skip.")


class Page(Schema, Generic[Item]):
    items: list[Item]
    next: str | None = Field(None, description="The next page's URL; null on the last page.")


def page(request: HttpRequest, objects, params: PageParams, item: Callable = lambda found: found) -> dict:
    """One page of `objects` (a QuerySet or list, in a stable order), each turned into a response item by `item`."""
    found = list(objects[params.offset:params.offset + params.limit + 1])
    following = None
    if len(found) > params.limit:
        query = request.GET.copy()
        query["limit"], query["offset"] = str(params.limit), str(params.offset + params.limit)
        following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    return {"items": [item(obj) for obj in found[:params.limit]], "next": following}
