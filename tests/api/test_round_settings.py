"""PATCH a round's serving settings through the API: the judging order, refused with fully shuffled serving."""

import json

from judgments.models import Round


def patch(world, who: str, body: dict):
    return world.client(who).patch(world.path("/api/v1/projects/{slug}/rounds/{round}"), json.dumps(body), content_type="application/json")


def test_a_lead_sets_the_judging_order_and_the_round_shows_it(world):
    response = patch(world, "lead", {"judging_order": "mtf"})
    assert response.status_code == 200 and response.json()["judging_order"] == "mtf"
    assert Round.objects.get(uuid=world.objects["round"]).judging_order == "mtf"
    detail = world.client("rater").get(world.path("/api/v1/projects/{slug}/rounds/{round}")).json()
    assert (detail["order"], detail["judging_order"]) == ("grouped", "mtf")


def test_a_judging_order_with_fully_shuffled_serving_is_a_400_that_says_why(world):
    response = patch(world, "lead", {"order": "shuffled", "judging_order": "mmns"})
    assert response.status_code == 400 and "serves pairs from every query at random" in response.json()["detail"]
    assert Round.objects.get(uuid=world.objects["round"]).judging_order == "pool"


def test_an_unknown_judging_order_is_a_400_naming_it(world):
    response = patch(world, "lead", {"judging_order": "best-first"})
    assert response.status_code in (400, 422) and "judging_order" in response.content.decode()
    assert Round.objects.get(uuid=world.objects["round"]).judging_order == "pool"


def test_raters_and_viewers_cannot_change_it(world):
    assert patch(world, "rater", {"judging_order": "mtf"}).status_code == 403
    assert patch(world, "viewer", {"judging_order": "mtf"}).status_code == 403
    assert Round.objects.get(uuid=world.objects["round"]).judging_order == "pool"
