"""An evaluation's unjudged pairs through the API (Elasticsearch `_rank_eval`'s `unrated_docs`): listed per run and
cutoff, paged, and sent to a round; the list is checked against the run file and the round's exported qrels."""

import io
import json

import pytest

from evaluation.evaluations import create_evaluation
from judgments.models import Pool, Round
from judgments.ops import rounds
from judgments.ops.imports import import_corpus, import_run
from tests.factory import make_answer_round, run_queued_jobs, trec_run

# The world's round labels q1's four documents (d11-d14); q2 and q3 are pooled but not graded. q4 is not in the query set.
NIGHTLY = {"q1": ["d11", "n11", "d12", "n12"], "q2": ["d21", "n21"], "q4": ["x41"]}
JUDGED = {"q1": ["d11", "d12"]}
UNJUDGED = "/api/v1/projects/{slug}/evaluations/{evaluation}/unjudged"


@pytest.fixture
def evaluated(world):
    """{evaluation}: a finished evaluation of the world's round over Nightly and Judged; the new documents in the corpus."""
    people, project = world.people, world.people.project
    import_corpus(project, io.BytesIO(b"".join(b'{"doc_id": "%s", "title": "new"}\n' % doc.encode() for doc in ("n11", "n12", "n21"))),
                  "docs.jsonl")
    nightly, _ = import_run(project, trec_run(NIGHTLY, "nightly"), "nightly.run", name="Nightly", system="nightly")
    judged, _ = import_run(project, trec_run(JUDGED, "judged"), "judged.run", name="Judged", system="judged")
    round = Round.objects.get(uuid=world.objects["round"])
    made = create_evaluation(round, [nightly, judged], measures=["nDCG@10"], user=people.lead, resamples=200)
    run_queued_jobs()
    world.objects.update(evaluation=made.uuid, nightly=nightly.uuid, judged=judged.uuid)
    return world


def labelled_pairs(world) -> set[tuple[str, str]]:
    """The round's labelled pairs, read from its qrels download."""
    qrels = world.client("lead").get(world.path("/api/v1/projects/{slug}/rounds/{round}/judgments.qrels"))
    return {tuple(line.split()[0::2][:2]) for line in b"".join(qrels.streaming_content).decode().splitlines()}


def expected(world, run: dict, k: int) -> list[dict]:
    """The oracle: the run's top-k pairs of the query set's queries without a label, by query id then rank."""
    labelled = labelled_pairs(world)
    return sorted(({"query_id": q, "doc_id": d, "rank": rank} for q, docs in run.items() if q != "q4"
                   for rank, d in enumerate(docs, start=1) if rank <= k and (q, d) not in labelled),
                  key=lambda row: (row["query_id"], row["rank"]))


def listed(world, who: str = "lead", **params):
    return world.client(who).get(world.path(UNJUDGED), {"run": str(world.objects["nightly"]), "k": 10, **params})


def send(world, **body):
    body = {"run": str(world.objects["nightly"]), "k": 10, **body}
    return world.client("lead").post(world.path(UNJUDGED), json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_the_unjudged_pairs_are_the_runs_top_k_without_a_label_in_the_round(evaluated, k):
    body = listed(evaluated, k=k).json()
    assert body["items"] == expected(evaluated, NIGHTLY, k)
    assert (body["total"], body["k"], body["run"], body["next"]) == (len(body["items"]), k, str(evaluated.objects["nightly"]), None)
    assert body["queries"] == len({row["query_id"] for row in body["items"]})
    assert body["items"] and ("q1", "d11") in labelled_pairs(evaluated)  # not vacuous: some pairs are judged, some not


def test_a_viewer_reads_them_page_by_page_and_the_pages_make_the_whole_list(evaluated):
    pages, response = [], listed(evaluated, "viewer", limit=2)
    while True:
        body = response.json()
        pages.append(body["items"])
        if body["next"] is None:
            break
        response = evaluated.client("viewer").get(body["next"])
    assert [len(items) for items in pages] == [2, 2] and [row for items in pages for row in items] == expected(evaluated, NIGHTLY, 10)


@pytest.mark.parametrize("params,message", [
    ({"k": 0}, "k: Input should be a whole number from 1 to 1000"),
    ({"k": 1001}, "k: Input should be a whole number from 1 to 1000"),
    ({"run": "00000000-0000-0000-0000-000000000000"}, "run: "),
    ({"run": "not-a-uuid"}, "run"),
])
def test_a_cutoff_out_of_range_or_a_run_not_in_the_evaluation_is_a_400(evaluated, params, message):
    response = listed(evaluated, **params)
    assert response.status_code == 400 and message in response.json()["detail"], response.content


def test_a_run_of_the_project_outside_the_evaluation_is_a_400(evaluated):
    response = listed(evaluated, run=str(evaluated.objects["run"]))
    assert response.status_code == 400 and response.json()["detail"].startswith("run: ")


def test_sent_without_a_round_they_make_a_new_draft_round_over_just_those_pairs(evaluated):
    response = send(evaluated)
    assert response.status_code == 201, response.content
    body = response.json()
    fresh = Round.objects.get(uuid=body["round"]["uuid"])
    source = Round.objects.get(uuid=evaluated.objects["round"])
    pairs = sorted(fresh.pool.pairs.values_list("query__query_id", "doc_id"))
    assert pairs == sorted((row["query_id"], row["doc_id"]) for row in expected(evaluated, NIGHTLY, 10)) and body["added"] == len(pairs)
    assert (fresh.status, fresh.name, body["round"]["state"]) == ("draft", "Unjudged top 10 of Nightly", "draft")
    assert set(fresh.raters.all()) == set(source.raters.all()) and fresh.scale == source.scale


def test_sent_into_an_open_round_its_raters_get_the_new_pairs_at_once_and_nothing_twice(evaluated):
    round = Round.objects.get(uuid=evaluated.objects["round"])
    before = round.items.count()
    response = send(evaluated, into=str(round.uuid))
    assert response.status_code == 200, response.content
    new = {("q1", "n11"), ("q1", "n12"), ("q2", "n21")}  # q2/d21 is in the round already, unjudged
    assert response.json()["added"] == 3 and round.items.count() == before + 3
    assert new <= set(round.items.values_list("query__query_id", "document__doc_id"))
    again = send(evaluated, into=str(round.uuid))
    assert again.json()["added"] == 0 and round.items.count() == before + 3


def test_the_pipeline_loop_sends_grades_and_lists_fewer_unjudged_pairs(evaluated):
    round = str(evaluated.objects["round"])
    send(evaluated, into=round)
    qrels = "".join(f"{row['query_id']} 0 {row['doc_id']} 1\n" for row in listed(evaluated).json()["items"][:2]).encode()
    from django.core.files.uploadedfile import SimpleUploadedFile

    evaluated.client("lead").post(evaluated.path("/api/v1/projects/{slug}/rounds/{round}/judgments"),
                                  {"file": SimpleUploadedFile("graded.qrels", qrels), "rater": "ravi"})
    evaluated.client("lead").post(evaluated.path("/api/v1/projects/{slug}/rounds/{round}/judgments"),
                                  {"file": SimpleUploadedFile("graded.qrels", qrels), "rater": "lena"})
    body = listed(evaluated).json()
    assert body["total"] == 2 and body["items"] == expected(evaluated, NIGHTLY, 10)


def test_nothing_to_send_is_a_409_and_no_pool_or_round_is_made(evaluated):
    pools, rounds_before = Pool.objects.count(), Round.objects.count()
    response = send(evaluated, run=str(evaluated.objects["judged"]), k=2)
    assert response.status_code == 409 and "has no unjudged pairs" in response.json()["detail"]
    assert (Pool.objects.count(), Round.objects.count()) == (pools, rounds_before)


def test_a_closed_round_or_a_round_of_answers_cannot_take_them(evaluated):
    people = evaluated.people
    answers = make_answer_round(people.project, people.lead, [people.rater])
    closed = Round.objects.get(uuid=evaluated.objects["round"])
    rounds.close_round(closed)
    for target in (answers, closed):
        response = send(evaluated, into=str(target.uuid))
        assert response.status_code == 400 and response.json()["detail"].startswith("into: "), response.content
    assert not closed.pool.pairs.filter(doc_id__startswith="n").exists()
