from collections.abc import Iterable

from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header


def download(content: str | Iterable[str], filename: str, content_type: str) -> HttpResponse | StreamingHttpResponse:
    """A file for the browser to save: a string is sent whole, an iterator of strings is streamed."""
    response_class = HttpResponse if isinstance(content, str) else StreamingHttpResponse
    return response_class(content, content_type=f"{content_type}; charset=utf-8",
                          headers={"Content-Disposition": content_disposition_header(True, filename)})
