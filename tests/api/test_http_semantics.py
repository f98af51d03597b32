"""The API answers as HTTP clients expect: HEAD wherever GET is served (same status and headers, no body), a
wrong method as a JSON 405 with its Allow header, an address nothing serves as a JSON 404."""

import pytest

from tests.api.test_access_matrix import ENDPOINTS
from tests.api.test_read_endpoints import body

GETS = [endpoint for endpoint in ENDPOINTS if endpoint.method == "GET"]
# Headers that may differ between two answers to the same request.
VARYING = {"Date", "X-Request-Id"}


@pytest.mark.parametrize("endpoint", GETS, ids=str)
def test_head_answers_as_get_without_the_body(world, endpoint):
    query = endpoint.body(world).get("data", {}) if endpoint.body else {}
    client = world.client("lead")
    got = client.get(world.path(endpoint.path), query)
    content = body(got)

    head = client.head(world.path(endpoint.path), query)

    assert head.status_code == got.status_code == 200
    assert body(head) == b""
    assert {k: v for k, v in head.items() if k not in VARYING | {"Content-Length"}} == \
           {k: v for k, v in got.items() if k not in VARYING | {"Content-Length"}}
    if "Content-Length" in head:
        assert int(head["Content-Length"]) == len(content)


def test_head_needs_a_token_like_get(world):
    response = world.client(None).head(world.path("/api/v1/projects/{slug}/runs"))
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("DELETE", "/api/v1/projects/{slug}/runs", "GET, HEAD, POST"),
    ("PUT", "/api/v1/projects/{slug}/evaluations/{round}", "DELETE, GET, HEAD"),
    ("HEAD", "/api/v1/projects/{slug}/corpus", "POST"),
    ("GET", "/api/v1/projects/{slug}/corpus", "POST"),
])
def test_a_wrong_method_is_a_json_405_with_allow(world, method, path, allowed):
    response = world.client("lead").generic(method, world.path(path))
    assert response.status_code == 405 and response["Allow"] == allowed
    if method != "HEAD":
        assert response["Content-Type"].startswith("application/json")
        assert response.json() == {"detail": f"{method} is not allowed here: this address answers {allowed}.",
                                   "code": "method_not_allowed"}


def test_an_address_nothing_serves_is_a_json_404(world):
    for path in ("/api/v1/nothing-here", "/api/v1/projects/{slug}/runs/x/y/z", "/api/v2/projects", "/api/"):
        for method in ("GET", "POST", "DELETE", "PATCH"):
            for who in ("lead", None):
                response = world.client(who).generic(method, world.path(path))
                assert response.status_code == 404, (path, method, who, response.content[:200])
                assert response.json() == {"detail": f"No API operation at {world.path(path)}: see /api/openapi.json for those there are.",
                                           "code": "not_found"}
