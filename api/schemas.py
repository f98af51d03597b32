"""Response and error shapes shared by every router (each router keeps its own object schemas)."""

from uuid import UUID

from ninja import Schema


class ErrorOut(Schema):
    detail: str
    code: str


class DeletedOut(Schema):
    """What a DELETE answers: the object that is gone, and a sentence saying what went with it."""

    uuid: UUID
    detail: str


# Every endpoint may answer these; routers add them to their `response` maps.
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}
