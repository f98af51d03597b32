"""Response and error shapes shared by every router (each router keeps its own object schemas)."""

from ninja import Schema


class ErrorOut(Schema):
    detail: str
    code: str


# Every endpoint may answer these; routers add them to their `response` maps.
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}
