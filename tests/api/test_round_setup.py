"""A CI pipeline sets a round up through the API: creates a draft round from a pool, opens it, and imports
judgments from a file, all checked as the round form, the Open button and the import form check them."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile

from judgments.models import Judgment, JudgmentEdit, Round
from judgments.ops.judgment_files import MAX_PROBLEMS
from tests.factory import make_pool

ROUNDS = "/api/v1/projects/{slug}/rounds"


def create(world, who: str = "lead", **fields):
    body = {"name": "Nightly", "pool": str(world.objects["pool"]), "raters": ["ravi"], "overlap_percent": 0, **fields}
    return world.client(who).post(world.path(ROUNDS), json.dumps(body), content_type="application/json")


def open_round(world, uuid, who: str = "lead"):
    return world.client(who).post(world.path(ROUNDS) + f"/{uuid}/open")


def import_file(world, name: str, data: bytes, who: str = "lead", round: str = "{round}", **fields):
    return world.client(who).post(world.path(ROUNDS + f"/{round}/judgments"), {"file": SimpleUploadedFile(name, data), **fields})


def grades(round_uuid, username: str) -> dict:
    return {(query, doc): grade for query, doc, grade in Judgment.objects.filter(item__round__uuid=round_uuid, rater__username=username)
            .values_list("item__query__query_id", "item__document__doc_id", "grade")}


# ------------------------------------------------------------------------------------------ create


def test_a_lead_creates_a_draft_round_with_its_raters_scale_guidelines_and_policy(world):
    response = create(world, raters=["ravi", "lena"], scale="binary", raters_per_pair=2, order="grouped", judging_order="mtf",
                      show_rank=True)
    assert response.status_code == 201, response.content
    body = response.json()
    round = Round.objects.get(uuid=body["uuid"])
    assert (round.status, round.name, round.pool.uuid, round.guidelines.number) == ("draft", "Nightly", world.objects["pool"], 1)
    assert sorted(round.raters.values_list("username", flat=True)) == ["lena", "ravi"] == body["raters"]
    assert [grade.value for grade in round.grading_scale.grades] == [0, 1] and round.grading_scale.kind == "binary"
    assert (round.raters_per_pair, round.overlap_share, round.judging_order, round.show_rank) == (2, 0, "mtf", True)
    assert (body["state"], body["n_pairs"], body["guidelines"], body["pool"]) == ("draft", 0, 1, str(world.objects["pool"]))
    assert round.created_by == world.people.lead and not round.items.exists()


def test_a_custom_scale_is_read_as_the_round_form_reads_it(world):
    response = create(world, scale="custom", custom_scale="0 | Off | Nothing to do with it\n1 | On | About it\n4 | Exact | The one")
    assert response.status_code == 201, response.content
    round = Round.objects.get(uuid=response.json()["uuid"])
    assert [(grade.value, grade.label) for grade in round.grading_scale.grades] == [(0, "Off"), (1, "On"), (4, "Exact")]


@pytest.mark.parametrize("fields,message", [
    ({"scale": "custom", "custom_scale": "zero | Off"}, "custom_scale: "),
    ({"overlap_percent": 15}, "raters: 1 rater chosen, but with 15% overlap, those pairs need a second"),
    ({"overlap_percent": 5}, "overlap_percent: Choose between 10 and 20%"),
    ({"overlap_percent": 50}, "overlap_percent: Ensure this value is less than or equal to 20"),
    ({"raters_per_pair": 11}, "raters_per_pair: "),
    ({"raters": ["vera"]}, "raters: "),  # a viewer does not grade
    ({"raters": ["otto"]}, "raters: "),  # nor does an outsider
    ({"raters": ["ra\x00vi"]}, "raters: Null characters are not allowed"),
    ({"order": "shuffled", "judging_order": "mmns"}, "judging_order: "),
    ({"pool": "00000000-0000-0000-0000-000000000000"}, "pool: "),
    ({"guidelines": 9}, "guidelines: "),
    ({"faithfulness": "supported"}, "faithfulness: Only a round over a pool of answers grades faithfulness"),
])
def test_a_round_the_form_would_refuse_is_a_400_naming_the_field_and_nothing_is_created(world, fields, message):
    before = Round.objects.count()
    response = create(world, **fields)
    assert response.status_code == 400 and message in response.json()["detail"], response.content
    assert Round.objects.count() == before


def test_a_pool_without_pairs_is_refused_with_the_reason(world):
    project = world.people.project
    empty = make_pool(project, {"e1": ["ed1"]}, name="Will be empty")
    empty.pairs.all().delete()
    response = create(world, pool=str(empty.uuid))
    assert response.status_code == 400 and "has no pairs" in response.json()["detail"]


def test_a_name_in_use_is_a_409_and_a_blank_or_nul_name_a_400(world):
    before = Round.objects.count()
    assert create(world, name="Round 1").status_code == 409
    assert create(world, name="   ").status_code == 400
    assert create(world, name="a\x00b").json()["detail"] == "name: null characters are not allowed."
    assert Round.objects.count() == before


def test_without_guidelines_a_round_cannot_be_created_and_the_409_says_so(world, people):
    from api.models import ApiToken, Scope
    from tests.factory import make_project

    project = make_project(people.lead, name="No guidelines yet")
    pool = make_pool(project, {"g1": ["gd1"]})
    _token, secret = ApiToken.issue(user=people.lead, project=project, name="ci", scope=Scope.WRITE)
    response = world.client(secret).post(f"/api/v1/projects/{project.slug}/rounds", json.dumps({"name": "R", "pool": str(pool.uuid)}),
                                         content_type="application/json")
    assert response.status_code == 409 and "guidelines" in response.json()["detail"]


# -------------------------------------------------------------------------------------------- open


def test_a_created_round_opens_and_its_raters_get_every_pair_of_the_pool(world):
    uuid = create(world).json()["uuid"]
    response = open_round(world, uuid)
    assert response.status_code == 200, response.content
    body = response.json()
    round = Round.objects.get(uuid=uuid)
    n_pairs = round.pool.pairs.count()
    assert round.status == "open" and round.opened_at is not None and round.items.count() == n_pairs == 12
    assert (body["round"]["state"], body["round"]["n_pairs"], body["added"], body["missing_from_corpus"]) == ("open", 12, 12, 0)
    queue = world.client("rater").get(world.path(ROUNDS)).json()["items"]
    assert uuid in [row["uuid"] for row in queue]


def test_opening_refuses_what_the_open_button_refuses_with_a_409_that_says_why(world):
    assert open_round(world, world.objects["round"]).json() == {"detail": "The round is open already.", "code": "conflict"}
    no_raters = create(world, raters=[]).json()["uuid"]
    response = open_round(world, no_raters)
    assert response.status_code == 409 and "Choose the raters first" in response.json()["detail"]
    assert Round.objects.get(uuid=no_raters).status == "draft" and not Round.objects.get(uuid=no_raters).items.exists()


def test_a_closed_round_reopens_without_new_pairs(world):
    from judgments.ops import rounds

    round = Round.objects.get(uuid=world.objects["round"])
    rounds.close_round(round)
    response = open_round(world, round.uuid)
    assert response.status_code == 200 and response.json()["added"] == 0
    assert Round.objects.get(pk=round.pk).status == "open"


# -------------------------------------------------------------------------------------- judgments


def test_a_qrels_file_becomes_the_named_raters_judgments_saying_what_was_created_updated_unchanged(world):
    # ravi graded q1: d11 3, d12 1, d13 0, d14 1 (the world); the file keeps d11, changes d12, adds two pairs of q2
    qrels = b"q1 0 d11 3\nq1 0 d12 2\nq2 0 d21 1\nq2 0 d22 0\n"
    response = import_file(world, "nightly.qrels", qrels, rater="ravi")
    assert response.status_code == 200, response.content
    assert response.json() == {"format": "qrels", "dry_run": False, "created": 2, "updated": 1, "unchanged": 1, "raters": {"ravi": 4}}
    assert grades(world.objects["round"], "ravi") == {("q1", "d11"): 3, ("q1", "d12"): 2, ("q1", "d13"): 0, ("q1", "d14"): 1,
                                                      ("q2", "d21"): 1, ("q2", "d22"): 0}
    edit = JudgmentEdit.objects.get(item__round__uuid=world.objects["round"], rater__username="ravi")
    assert (edit.old_grade, edit.new_grade, edit.editor) == (1, 2, world.people.lead)  # the token's owner made the edit


def test_without_a_rater_the_grades_go_to_the_inactive_imported_account_as_in_the_app(world):
    response = import_file(world, "nightly.json", json.dumps([{"query_id": "q3", "ratings": [{"doc_id": "d31", "rating": 2}]}]).encode())
    assert response.status_code == 200 and response.json()["raters"] == {"imported": 1} and response.json()["format"] == "json"
    assert grades(world.objects["round"], "imported") == {("q3", "d31"): 2}
    assert not get_user_model().objects.get(username="imported").is_active


def test_a_quepid_csv_gives_each_column_to_its_rater(world):
    book = b"query,docid,lena,ravi\nquery q2,d21,3,2\nquery q2,d22,,1\n"
    response = import_file(world, "book.csv", book)
    assert response.status_code == 200 and response.json()["raters"] == {"lena": 1, "ravi": 2}
    assert grades(world.objects["round"], "lena")[("q2", "d21")] == 3 and grades(world.objects["round"], "ravi")[("q2", "d22")] == 1


def test_a_dry_run_reports_the_counts_and_writes_nothing(world):
    before = (Judgment.objects.count(), JudgmentEdit.objects.count())
    response = import_file(world, "fix.qrels", b"q1 0 d12 3\nq2 0 d21 1\n", rater="ravi", dry_run="true")
    assert response.json() == {"format": "qrels", "dry_run": True, "created": 1, "updated": 1, "unchanged": 0, "raters": {"ravi": 2}}
    assert (Judgment.objects.count(), JudgmentEdit.objects.count()) == before


def test_every_row_that_does_not_fit_the_round_is_named_with_its_line_and_nothing_is_imported(world):
    before = Judgment.objects.count()
    qrels = b"q1 0 d11 3\nq1 0 nowhere 1\nq2 0 d21 2\nq2 0 d22 7\nq9 0 d91 1\n"
    response = import_file(world, "nightly.qrels", qrels, rater="ravi")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "bad_file" and body["total"] == 3
    assert [(problem["line"], problem["problem"][:40]) for problem in body["problems"]] == [
        (2, "query 'q1' / document 'nowhere' is not a"), (4, "grade 7 of query 'q2' / document 'd22' i"), (5, "query 'q9' / document 'd91' is not a pai")]
    assert body["detail"].startswith("Nothing was imported: nightly.qrels:2: query 'q1' / document 'nowhere'")
    assert "; nightly.qrels:4: grade 7" in body["detail"] and "; nightly.qrels:5: " in body["detail"]
    assert Judgment.objects.count() == before


def test_past_the_cap_the_problems_are_counted_not_listed(world):
    qrels = b"".join(b"q1 0 missing-%d 1\n" % n for n in range(MAX_PROBLEMS + 5))
    body = import_file(world, "many.qrels", qrels, rater="ravi").json()
    assert body["total"] == MAX_PROBLEMS + 5 and len(body["problems"]) == MAX_PROBLEMS
    assert body["problems"][-1]["line"] == MAX_PROBLEMS and body["detail"].endswith("(and 5 more)")


def test_a_json_lists_problems_name_the_line_its_query_object_starts_on(world):
    data = b'[{"query_id": "q1", "ratings": [{"doc_id": "d11", "rating": 2}]},\n {"query_id": "q1x",\n  "ratings": [{"doc_id": "d11", "rating": 1}]}]'
    body = import_file(world, "nightly.json", data, rater="ravi").json()
    assert body["problems"] == [{"line": 2, "problem": "query 'q1x' / document 'd11' is not a pair of the round 'Round 1'"}]
    assert body["detail"] == "Nothing was imported: nightly.json:2: query 'q1x' / document 'd11' is not a pair of the round 'Round 1'"


@pytest.mark.parametrize("name,data,fields,message", [
    ("bad.qrels", b"q1 0 d11\n", {}, "bad.qrels:1: expected 4 columns"),
    ("bad.qrels", b"q1 0 d11 1.5\n", {}, "bad.qrels:1: grade '1.5' is not an integer"),
    ("bad.json", b'[{"query_id": "q1", "ratings": [{"doc_id": "d11"}]}]', {}, "bad.json:1"),
    ("fix.qrels", b"q1 0 d11 1\n", {"rater": "vera"}, "'vera' is a viewer of this project"),
    ("fix.qrels", b"q1 0 d11 1\n", {"rater": "otto"}, "'otto' is not a member of this project"),
    ("fix.qrels", b"q1 0 d11 1\n", {"rater": "nobody-at-all"}, "'nobody-at-all' is not a member of this project"),
    ("junk.bin", b"\x00\xff\x00garbage", {}, "junk.bin"),
])
def test_a_file_the_importer_refuses_is_a_400_with_file_and_line(world, name, data, fields, message):
    before = Judgment.objects.count()
    response = import_file(world, name, data, **fields)
    assert response.status_code == 400 and message in response.json()["detail"], response.content
    assert response.json()["problems"] and Judgment.objects.count() == before


def test_an_upload_over_the_limit_is_a_413(world, settings):
    settings.UPLOAD_MAX_BYTES = 1024
    response = import_file(world, "big.qrels", b"q1 0 d11 1\n" * 200, rater="ravi")
    assert response.status_code == 413 and response.json()["code"] == "too_large"


def test_judgments_of_another_projects_round_are_404_and_a_read_token_403(world, people):
    from tests.factory import make_round

    theirs = make_round(people.outsider.memberships.get().project, people.outsider, [people.outsider], name="Otto's")
    assert import_file(world, "fix.qrels", b"q1 0 d11 1\n", round=str(theirs.uuid)).status_code == 404
    assert import_file(world, "fix.qrels", b"q1 0 d11 1\n", who="lead_read").status_code == 403
    assert not Judgment.objects.filter(item__round=theirs).exists()
