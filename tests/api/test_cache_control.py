"""Every answer of the API says `Cache-Control: no-store`: its routes (the access matrix's table, which a new
route must join), its refusals, its docs. A client that keeps the ETag itself still gets its 304."""

import pytest

from config.http_limits import FORM_ALLOWANCE_BYTES
from tests.judgments.test_http_limits import Tripwire

from .test_access_matrix import ENDPOINTS, call
from .test_read_endpoints import body

ROUND_QRELS = "/api/v1/projects/{slug}/rounds/{round}/judgments.qrels"


def no_store(response) -> bool:
    return "no-store" in [directive.strip() for directive in response.get("Cache-Control", "").split(",")]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_every_route_answers_no_store(world, endpoint):
    response = call(world, endpoint, "lead")
    assert response.status_code == endpoint.ok and no_store(response), response.get("Cache-Control")


def test_refusals_are_no_store(world, settings):
    settings.UPLOAD_MAX_BYTES = 1 << 20
    too_large = world.client("lead").generic("POST", world.path("/api/v1/projects/{slug}/runs"), b"",
                                             CONTENT_TYPE="multipart/form-data; boundary=B",
                                             CONTENT_LENGTH=str(settings.UPLOAD_MAX_BYTES + FORM_ALLOWANCE_BYTES + 1),
                                             **{"wsgi.input": Tripwire()})
    refused = {
        401: world.client(None).get(world.path("/api/v1/projects/{slug}/rounds")),
        403: world.client("rater").get(world.path("/api/v1/projects/{slug}/runs")),
        404: world.client("lead").get(world.path("/api/v1/projects/{slug}/rounds/00000000-0000-0000-0000-000000000000")),
        400: world.client("lead").get(world.path("/api/v1/projects/{slug}/rounds?offset=9223372036854775808")),
        413: too_large,
    }
    assert {status: response.status_code for status, response in refused.items()} == {status: status for status in refused}
    assert all(no_store(response) for response in refused.values())


def test_the_docs_are_no_store_like_every_api_answer(world):
    assert all(no_store(world.client(None).get(path)) for path in ["/api/docs", "/api/openapi.json", "/api/v1/nothing-here"])


def test_a_client_keeping_the_etag_still_gets_a_304(world):
    client = world.client("viewer")
    first = client.get(world.path(ROUND_QRELS))
    assert first.status_code == 200 and body(first) and no_store(first)
    again = client.get(world.path(ROUND_QRELS), headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again["ETag"] == first["ETag"] and no_store(again)
