"""Lists: `{"items": [...], "next": "<url of the next page or null>"}`, paged by ?limit= (at most 500) and ?offset=."""

from collections.abc import Callable
from typing import Annotated, Generic, TypeVar

from django.http import HttpRequest
from ninja import Field, Schema
from pydantic import ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

MAX_LIMIT = 500
# The largest OFFSET PostgreSQL (a bigint) and SQLite take: one more and the query itself fails.
MAX_OFFSET = 2**63 - 1

Item = TypeVar("Item")

# An exact-name filter: names are at most 200 characters, and PostgreSQL text cannot hold NUL.
NameParam = Annotated[str | None, Field(None, max_length=200, pattern=r"^[^\x00]*$", description="Only the object with exactly this name.")]


def whole_number(low: int, high: int, description: str):
    """An integer parameter from `low` to `high`. Whatever is wrong with a value (not a number, too small, too
    big), the refusal names the whole range, so that one 400 says what to send instead."""

    def in_range(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("out_of_range", "Input should be a whole number from {low} to {high}",
                                      {"low": low, "high": high}) from None

    return Annotated[int, Field(ge=low, le=high, description=description), WrapValidator(in_range)]


Limit = whole_number(1, MAX_LIMIT, f"Items per page, at most {MAX_LIMIT}.")
Offset = whole_number(0, MAX_OFFSET, "Items to skip.")


class PageParams(Schema):
    limit: Limit = 100
    offset: Offset = 0


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
