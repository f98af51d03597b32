"""The server's version: GET /api/v1/version and the X-Verdict-Version header, for token holders only."""

import re

from evaluation.engine import __version__


def test_the_version_endpoint_answers_the_engines_version(world):
    response = world.client("rater").get("/api/v1/version")
    assert response.status_code == 200
    assert response.json() == {"version": __version__}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_every_answer_to_a_token_holder_carries_the_version_header(world):
    client = world.client("viewer")
    answers = [client.get("/api/v1/projects"), client.get(world.path("/api/v1/projects/{slug}/runs/{run}/download")),
               client.get(world.path("/api/v1/projects/{slug}/runs/00000000-0000-4000-8000-000000000000"))]
    assert [answer.status_code for answer in answers] == [200, 200, 404]
    assert all(answer["X-Verdict-Version"] == __version__ for answer in answers)


def test_an_anonymous_caller_learns_no_version(world):
    for answer in (world.client(None).get("/api/v1/version"), world.client("wrong").get("/api/v1/projects"),
                   world.client(None).get("/accounts/login/")):
        assert answer.status_code in (200, 401)
        assert "X-Verdict-Version" not in answer
