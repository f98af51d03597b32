"""The API's errors: every refusal is JSON `{"detail": "<sentence>", "code": "<machine code>"}`."""

from ninja.errors import HttpError

CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 411: "length_required",
         409: "conflict", 413: "too_large", 429: "rate_limited"}


class ApiError(HttpError):
    """An error with its status, sentence and machine code (by default the status's code above)."""

    def __init__(self, status: int, detail: str, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(status, detail)
        self.code = code or CODES.get(status, "error")
        self.headers = headers or {}


class Unauthenticated(ApiError):
    def __init__(self, detail: str):
        super().__init__(401, detail, headers={"WWW-Authenticate": 'Bearer realm="verdict"'})


class RateLimited(ApiError):
    def __init__(self, retry_after: int, limit: int):
        super().__init__(429, f"More than {limit} requests in a minute with this token (API_RATE_LIMIT); "
                              f"retry in {retry_after} s.", headers={"Retry-After": str(retry_after)})
