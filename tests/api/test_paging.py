"""Every list pages by ?limit= and ?offset=, and any value outside their ranges is a 400 naming the parameter
and its range, never a 500 from the database (PostgreSQL's OFFSET is a bigint, SQLite's a 64-bit integer).

The lists are the API's own: every GET operation its OpenAPI schema gives an `offset` parameter, so a new list
is tested here without being added."""

import pytest

from api.api import api
from api.paging import MAX_LIMIT
from tests.api import bodies

LISTS = [path for path, operations in api.get_openapi_schema()["paths"].items()
         if any(parameter["name"] == "offset" for parameter in operations.get("get", {}).get("parameters", []))]
BIGINT_MAX = 2**63 - 1
REFUSED = {
    "offset": ["-1", "x", "1.5", "", "\x00", str(BIGINT_MAX + 1), "99999999999999999999", "9" * 5000],
    "limit": ["0", str(MAX_LIMIT + 1), "x", str(BIGINT_MAX + 1), "-" + str(BIGINT_MAX + 2)],
}


def filled(world, path: str) -> str:
    """The list's address in the world; an evaluation's list (its per-query values) of a finished evaluation."""
    if "/evaluations/{uuid}/" in path:
        bodies.evaluation(world)
        path = path.replace("{uuid}", "{evaluation}")
    return path.format(**world.objects)


def required(world, path: str) -> dict:
    """The list's required query parameters: an evaluation's unjudged pairs are a run's, to a cutoff."""
    return bodies.unjudged_query(world)["data"] if path.endswith("/unjudged") else {}


def test_the_lists_are_found_from_the_api_s_routes():
    assert {path.rsplit("/", 1)[1] for path in LISTS} >= {"query-sets", "runs", "answer-runs", "pools", "rounds", "versions", "evaluations",
                                                                   "per-query"}


@pytest.mark.parametrize("path", LISTS)
def test_a_list_refuses_an_offset_or_limit_out_of_range_with_a_400_naming_it_and_its_range(world, path):
    client = world.client("lead")
    wrong = []
    for name, values in REFUSED.items():
        low, high = (0, BIGINT_MAX) if name == "offset" else (1, MAX_LIMIT)
        for value in values:
            response = client.get(filled(world, path), {**required(world, path), name: value})
            answer = response.json() if response["Content-Type"].startswith("application/json") else {}
            if (response.status_code, answer.get("code")) != (400, "bad_request") or \
                    f"{name}: Input should be a whole number from {low} to {high}" not in answer.get("detail", ""):
                wrong.append(f"{name}={value[:30]!r}: {response.status_code} {response.content[:200]!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", LISTS)
def test_a_list_pages_to_the_database_s_largest_offset(world, path):
    last = world.client("lead").get(filled(world, path), {**required(world, path), "offset": BIGINT_MAX, "limit": MAX_LIMIT})
    assert last.status_code == 200 and (last.json()["items"], last.json()["next"]) == ([], None)
