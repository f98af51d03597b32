"""The demo data works for the flow docs/getting-started.md describes: a sample from its log, pooled over its runs, has pairs."""

import pyarrow.compute as pc
import pytest
from django.core.management import call_command

from judgments.demo import DEMO_PROJECT, SEARCH_LOG
from judgments.lib.sampling import shortfalls
from judgments.models import Project
from judgments.ops.imports import load_run_table
from judgments.ops.log_sampling import SamplingSettings, draw, query_id_of, save_sample
from judgments.ops.pools import add_runs_to_pool, create_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(db):
    call_command("load_demo")
    return Project.objects.get(slug=DEMO_PROJECT["slug"])


def test_a_sample_drawn_with_the_default_settings_fills_every_tier_and_its_pool_has_pairs(project):
    drawn = draw(project.query_logs.get(name=SEARCH_LOG), SamplingSettings(seed=3))
    assert shortfalls(drawn.sample.summary) == []
    sample = save_sample(drawn, name="Default sample")
    pool = create_pool(project, name="Sample pool", query_set=sample, depth=10, strategy="best_rank")
    report = add_runs_to_pool(pool, list(project.runs.all()))
    assert report["pairs_per_query"] and report["queries_without_pairs"] == 0
    assert report["missing_from_corpus"] == 0


def test_a_launch_query_and_its_sampled_twin_get_the_same_ranking(project):
    run = project.runs.get(name="hybrid-v2")
    twin = query_id_of("tent")
    table = load_run_table(run, columns=["query_id", "doc_id", "rank"])
    ranked = {query_id: table.filter(pc.equal(table["query_id"], query_id)).sort_by("rank")["doc_id"].to_pylist()
              for query_id in ("q0001", twin)}
    assert ranked["q0001"] == ranked[twin] and len(ranked[twin]) == 50


def test_the_demo_has_reference_answers_two_answer_runs_and_an_answer_evaluation_ranking_the_careful_assistant_first(project):
    from judgments.demo import ANSWER_QUERY_SET

    query_set = project.query_sets.get(name=ANSWER_QUERY_SET)
    with_references = query_set.queries.exclude(references=[]).count()
    assert 0 < with_references < query_set.queries.count()
    assert sorted(project.answer_runs.values_list("name", flat=True)) == ["assistant-large", "assistant-small"]
    evaluation = project.answer_evaluations.get()
    means = {row["run"]: row["mean"] for row in evaluation.results["runs"]}
    assert means["assistant-large"]["acc"] > means["assistant-small"]["acc"]
    assert evaluation.results["baseline"] == "assistant-small" and evaluation.results["runs"][0]["weighted"]
    call_command("load_demo")  # a second load adds nothing
    assert project.answer_evaluations.count() == 1 and project.answer_runs.count() == 2


def test_the_demo_has_a_small_answer_round_graded_by_both_raters_with_faithfulness(project):
    from judgments.demo import ANSWER_GRADED_QUESTIONS, ANSWER_ROUND
    from judgments.models import Judgment

    round = project.rounds.get(name=ANSWER_ROUND)
    assert round.is_answers and round.is_open and round.faithfulness_grading_scale is not None
    judgments = Judgment.objects.filter(item__round=round)
    graded = set(judgments.values_list("item__query_id", flat=True))
    assert len(graded) == ANSWER_GRADED_QUESTIONS
    assert set(judgments.values_list("rater__username", flat=True)) == {"rater1", "rater2"}
    assert not judgments.filter(faithfulness__isnull=True).exists()
    # The careful assistant's answers are graded right more often than the cheap one's.
    right = {name: judgments.filter(item__document__answer_run__name=name, grade=2).count() / max(1, judgments.filter(item__document__answer_run__name=name).count())
             for name in ("assistant-large", "assistant-small")}
    assert right["assistant-large"] > right["assistant-small"]
    assert round.items.filter(n_judged__lt=2).exists()  # the rest is left to grade


def test_the_demo_publishes_its_launch_round_as_v1_and_a_reload_adds_no_version(project, client):
    from judgments.demo import ROUND

    round = project.rounds.get(name=ROUND)
    (version,) = round.list_versions.all()
    assert version.number == 1 and version.n_pairs > 0 and len(version.sha256) == 64
    call_command("load_demo")
    assert round.list_versions.count() == 1
