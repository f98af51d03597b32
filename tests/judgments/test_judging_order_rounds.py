"""A round's judging order over HTTP: set in the round form, refused with fully shuffled serving, shown on the round
page, and followed by the grading screen as grades arrive (judgments.ops.serving_order)."""

import io
import json
import re

import pytest
from django.urls import reverse

from judgments.lib.judging_order import run_tie_break
from judgments.lib.scales import GRADED
from judgments.models import Job, Round, RoundItem
from judgments.ops import rounds, serving_order
from judgments.ops.actions import ActionRefused, save_guidelines
from judgments.ops.imports import import_corpus, import_queries, import_run
from judgments.ops.pools import add_runs_to_pool, create_pool
from tests.factory import run_queued_jobs, trec_run

pytestmark = pytest.mark.django_db
RUNS = {"A": ["a1", "a2", "a3", "a4"], "B": ["b1", "b2", "b3", "b4"]}
RELEVANT = {"a1", "a2", "a3", "a4"}  # run A finds every relevant document, run B none


@pytest.fixture
def pool(people):
    """One query pooled from two runs, named A and B (the names the provenance keeps), that share no document."""
    save_guidelines(people.project, "# Rules", author=people.lead)
    docs = [doc for ranked in RUNS.values() for doc in ranked]
    import_corpus(people.project, io.BytesIO("".join(json.dumps({"doc_id": d, "title": f"Title {d}"}) + "\n" for d in docs).encode()), "docs.jsonl")
    queries, _ = import_queries(people.project, b"query_id,query\nq1,red shoes\n", "queries.csv", name="Queries")
    runs = [import_run(people.project, trec_run({"q1": ranked}, tag=system), f"{system}.run", name=system, system=system)[0]
            for system, ranked in RUNS.items()]
    pool = create_pool(people.project, name="Two runs", query_set=queries, depth=4, strategy="best_rank")
    add_runs_to_pool(pool, runs)
    return pool


def make_round(people, pool, judging_order: str, *, seed: int = 7) -> Round:
    round = rounds.create_round(people.project, name=f"Round {judging_order}", pool=pool, guidelines=people.project.guideline_versions.first(),
                                scale=GRADED, raters=[people.rater], overlap_share=0, judging_order=judging_order, seed=seed, user=people.lead)
    rounds.open_round(round)
    round.refresh_from_db()
    return round


def shown_doc(response) -> str:
    return RoundItem.objects.get(uuid=shown_item(response)).document.doc_id


def shown_item(response) -> str:
    """The pair on the screen ('' when there is none left)."""
    return re.search(r'id="grader" class="grader" data-item="([^"]*)"', response.content.decode()).group(1)


def grade_all(people, round) -> list[str]:
    """Grade every pair the screen serves, relevant ones 2 and the others 0; the documents in the order served."""
    client, served = people.client("rater"), []
    screen = reverse("judgments:grade", args=[people.project.slug, round.uuid])
    response = client.get(screen)
    while item := shown_item(response):
        doc = shown_doc(response)
        served.append(doc)
        client.post(reverse("judgments:grade-item", args=[people.project.slug, round.uuid, item]), {"grade": "2" if doc in RELEVANT else "0"})
        response = client.get(screen)
    return served


def seed_where_first(run: str) -> int:
    other = "B" if run == "A" else "A"
    return next(seed for seed in range(100) if run_tie_break(seed, run) > run_tie_break(seed, other))


@pytest.mark.parametrize("judging_order", ["mtf", "mmns"])
def test_an_adaptive_order_stays_on_the_run_that_gives_relevant_documents(people, pool, judging_order):
    # B first: b1 is not relevant, so the judging moves to A and stays there while A's documents are relevant.
    round = make_round(people, pool, judging_order, seed=seed_where_first("B"))
    assert grade_all(people, round) == ["b1", "a1", "a2", "a3", "a4", "b2", "b3", "b4"]


@pytest.mark.parametrize("judging_order", ["mtf", "mmns"])
def test_an_adaptive_order_that_starts_on_the_good_run_finds_every_relevant_document_first(people, pool, judging_order):
    round = make_round(people, pool, judging_order, seed=seed_where_first("A"))
    assert grade_all(people, round) == ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]


def test_pool_order_alternates_the_runs_by_rank(people, pool):
    # best_rank priority: rank 1 of both runs first (ties by doc id), then rank 2, ...
    assert grade_all(people, make_round(people, pool, "pool")) == ["a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"]


def test_random_order_is_seeded_and_the_same_for_the_same_seed(people, pool):
    first = grade_all(people, make_round(people, pool, "random", seed=3))
    assert sorted(first) == sorted(RUNS["A"] + RUNS["B"])
    Round.objects.all().delete()
    assert grade_all(people, make_round(people, pool, "random", seed=3)) == first


def test_the_lead_sets_the_order_in_the_form_and_the_next_pair_follows_it(people, pool):
    round = make_round(people, pool, "pool", seed=seed_where_first("B"))
    client = people.client("rater")
    screen = reverse("judgments:grade", args=[people.project.slug, round.uuid])
    first = client.get(screen)
    assert shown_doc(first) == "a1"
    client.post(reverse("judgments:grade-item", args=[people.project.slug, round.uuid, shown_item(first)]),
                {"grade": "2"})
    data = {"name": round.name, "guidelines": 1, "scale": "graded", "custom_scale": "", "raters": ["ravi"], "raters_per_pair": 1,
            "overlap_percent": 0, "order": "grouped", "judging_order": "mtf", "version": round.version}
    response = people.client("lead").post(reverse("judgments:round-edit", args=[people.project.slug, round.uuid]), data)
    assert response.status_code == 302
    round.refresh_from_db()
    assert round.judging_order == "mtf"
    # a1 was judged relevant, credited to A (the run it was next for): Move-To-Front stays on A.
    assert shown_doc(client.get(screen)) == "a2"
    page = people.client("lead").get(round.get_absolute_url()).content.decode()
    assert "Judging order: <strong>Move-To-Front</strong>" in page and "still drawn at random" in page


def test_fully_shuffled_serving_with_a_judging_order_is_refused_in_the_form_and_by_the_action(people, pool):
    data = {"name": "Shuffled", "pool": pool.uuid, "guidelines": 1, "scale": "graded", "custom_scale": "", "raters": ["ravi"],
            "raters_per_pair": 1, "overlap_percent": 0, "order": "shuffled", "judging_order": "mmns"}
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), data)
    assert response.status_code == 200 and not Round.objects.exists()
    assert "“Fully shuffled” serves pairs from every query at random" in response.content.decode()
    round = make_round(people, pool, "mmns")
    with pytest.raises(ActionRefused, match="ranks each query's pairs"):
        rounds.update_round(round, order="shuffled")
    assert Round.objects.get().order == "grouped"


def test_the_order_survives_a_successor_round(people, pool):
    round = make_round(people, pool, "mtf")
    save_guidelines(people.project, "# Rules v2", author=people.lead)
    assert rounds.successor(round, user=people.lead).judging_order == "mtf"


def top_unjudged(round) -> str:
    return round.items.filter(n_judged=0).order_by("-priority").first().document.doc_id


def test_a_changed_grade_ranks_the_query_again(people, pool):
    round = make_round(people, pool, "mtf", seed=seed_where_first("B"))
    client = people.client("rater")
    first = client.get(reverse("judgments:grade", args=[people.project.slug, round.uuid]))
    assert shown_doc(first) == "b1"
    grade = reverse("judgments:grade-item", args=[people.project.slug, round.uuid, shown_item(first)])
    client.post(grade, {"grade": "0"})
    assert top_unjudged(round) == "a1"  # b1 not relevant: Move-To-Front leaves B
    client.post(grade, {"grade": "3"})
    assert top_unjudged(round) == "b2"  # b1 relevant after all: it stays on B


def test_an_unrateable_pair_counts_as_not_relevant(people, pool):
    round = make_round(people, pool, "mmns", seed=seed_where_first("A"))
    client = people.client("rater")
    first = client.get(reverse("judgments:grade", args=[people.project.slug, round.uuid]))
    assert shown_doc(first) == "a1"
    client.post(reverse("judgments:grade-item", args=[people.project.slug, round.uuid, shown_item(first)]), {"unrateable": "foreign_language"})
    assert top_unjudged(round) == "b1"


def test_a_lead_resetting_an_unrateable_flag_ranks_the_query_again(people, pool):
    round = make_round(people, pool, "mtf", seed=seed_where_first("A"))
    client = people.client("rater")
    first = client.get(reverse("judgments:grade", args=[people.project.slug, round.uuid]))
    client.post(reverse("judgments:grade-item", args=[people.project.slug, round.uuid, shown_item(first)]), {"unrateable": "foreign_language"})
    assert top_unjudged(round) == "b1"
    rounds.reset_flags(round, unrateable=True, by=people.lead)
    # The flag is gone: A has lost nothing, and all its documents go first again.
    unjudged = round.items.filter(n_judged=0).order_by("-priority").values_list("document__doc_id", flat=True)
    assert list(unjudged) == ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]


def test_a_big_round_is_ranked_again_in_a_background_job(people, pool, monkeypatch):
    monkeypatch.setattr(serving_order, "INLINE_PAIRS", 4)  # the fixture's 8 pairs count as a big round
    round = make_round(people, pool, "pool", seed=seed_where_first("B"))
    data = {"name": round.name, "guidelines": 1, "scale": "graded", "custom_scale": "", "raters": ["ravi"], "raters_per_pair": 1,
            "overlap_percent": 0, "order": "grouped", "judging_order": "mmns", "version": round.version}
    people.client("lead").post(reverse("judgments:round-edit", args=[people.project.slug, round.uuid]), data)
    job = Job.objects.get(kind="reorder_round")
    assert (job.owner, job.params["judging_order"]) == (people.lead, "mmns")
    assert all(item.priority == item.pair.priority for item in round.items.select_related("pair"))  # pool order until it runs
    assert "The pairs are being ranked in this order" in people.client("lead").get(round.get_absolute_url()).content.decode()
    run_queued_jobs()
    unjudged = round.items.order_by("-priority").values_list("document__doc_id", flat=True)
    assert list(unjudged) == ["b1", "b2", "b3", "b4", "a1", "a2", "a3", "a4"]  # MM-NS from B, the seed's first run
    assert Job.objects.get(pk=job.pk).result == {"changed": 8}
    assert "being ranked" not in people.client("lead").get(round.get_absolute_url()).content.decode()


def test_a_background_ranking_overtaken_by_a_newer_setting_leaves_it_to_the_newer_job(people, pool, monkeypatch):
    monkeypatch.setattr(serving_order, "INLINE_PAIRS", 4)
    round = make_round(people, pool, "pool")
    rounds.update_round(round, judging_order="mmns", user=people.lead)
    rounds.update_round(round, judging_order="pool", user=people.lead)
    first, second = run_queued_jobs()
    assert "changed again" in first.result["skipped"] and second.state == Job.State.SUCCEEDED
    assert all(item.priority == item.pair.priority for item in round.items.select_related("pair"))
