"""A round planned for prediction-powered estimates, over HTTP: a lead plans a random sample of queries for raters
(N typed, or suggested from a target width with a calibrated judge), the round opens with the other queries' pairs
left to the judge, raters are served the sample only, and an opened round's sample stays as it was."""

import html
import re

import pytest
import pytrec_eval
from django.urls import reverse

from evaluation.engine.ppi import MIN_LABELLED, calibration_variances, plan_sample_size
from judgments.lib.sampling import draw_human_sample
from judgments.models import DisplayField, HumanSample, MachineGrade, Round
from judgments.ops import grading, planning, rounds
from judgments.ops.automatic import PairChoice, add_judge, calibrate, run_judge, store_calibration
from judgments.ops.grading import Verdict
from tests.factory import make_round

pytestmark = pytest.mark.django_db

TARGET = {f"t{q:02d}": [f"t{q:02d}-d{d}" for d in range(1, 4)] for q in range(1, 21)}  # 20 queries of 3 pairs
LARGE = {f"b{q:03d}": [f"b{q:03d}-d1"] for q in range(1, 201)}  # 200 queries of one pair


def url(name: str, round: Round) -> str:
    return reverse(f"judgments:{name}", args=[round.project.slug, round.uuid])


def page(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def draft(people):
    return make_round(people.project, people.lead, [people.rater], TARGET, open=False, name="Planned")


def human_grade(query_number: int, position: int) -> int:
    """The raters' grade of the calibration round's pairs: the judge's (3 for an odd query's first document, else 0)
    but for the third document of every third query, which raters find somewhat relevant (1)."""
    return {1: 3 * (query_number % 2), 2: 0, 3: int(query_number % 3 == 0)}[position]


def calibrated_judge(people, *, graded_queries: int = 30):
    """A round of 30 queries of 3 pairs, raters' grades on `graded_queries` of them (`human_grade`), and an overlap
    judge run on every pair and calibrated: 3 for the first document of an odd query (whose text the query's
    reference repeats), 0 for the rest (an even query's reference shares no word with its documents)."""
    pairs = {f"q{q}": [f"d{q}-{d}" for d in range(1, 4)] for q in range(1, 31)}
    round = make_round(people.project, people.lead, [people.rater], pairs, name="Calibration")
    for order, name in enumerate(("title", "body")):
        DisplayField.objects.get_or_create(project=people.project, field=name, defaults={"label": name, "order": order})
    for query in round.pool.query_set.queries.all():
        odd = int(query.query_id[1:]) % 2
        query.references = [f"Title of d{query.query_id[1:]}-1 Text of d{query.query_id[1:]}-1" if odd else "nothing alike here"]
        query.save()
    for item in round.items.select_related("query", "document"):
        number, position = int(item.query.query_id[1:]), int(item.document.doc_id[-1])
        if number <= graded_queries:
            grading.record(item, people.rater, Verdict(grade=human_grade(number, position)))
    judge = add_judge(round, name="overlap", kind="token_overlap", settings={})
    run_judge(judge)
    store_calibration(judge, calibrate(judge, resamples=20, system_resamples=20))
    return judge


def oracle_variances(judge) -> dict:
    """pytrec_eval's nDCG@10 of the calibration round's run under the raters' and the judge's labels, and their variances."""
    human, machine = {}, {}
    for query_id, doc_id, grade in MachineGrade.objects.filter(judge=judge).values_list("item__query__query_id", "item__document__doc_id", "grade"):
        machine.setdefault(query_id, {})[doc_id] = grade
        human.setdefault(query_id, {})[doc_id] = human_grade(int(query_id[1:]), int(doc_id[-1]))
    run = {query_id: {f"d{query_id[1:]}-{d}": 10.0 - d for d in range(1, 4)} for query_id in human}
    values = [{q: v["ndcg_cut_10"] for q, v in pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run).items()}
              for qrels in (human, machine)]
    return calibration_variances(*values)


# ------------------------------------------------------------------------------------------ N typed


def test_a_lead_plans_a_draft_round_with_a_typed_n(people, draft):
    response = people.client("lead").post(url("round-plan", draft), {"plan": "1", "size": 5, "seed": 3, "measure": "nDCG@10"})
    assert response.status_code == 302 and response["Location"] == draft.get_absolute_url()
    sample = HumanSample.objects.get(round=draft)
    assert sample.query_ids == draw_human_sample(TARGET, 5, 3).query_ids
    assert (sample.size, sample.seed, sample.by_tier, sample.suggested_from, sample.created_by) == (5, 3, False, {}, people.lead)
    shown = page(people.client("lead").get(draft.get_absolute_url()))
    assert "5 of 20 queries labelled by raters" in shown and "seed 3" in shown and "the judge labels the other 15" in shown
    assert "N was typed by lena" in shown


def test_opening_a_planned_round_leaves_the_other_queries_pairs_to_the_judge_and_raters_get_only_the_sample(people, draft):
    people.client("lead").post(url("round-plan", draft), {"plan": "1", "size": 4, "seed": 8, "measure": "nDCG@10"})
    sampled = set(HumanSample.objects.get(round=draft).query_ids)
    assert people.client("lead").post(url("round-open", draft)).status_code == 302
    required = {(query, doc): need for query, doc, need in draft.items.values_list("query__query_id", "document__doc_id", "required")}
    assert required == {(q, d): 1 if q in sampled else 0 for q, docs in TARGET.items() for d in docs}
    totals = grading.kept_totals(draft)
    assert (totals["pairs"], totals["needed"], totals["carried"]) == (60, 12, 48)
    before = grading.progress_of(draft, people.rater)
    assert (before.judged, before.remaining, before.round_needed) == (0, 12, 12)
    served = []
    while (item := grading.next_item(draft, people.rater)) is not None:
        served.append(item.query.query_id)
        grading.record(item, people.rater, Verdict(grade=1))
    assert sorted(served) == sorted(q for q in sampled for _ in range(3))
    after = grading.progress_of(draft, people.rater)
    assert (after.judged, after.remaining, after.round_done, after.round_needed) == (12, 0, 12, 12)
    shown = page(people.client("lead").get(draft.get_absolute_url()))
    assert "4 of 20 queries labelled by raters" in shown and "48 pairs no rater is served" in shown
    assert "12 of 12 judgments" in shown and "No automatic judge is added to this round yet" in shown
    assert shown.count("3 pairs, judge only") == 16  # one row per query outside the sample


def test_a_judge_of_a_planned_round_grades_every_pair_sampled_or_not(people, draft):
    for query in draft.pool.query_set.queries.all():
        query.references = [f"Title of {query.query_id}-d1"]
        query.save()
    planning.plan_round(draft, size=4, by_tier=False, seed=1)
    rounds.open_round(draft)
    judge = add_judge(draft, name="overlap", kind="token_overlap", settings={})
    assert len(PairChoice("unjudged").items(draft)) == 60
    run_judge(judge)
    assert MachineGrade.objects.filter(judge=judge).count() == draft.items.count() == 60
    assert MachineGrade.objects.filter(judge=judge, item__required=0).count() == 48


def test_re_planning_a_draft_replaces_its_sample(people, draft):
    client = people.client("lead")
    client.post(url("round-plan", draft), {"plan": "1", "size": 5, "seed": 3, "measure": "nDCG@10"})
    client.post(url("round-plan", draft), {"plan": "1", "size": 7, "seed": 4, "measure": "nDCG@10"})
    sample = HumanSample.objects.get(round=draft)
    assert (sample.size, sample.seed, sample.query_ids) == (7, 4, draw_human_sample(TARGET, 7, 4).query_ids)


def test_removing_the_plan_restores_normal_requirements(people, draft):
    client = people.client("lead")
    client.post(url("round-plan", draft), {"plan": "1", "size": 5, "seed": 3, "measure": "nDCG@10"})
    assert client.post(url("round-plan-remove", draft)).status_code == 302
    assert not HumanSample.objects.filter(round=draft).exists()
    rounds.open_round(draft)
    assert set(draft.items.values_list("required", flat=True)) == {1}
    assert "Raters label every query of this round" in page(client.get(draft.get_absolute_url()))


# ------------------------------------------------------------------------------------------ refusals


def test_an_open_rounds_sample_cannot_change_nor_be_removed(people, draft):
    client = people.client("lead")
    client.post(url("round-plan", draft), {"plan": "1", "size": 5, "seed": 3, "measure": "nDCG@10"})
    rounds.open_round(draft)
    shown = page(client.get(url("round-plan", draft)))
    assert "its sample is fixed" in shown and 'name="plan"' not in shown
    client.post(url("round-plan", draft), {"plan": "1", "size": 9, "seed": 4, "measure": "nDCG@10"})
    removed = client.post(url("round-plan-remove", draft), follow=True)
    assert "cannot be removed once the round has opened" in page(removed)
    sample = HumanSample.objects.get(round=draft)
    assert (sample.size, sample.seed) == (5, 3)


def test_an_open_round_refuses_a_new_plan_saying_why(people):
    round = make_round(people.project, people.lead, [people.rater], TARGET, name="Open")
    with pytest.raises(Exception, match="cannot change once the round has opened"):
        planning.plan_round(round, size=3, by_tier=False, seed=1)


@pytest.mark.parametrize("data,problem", [
    ({"size": 21}, "between 1 and the round's 20 queries; 21 asked"),
    ({"size": 5, "by_tier": "on"}, "The round's queries have no tiers"),
    ({}, "Say how many queries raters label"),
    ({"size": 5, "measure": "nDCG@ten"}, "nDCG@ten"),
])
def test_bad_plans_are_refused_with_the_problem_named(people, draft, data, problem):
    response = people.client("lead").post(url("round-plan", draft), {"plan": "1", "measure": "nDCG@10", **data})
    assert response.status_code == 200 and problem in page(response)
    assert not HumanSample.objects.filter(round=draft).exists()


def test_raters_and_viewers_cannot_plan(people, draft):
    assert people.client("rater").get(url("round-plan", draft)).status_code == 403
    assert people.client("viewer").post(url("round-plan", draft), {"plan": "1", "size": 3}).status_code == 403
    assert people.client("outsider").get(url("round-plan", draft)).status_code == 404
    assert not HumanSample.objects.filter(round=draft).exists()


# ------------------------------------------------------------------------------------------ tiers


def test_a_tiered_set_draws_within_tiers_by_default(people, draft):
    for query in draft.pool.query_set.queries.all():
        query.tier = "head" if query.query_id <= "t05" else "tail"
        query.save()
    client = people.client("lead")
    assert re.search(r'<input type="checkbox" name="by_tier"[^>]* checked>', page(client.get(url("round-plan", draft))))
    client.post(url("round-plan", draft), {"plan": "1", "size": 8, "seed": 2, "by_tier": "on", "measure": "nDCG@10"})
    sample = HumanSample.objects.get(round=draft)
    assert sample.by_tier and sample.tier_shares == {"head": 0.25, "tail": 0.75}
    assert sum(q <= "t05" for q in sample.query_ids) == 2 and len(sample.query_ids) == 8
    assert "within tiers" in page(client.get(draft.get_absolute_url()))


# ------------------------------------------------------------------------------------------ N suggested


def test_without_a_calibrated_judge_the_page_says_not_enough_evidence_and_lets_the_lead_type_n(people, draft):
    shown = page(people.client("lead").get(url("round-plan", draft)))
    assert "Not enough evidence to suggest N" in shown and "no judge of the project has a calibration report" in shown
    assert 'name="size"' in shown


def test_n_is_suggested_from_a_target_width_with_a_calibrated_judge_and_stored_with_its_grounds(people):
    draft = make_round(people.project, people.lead, [people.rater], LARGE, open=False, name="Large")
    judge = calibrated_judge(people)
    run = judge.round.pool.runs.get()
    variances = oracle_variances(judge)
    expected = plan_sample_size(n_queries=200, half_width=0.1, var_residual=variances["var_residual"],
                                var_judge=variances["var_judge"])
    assert MIN_LABELLED < expected < 200
    target = {"measure": "nDCG@10", "half_width": 0.1, "judge": str(judge.uuid), "run": str(run.uuid)}
    client = people.client("lead")
    shown = page(client.post(url("round-plan", draft), {"suggest": "1", **target}))
    assert f"{expected} of 200 queries" in shown and "overlap (automatic), calibrated in round Calibration" in shown
    assert "30 of round Calibration, every pair labelled by raters and by the judge" in shown
    assert f'name="size" value="{expected}"' in shown
    client.post(url("round-plan", draft), {"plan": "1", "size": expected, "seed": 5, **target})
    sample = HumanSample.objects.get(round=draft)
    assert sample.size == expected and sample.suggested_from["judge"] == "overlap"
    assert sample.suggested_from["queries"] == 30 and sample.suggested_from["run"] == run.name
    assert sample.suggested_from["var_residual"] == pytest.approx(variances["var_residual"], abs=1e-12)
    assert sample.suggested_from["var_judge"] == pytest.approx(variances["var_judge"], abs=1e-12)
    assert "N was suggested for ±0.1 on nDCG@10 from judge overlap" in page(client.get(draft.get_absolute_url()))


def test_a_typed_n_other_than_the_suggestion_is_stored_as_typed(people, draft):
    judge = calibrated_judge(people)
    target = {"measure": "nDCG@10", "half_width": 0.1, "judge": str(judge.uuid), "run": str(judge.round.pool.runs.get().uuid)}
    people.client("lead").post(url("round-plan", draft), {"plan": "1", "size": 15, "seed": 5, **target})
    assert HumanSample.objects.get(round=draft).suggested_from == {}


def test_too_few_queries_labelled_by_both_give_no_suggestion(people):
    draft = make_round(people.project, people.lead, [people.rater], LARGE, open=False, name="Large")
    judge = calibrated_judge(people, graded_queries=6)
    target = {"measure": "nDCG@10", "half_width": 0.1, "judge": str(judge.uuid), "run": str(judge.round.pool.runs.get().uuid)}
    shown = page(people.client("lead").post(url("round-plan", draft), {"suggest": "1", **target}))
    assert "Not enough evidence to suggest N" in shown
    assert "only 6 of the queries of round “Calibration” have every pair labelled by both the raters and judge “overlap”" in shown
    assert f"needs at least {MIN_LABELLED}" in shown


def test_a_width_no_sample_reaches_is_said(people):
    draft = make_round(people.project, people.lead, [people.rater], LARGE, open=False, name="Large")
    judge = calibrated_judge(people)
    target = {"measure": "nDCG@10", "half_width": 0.0001, "judge": str(judge.uuid), "run": str(judge.round.pool.runs.get().uuid)}
    shown = page(people.client("lead").post(url("round-plan", draft), {"suggest": "1", **target}))
    assert "even raters labelling all 200 queries would not give an interval of ±0.0001 on nDCG@10" in shown


# ------------------------------------------------------------------------------------------ refresh rounds


def test_a_planned_refresh_round_serves_only_the_sampled_queries_pairs_and_keeps_the_carried_labels(people):
    from judgments.ops import versions

    first = make_round(people.project, people.lead, [people.rater], TARGET, name="First")
    while (item := grading.next_item(first, people.rater)) is not None:
        grading.record(item, people.rater, Verdict(grade=2 if item.query.query_id != "t01" else 1))
    v1 = versions.publish(first, user=people.lead)
    refresh = rounds.create_refresh(v1, user=people.lead, rejudge=Round.Rejudge.ALL)
    planning.plan_round(refresh, size=5, by_tier=False, seed=4)
    sampled = set(HumanSample.objects.get(round=refresh).query_ids)
    assert rounds.open_round(refresh)["for_judge"] == 45
    served = []
    while (item := grading.next_item(refresh, people.rater)) is not None:
        served.append(item.query.query_id)
        grading.record(item, people.rater, Verdict(grade=3))
    assert sorted(served) == sorted(q for q in sampled for _ in range(3))
    v2 = versions.publish(refresh)
    labels = versions.carried_labels(v2)
    assert len(labels) == 60
    assert all(labels[(q, d)] == (3 if q in sampled else 1 if q == "t01" else 2) for q, docs in TARGET.items() for d in docs)


def test_a_successor_on_new_guidelines_keeps_the_rounds_sample(people, draft):
    from judgments.ops.actions import save_guidelines

    planning.plan_round(draft, size=6, by_tier=False, seed=2)
    rounds.open_round(draft)
    save_guidelines(people.project, "# Rules, clarified", author=people.lead)
    response = people.client("lead").post(url("round-successor", draft))
    successor = Round.objects.get(name="Planned (guidelines v2)")
    assert response.status_code == 302 and successor.status == Round.Status.DRAFT
    copied, original = HumanSample.objects.get(round=successor), HumanSample.objects.get(round=draft)
    assert (copied.query_ids, copied.seed, copied.size, copied.created_by) == (original.query_ids, 2, 6, people.lead)


def test_a_planned_rounds_pages_run_no_more_queries_for_a_round_five_times_the_size(people, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def planned(name: str, queries: int, documents: int) -> Round:
        pairs = {f"{name}{q:03d}": [f"{name}{q:03d}-d{d}" for d in range(documents)] for q in range(queries)}
        round = make_round(people.project, people.lead, [people.rater], pairs, open=False, name=name)
        planning.plan_round(round, size=queries // 2, by_tier=False, seed=1)
        rounds.open_round(round)
        return round

    small, big = planned("s", 12, 2), planned("b", 60, 4)
    client = people.client("lead")
    for name in ("round", "round-plan"):
        client.get(url(name, small))
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url(name, small)).status_code == 200
        allowed = len(captured)
        assert allowed > 0
        client.get(url(name, big))
        with django_assert_max_num_queries(allowed):
            assert client.get(url(name, big)).status_code == 200


def test_new_pool_pairs_join_a_planned_round_by_the_sample_and_new_queries_are_refused(people, draft):
    import io

    from judgments.models import Query
    from judgments.ops.imports import import_corpus, import_run
    from judgments.ops.pools import add_runs_to_pool
    from tests.factory import trec_run

    planning.plan_round(draft, size=5, by_tier=False, seed=3)
    rounds.open_round(draft)
    sampled = set(HumanSample.objects.get(round=draft).query_ids)
    inside, outside = min(sampled), min(set(TARGET) - sampled)
    import_corpus(people.project, io.BytesIO(b'{"doc_id": "new-a", "title": "A"}\n{"doc_id": "new-b", "title": "B"}\n'), "more.jsonl")
    run, _ = import_run(people.project, trec_run({inside: ["new-a"], outside: ["new-b"]}), "new.run", name="new", system="dense")
    add_runs_to_pool(draft.pool, [run])
    client = people.client("lead")
    assert "1 new pool pairs added" in page(client.post(url("round-add-pairs", draft), follow=True))
    added = dict(draft.items.filter(document__doc_id__in=["new-a", "new-b"]).values_list("document__doc_id", "required"))
    assert added == {"new-a": 1, "new-b": 0}

    Query.objects.create(collection=draft.pool.query_set, query_id="t99", text="a query added later")
    later, _ = import_run(people.project, trec_run({"t99": ["new-a"]}), "later.run", name="later", system="dense")
    add_runs_to_pool(draft.pool, [later])
    refused = page(client.post(url("round-add-pairs", draft), follow=True))
    assert "The pool's new pairs bring 1 query this round lacks" in refused
    assert not draft.items.filter(query__query_id="t99").exists()
