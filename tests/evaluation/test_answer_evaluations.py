"""Answer evaluations in the app: the job's numbers equal the engine's on the same references and answers,
traffic-weighted and per-tier means with known answers, comparisons with Holm, shared tokens marked, the
leaderboard, formula-safe downloads, the commands, and refusals (raters 403, outsiders 404)."""

import csv
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluation import answer_evaluations
from evaluation.engine.answers import ANSWER_MEASURES, aggregate, compare_answers, score_answers
from evaluation.models import AnswerEvaluation
from judgments.models import Job
from judgments.ops.answers import import_references
from judgments.ops.imports import import_queries
from tests.factory import make_answer_run, run_queued_jobs

pytestmark = pytest.mark.django_db

QUERIES = ("query_id,query,tier,weight,segment\n"
           "h1,capital of france,head,30,en\nh2,largest planet,head,10,de\nt1,author of hamlet,tail,2,en\n"
           "t2,boiling point of water,tail,1,de\nx1,no references here,tail,1,en\n")
REFERENCES = {"h1": ["Paris"], "h2": ["Jupiter", "the planet Jupiter"], "t1": ["William Shakespeare"], "t2": ["100 degrees Celsius"]}
GOOD = {"h1": "Paris", "h2": "It is Jupiter.", "t1": "William Shakespeare wrote it", "t2": "100 degrees", "x1": "whatever"}
POOR = {"h1": "Lyon, I think", "h2": "Saturn", "t1": "Shakespeare", "t2": "=1+1 degrees"}


@pytest.fixture
def setup(people):
    project = people.project
    collection, _ = import_queries(project, QUERIES.encode(), "queries.csv", name="Facts")
    data = "".join(json.dumps({"query_id": q, "answers": refs}) + "\n" for q, refs in REFERENCES.items())
    import_references(collection, data.encode(), original_name="refs.jsonl")
    good = make_answer_run(project, GOOD, name="good", system="RAG big")
    poor = make_answer_run(project, POOR, name="poor", system="RAG small")
    return collection, poor, good


def start(people, collection, runs, **extra) -> AnswerEvaluation:
    response = people.client("lead").post(reverse("evaluation:answer-evaluation-create", args=[people.project.slug]), {
        "query_set": collection.uuid, "runs": [run.uuid for run in runs], "baseline": runs[0].uuid,
        "measures": list(ANSWER_MEASURES), "tokenizer": "ultrarag", **extra})
    assert response.status_code == 302, response.content.decode()[:3000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return AnswerEvaluation.objects.get()


def test_the_jobs_numbers_equal_the_engines_on_the_same_data(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    assert evaluation.state == AnswerEvaluation.State.DONE and evaluation.measures == list(ANSWER_MEASURES)
    assert [link.run for link in evaluation.run_links.all()] == [poor, good]
    assert evaluation.n_references == 4 and len(evaluation.references_sha256) == 64
    weights = {"h1": 30, "h2": 10, "t1": 2, "t2": 1}
    for row, answers in zip(evaluation.results["runs"], (POOR, GOOD)):
        expected = score_answers(REFERENCES, answers)
        assert row["mean"] == pytest.approx(aggregate(expected))
        assert row["weighted"] == pytest.approx(aggregate(expected, weights))
        assert row["queries"] == 4
        stored = answer_evaluations.per_query_frame(evaluation, "f1")[row["run"]].to_dict()
        assert stored == pytest.approx(expected["f1"])
    # Comparisons: the engine's compare_answers on the same data gives the same tests.
    engine = compare_answers(REFERENCES, POOR, {"good": GOOD}, resamples=evaluation.resamples, seed=evaluation.seed, baseline_name="poor")
    assert evaluation.results["baseline"] == "poor"
    for mine, theirs in zip(evaluation.results["comparisons"]["good"], engine["comparisons"]["good"]):
        assert mine == pytest.approx(theirs)
    assert evaluation.results["runs"][1]["mean"]["em"] > evaluation.results["runs"][0]["mean"]["em"]


def test_weighted_and_tier_means_have_known_values(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [good])
    row = evaluation.results["runs"][0]
    # em per query for GOOD: h1 1, h2 0 ("it is jupiter" is no reference), t1 0, t2 0
    assert row["mean"]["em"] == pytest.approx(0.25)
    assert row["weighted"]["em"] == pytest.approx(30 / 43)
    assert row["by_tier"]["head"] == {"queries": 2, "mean": pytest.approx(row["by_tier"]["head"]["mean"])}
    assert row["by_tier"]["head"]["mean"]["em"] == pytest.approx(0.5)
    assert row["by_tier"]["tail"]["mean"]["em"] == pytest.approx(0.0)
    assert row["by_tier"]["head"]["mean"]["acc"] == pytest.approx(1.0)  # "jupiter" is in "it is jupiter"
    assert set(row["by_segment"]) == {"en", "de"}


def test_the_page_shows_scores_and_each_answer_beside_its_references_with_shared_tokens_marked(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    response = people.client("viewer").get(evaluation.get_absolute_url(), {"measure": "f1", "run": "good"})
    assert response.status_code == 200
    rows = {row["query_id"]: row for row in response.context["per_query"]}
    assert set(rows) == {"h1", "h2", "t1", "t2"}
    assert rows["h2"]["answer"] == "It is <mark>Jupiter.</mark>"
    assert rows["h2"]["best"] == 0 and rows["h2"]["references"][0] == "<mark>Jupiter</mark>"
    html = response.content.decode()
    assert "It is <mark>Jupiter.</mark>" in html and "traffic-weighted" in html
    assert "head" in html  # the tier table
    poor_page = people.client("viewer").get(evaluation.get_absolute_url(), {"run": "poor", "sort": "poor"})
    assert [row["query_id"] for row in poor_page.context["per_query"]][0] in {"h1", "h2", "t2"}
    assert people.client("viewer").get(evaluation.get_absolute_url(), {"measure": "bleu"}).status_code == 400


def test_answers_are_escaped_where_they_are_marked():
    beside = answer_evaluations.answer_beside_references("<b>Paris</b> & co", ["Paris"])
    assert beside["answer"] == "<mark>&lt;b&gt;Paris&lt;/b&gt;</mark> &amp; co"


def test_a_running_evaluation_is_polled_and_htmx_swaps_in_the_scores(people, setup):
    collection, poor, good = setup
    people.client("lead").post(reverse("evaluation:answer-evaluation-create", args=[people.project.slug]),
                               {"query_set": collection.uuid, "runs": [poor.uuid, good.uuid], "measures": ["f1"], "tokenizer": "ultrarag"})
    evaluation = AnswerEvaluation.objects.get()
    poll = {"HX-Request": "true", "HX-Target": "evaluation-body"}
    waiting = people.client("viewer").get(evaluation.get_absolute_url(), headers=poll)
    assert waiting.status_code == 200 and "Waiting for a worker" in waiting.content.decode()
    assert "<html" not in waiting.content.decode()
    run_queued_jobs()
    done = people.client("viewer").get(evaluation.get_absolute_url(), headers=poll)
    assert done.status_code == 286 and "Scores" in done.content.decode()


def test_the_comparison_page_and_downloads(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    slug = people.project.slug
    page = people.client("viewer").get(reverse("evaluation:answer-comparison", args=[slug, evaluation.uuid]), {"measure": "em"})
    assert page.status_code == 200 and "good vs poor" in page.content.decode() and "p (Holm)" in page.content.decode()

    def download(what, fmt):
        response = people.client("viewer").get(reverse("evaluation:answer-download", args=[slug, evaluation.uuid, what, fmt]))
        assert response.status_code == 200
        return response.content.decode()

    aggregate_json = json.loads(download("aggregate", "json"))
    assert aggregate_json["references_sha256"] == evaluation.references_sha256
    assert aggregate_json["answer_runs"] == {"poor": poor.sha256, "good": good.sha256}
    rows = list(csv.reader(io.StringIO(download("aggregate", "csv"))))
    assert rows[0] == ["run", "measure", "mean", "weighted_mean", "queries"] and len(rows) == 1 + 2 * 8
    per_query = list(csv.DictReader(io.StringIO(download("per-query", "csv"))))
    assert {row["query_id"] for row in per_query} == {"h1", "h2", "t1", "t2"}
    assert len(json.loads(download("per-query", "json"))) == 4
    assert "tier" in download("breakdown", "csv")
    comparison = list(csv.DictReader(io.StringIO(download("comparison", "csv"))))
    assert {row["measure"] for row in comparison} == set(ANSWER_MEASURES)
    assert json.loads(download("comparison", "json"))["baseline"] == "poor"
    missing = people.client("viewer").get(reverse("evaluation:answer-download", args=[slug, evaluation.uuid, "nope", "csv"]))
    assert missing.status_code == 404


def test_csv_downloads_never_start_a_cell_with_a_formula(people, setup):
    collection, poor, good = setup
    make_answer_run(people.project, {"h1": "Paris"}, name="=HYPERLINK(1)", system="+evil")
    run = people.project.answer_runs.get(name="=HYPERLINK(1)")
    evaluation = start(people, collection, [run, good])
    slug = people.project.slug
    for what in ("aggregate", "per-query", "breakdown", "comparison"):
        text = people.client("viewer").get(reverse("evaluation:answer-download", args=[slug, evaluation.uuid, what, "csv"])).content.decode()
        for row in csv.reader(io.StringIO(text)):
            assert not any(cell[:1] in ("=", "+", "@") for cell in row), (what, row)


def test_the_leaderboard_ranks_answer_runs_best_first(people, setup):
    collection, poor, good = setup
    start(people, collection, [poor, good])
    response = people.client("viewer").get(reverse("evaluation:answer-leaderboard", args=[people.project.slug]), {"measure": "em"})
    assert response.status_code == 200
    assert [row["run"] for row in response.context["rows"]] == ["good", "poor"]
    assert response.context["measure"] == "em"


def test_a_query_set_without_references_is_refused(people, setup):
    _collection, poor, good = setup
    empty, _ = import_queries(people.project, b"query_id,query\nq1,x\n", "e.csv", name="Empty")
    response = people.client("lead").post(reverse("evaluation:answer-evaluation-create", args=[people.project.slug]),
                                          {"query_set": empty.uuid, "runs": [poor.uuid], "measures": ["f1"], "tokenizer": "ultrarag"})
    assert response.status_code == 200 and "has reference answers" in response.content.decode()
    assert not AnswerEvaluation.objects.exists()


def test_raters_never_see_answer_evaluations_and_outsiders_get_404(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    slug = people.project.slug
    urls = [reverse("evaluation:answer-evaluations", args=[slug]), evaluation.get_absolute_url(),
            reverse("evaluation:answer-comparison", args=[slug, evaluation.uuid]),
            reverse("evaluation:answer-download", args=[slug, evaluation.uuid, "aggregate", "csv"]),
            reverse("evaluation:answer-leaderboard", args=[slug])]
    for url in urls:
        assert people.client("rater").get(url).status_code == 403, url
        assert people.client("outsider").get(url).status_code == 404, url
        assert people.client("viewer").get(url).status_code == 200, url
    create = reverse("evaluation:answer-evaluation-create", args=[slug])
    assert people.client("viewer").get(create).status_code == 403
    assert people.client("rater").post(create).status_code == 403
    assert people.client("outsider").get(create).status_code == 404


def test_the_commands_evaluate_and_compare_like_the_job(people, setup, tmp_path):
    collection, poor, good = setup
    out = io.StringIO()
    path = tmp_path / "results.json"
    call_command("evaluate_answers", people.project.slug, "Facts", "good", "-m", "em", "-m", "f1", "--json", str(path), stdout=out)
    text = out.getvalue()
    assert "Queries scored: 4, of 4 with reference answers, of 5 in the query set 'Facts'" in text
    expected = aggregate(score_answers(REFERENCES, GOOD, ["em", "f1"]))
    assert f"{expected['f1']:.4f}" in text
    stored = json.loads(path.read_text())
    assert stored["runs"][0]["mean"] == pytest.approx(expected)
    out = io.StringIO()
    call_command("compare_answers", people.project.slug, "Facts", "poor", "good", "-m", "em", "-c", "--resamples", "1000", stdout=out)
    assert "good (A) vs poor (B), 1000 resamples" in out.getvalue()
    evaluation = AnswerEvaluation.objects.order_by("-created_at").first()
    assert evaluation.all_queries and evaluation.resamples == 1000 and evaluation.measures == ["em"]
    with pytest.raises(CommandError, match="needs two answer runs"):
        call_command("compare_answers", people.project.slug, "Facts", "poor")
    with pytest.raises(CommandError, match="no answer run named"):
        call_command("evaluate_answers", people.project.slug, "Facts", "nope")
    with pytest.raises(CommandError):
        call_command("evaluate_answers", people.project.slug, "Facts", "good", "-m", "bleu")


def test_the_pages_refuse_the_wrong_method(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    slug = people.project.slug
    for url in (reverse("evaluation:answer-evaluations", args=[slug]), evaluation.get_absolute_url(),
                reverse("evaluation:answer-comparison", args=[slug, evaluation.uuid]), reverse("evaluation:answer-leaderboard", args=[slug])):
        assert people.client("lead").post(url).status_code == 405, url


def test_an_evaluation_of_one_answer_run_has_no_comparison(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [good])
    assert "comparisons" not in evaluation.results
    assert people.client("viewer").get(reverse("evaluation:answer-comparison", args=[people.project.slug, evaluation.uuid])).status_code == 404


def test_the_reports_page_lists_answer_evaluations_for_leads_and_viewers_only(people, setup):
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    url = reverse("judgments:reports")
    assert evaluation.get_absolute_url() in people.client("viewer").get(url).content.decode()
    assert evaluation.get_absolute_url() not in people.client("rater").get(url).content.decode()
    assert evaluation.get_absolute_url() not in people.client("outsider").get(url).content.decode()


def test_the_form_starts_on_the_newest_query_set_with_reference_answers(people, setup):
    collection, _poor, _good = setup
    import_queries(people.project, b"query_id,query\nq1,x\n", "later.csv", name="Later, no references")
    form = people.client("lead").get(reverse("evaluation:answer-evaluation-create", args=[people.project.slug])).context["form"]
    assert form["query_set"].value() == collection.uuid


def test_the_answer_comparison_says_not_enough_evidence_over_four_queries(people, setup):
    """4 queries: the sign-flip test's smallest p is 2/2^4 = 0.125 before any correction, so no difference can be
    significant, and the page says so rather than "no"."""
    collection, poor, good = setup
    evaluation = start(people, collection, [poor, good])
    slug = people.project.slug
    page = people.client("viewer").get(reverse("evaluation:answer-comparison", args=[slug, evaluation.uuid])).content.decode()
    cells = [c.strip() for c in re.findall(r'<td class="significance-(\w+)">', page)]
    assert cells == ["insufficient"] * len(ANSWER_MEASURES) and "not enough evidence" in page
    assert "at least 9 differing queries needed" in page  # Holm over 8 measures: 8 x 2/2^k < 0.05 from k = 9
    rows = list(csv.DictReader(io.StringIO(people.client("viewer").get(
        reverse("evaluation:answer-download", args=[slug, evaluation.uuid, "comparison", "csv"])).content.decode())))
    assert {row["verdict"] for row in rows} == {"not enough evidence"}


def test_the_answer_comparison_says_which_queries_the_tests_cover_and_which_count_0(people, setup):
    """poor answers h1, h2, t1, t2; good answers those and x1, which has no references: 4 queries, none missing.
    A third run answering h1 only leaves 3 of the 4 unscored, counted 0 for it."""
    collection, poor, good = setup
    partial = make_answer_run(people.project, {"h1": "Paris"}, name="partial", system="RAG tiny")
    evaluation = start(people, collection, [poor, good, partial])
    page = people.client("viewer").get(reverse("evaluation:answer-comparison", args=[people.project.slug, evaluation.uuid])).content.decode()
    text = " ".join(re.sub(r"<[^>]+>", "", page).split())
    assert "good vs poor The tests pair the two runs query by query over 4 queries, every query either run scored." in text
    assert ("partial vs poor The tests pair the two runs query by query over 4 queries, every query either run scored; a query one "
            "run did not score counts 0 for it: partial did not score 3, poor 0.") in text
