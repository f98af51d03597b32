"""The answer leaderboard ranks by the metric the raters' report names ("which answer metric agrees with the
raters", kept when computed), says so with the report's date and a link, and says why when it ranks by the
default instead; the report links back. The best metric is checked against scipy's tau-b over the labels."""

import html
import io
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from scipy import stats

from evaluation.answer_evaluations import create_answer_evaluation, run_answer_evaluation
from evaluation.engine.answers import ANSWER_MEASURES, score_answer
from judgments.models import AnswerMetricsReport, Project
from judgments.ops import answer_metrics
from tests.factory import Role, add_member, make_answer_run, make_graded_answer_round, make_user
from tests.judgments.test_answer_metrics_page import ANSWERS, GRADES, REFERENCES, expected

pytestmark = pytest.mark.django_db


def why(page: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", re.search(r'<p id="ranking-why">(.*?)</p>', page, re.S).group(1)).split())


def ranked_by(page: str) -> str:
    return re.search(r'<select name="measure"[^>]*>.*?<option value="([^"]*)" selected>', page, re.S).group(1)


@pytest.fixture
def graded(people):
    """An answer round graded by two raters over three answer runs, and an answer evaluation of its set."""
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    round = make_graded_answer_round(people.project, people.lead, [people.rater, rosa], ANSWERS, references=REFERENCES, grades=GRADES)
    return round


# 36 answers to 12 questions, graded by one rater: right (2) when the answer holds the reference, else wrong (0).
# "verbose" is always right in many words, "terse" right on every other question, "wrong" never: acc (and coverem,
# tied) order them as the rater does; f1 and rouge reward the terse wrong answers' shared words.
FACTS = [("Paris", "Lyon"), ("Jupiter", "Saturn"), ("Marie Curie", "Pierre Curie"), ("blue whale", "blue shark"),
         ("Amazon river", "Nile river"), ("Mount Everest", "Mount Fuji"), ("Leonardo da Vinci", "Leonardo DiCaprio"),
         ("George Washington", "George Bush"), ("Pacific Ocean", "Atlantic Ocean"), ("Isaac Newton", "Isaac Asimov"),
         ("Albert Einstein", "Albert Camus"), ("South Africa", "South Korea")]
PROVEN_REFERENCES = {f"q{i:02d}": [right] for i, (right, _wrong) in enumerate(FACTS)}
PROVEN_ANSWERS = {
    "verbose": {f"q{i:02d}": f"After checking several sources I am fairly confident the answer is {right}" for i, (right, _) in enumerate(FACTS)},
    "terse": {f"q{i:02d}": wrong if i % 2 else right for i, (right, wrong) in enumerate(FACTS)},
    "wrong": {f"q{i:02d}": wrong for i, (_right, wrong) in enumerate(FACTS)}}
PROVEN_GRADES = {(run, q): [2 if PROVEN_REFERENCES[q][0] in answer else 0] for run, by in PROVEN_ANSWERS.items() for q, answer in by.items()}


@pytest.fixture
def proven(people):
    """An answer round whose report passes: 36 graded answers, acc's lead over every other metric proven."""
    return make_graded_answer_round(people.project, people.lead, [people.rater], PROVEN_ANSWERS, references=PROVEN_REFERENCES,
                                    grades=PROVEN_GRADES, name="Proven")


def proven_taus() -> dict[str, float]:
    """scipy's tau-b of each metric against the rater's grades over the 36 answers."""
    rows = [(PROVEN_ANSWERS[run][q], PROVEN_REFERENCES[q], grades[0]) for (run, q), grades in PROVEN_GRADES.items()]
    return {m: stats.kendalltau([score_answer(a, refs, [m])[m] for a, refs, _ in rows], [g for _, _, g in rows], variant="b").statistic
            for m in ANSWER_MEASURES}


def evaluate(round, measures=ANSWER_MEASURES):
    runs = list(round.pool.answer_runs.all())
    return run_answer_evaluation(create_answer_evaluation(round.pool.query_set, runs, measures=list(measures), queue=False, resamples=10))


def leaderboard(client, round, **params) -> str:
    return client.get(reverse("evaluation:answer-leaderboard", args=[round.project.slug]),
                      {"query_set": round.pool.query_set.uuid, **params}).content.decode()


def test_before_a_report_it_ranks_by_f1_and_says_why_naming_the_round_that_would_make_one(people, graded):
    evaluate(graded)
    page = leaderboard(people.client("viewer"), graded)
    assert ranked_by(page) == "f1"
    assert why(page).startswith("Ranked by f1, the default: no report yet says which metric agrees with your raters on this query set.")
    assert reverse("judgments:round-answer-metrics", args=[graded.project.slug, graded.uuid]) in page


def test_with_too_few_graded_answers_the_report_names_no_metric_and_it_keeps_f1_and_says_why(people, graded):
    evaluate(graded)
    client = people.client("viewer")
    report_page = client.get(reverse("judgments:round-answer-metrics", args=[graded.project.slug, graded.uuid])).content.decode()
    assert "keeps ranking by f1 by default" in report_page
    page = leaderboard(client, graded)
    _figures, rows = expected()
    assert ranked_by(page) == "f1"
    text = why(page)
    assert text.startswith("Ranked by f1, the default: the report of ")
    assert (f"names no metric yet: not enough evidence (acc agrees best so far): graded answers with reference answers: "
            f"{len(rows)} of the 30 needed") in text


def test_after_the_report_it_ranks_by_the_metric_that_agrees_best_and_links_both_ways(people, proven):
    graded = proven
    evaluation = evaluate(graded)
    client = people.client("viewer")
    report_url = reverse("judgments:round-answer-metrics", args=[graded.project.slug, graded.uuid])
    report_page = client.get(report_url).content.decode()
    figures = proven_taus()
    rows = PROVEN_GRADES
    best = max(ANSWER_MEASURES, key=lambda m: figures[m])  # scipy's tau-b; the first of equals, as the report
    kept = AnswerMetricsReport.objects.get(round=graded)
    assert kept.best == best
    board = reverse("evaluation:answer-leaderboard", args=[graded.project.slug])
    assert f'{board}?query_set={graded.pool.query_set.uuid}' in report_page
    page = leaderboard(client, graded)
    assert ranked_by(page) == best
    text = why(page)
    assert text.startswith(f"Ranked by {best}: the metric that agrees best with your raters")
    assert f"report of {kept.computed_at:%Y-%m-%d %H:%M} on “{graded.name}”, over {len(rows)} graded answers" in text
    assert report_url in page
    means = {row["run"]: row["mean"][best] for row in evaluation.results["runs"]}
    shown = re.findall(r"<tr><td>\d+</td><td>([^<]+)</td><td>[^<]*</td><td class=\"num\">([\d.]+)</td>", page)
    assert [name for name, _ in shown] == sorted(means, key=lambda name: -means[name])
    assert all(float(value) == pytest.approx(means[name], abs=5e-5) for name, value in shown)


def test_a_measure_the_lead_picks_wins_and_the_page_names_the_reports_metric_with_a_link(people, proven):
    graded = proven
    evaluate(graded)
    client = people.client("lead")
    client.get(reverse("judgments:round-answer-metrics", args=[graded.project.slug, graded.uuid]))
    best = AnswerMetricsReport.objects.get(round=graded).best
    other = next(m for m in ANSWER_MEASURES if m != best)
    page = leaderboard(client, graded, measure=other)
    assert ranked_by(page) == other
    assert why(page).startswith(f"Ranked by {other}, as chosen. The metric that agrees best with your raters is {best}")
    assert f"measure={best}" in page


def test_a_report_naming_a_metric_no_evaluation_scored_leaves_the_default_and_says_so(people, proven):
    graded = proven
    call_command("answer_metrics", str(graded.uuid), "--resamples", "10", stdout=io.StringIO())  # the command keeps its report too
    best = AnswerMetricsReport.objects.get(round=graded).best
    scored = [m for m in ANSWER_MEASURES if m != best and m != "acc"][:2] + (["f1"] if best != "f1" else [])
    evaluate(graded, measures=dict.fromkeys(scored))
    page = leaderboard(people.client("viewer"), graded)
    assert ranked_by(page) != best
    assert f"names {best}, which no answer evaluation of this query set scored" in why(page)


def test_a_report_that_ranks_no_metric_leaves_the_default_and_says_so(people):
    round = make_graded_answer_round(people.project, people.lead, [people.lead], {"a": {"q1": "Paris"}, "b": {"q1": "Lyon"}},
                                     references={"q1": ["Paris"]}, grades={("a", "q1"): [2], ("b", "q1"): [2]})  # one grade for all
    evaluate_runs = [people.project.answer_runs.get(name=name) for name in ("a", "b")]
    run_answer_evaluation(create_answer_evaluation(round.pool.query_set, evaluate_runs, queue=False, resamples=10))
    answer_metrics.keep(round, answer_metrics.compute(round, resamples=10))
    page = leaderboard(people.client("viewer"), round)
    assert ranked_by(page) == "f1" and "names no metric yet: not enough evidence" in why(page)
    assert "no metric's tau-b is defined" in html.unescape(why(page))


def test_a_set_with_no_answer_round_says_where_the_report_would_come_from(people):
    questions = make_graded_answer_round(people.project, people.lead, [people.lead], {"a": {"q1": "Paris"}},
                                         references={"q1": ["Paris"]}, grades={}).pool.query_set
    other = make_answer_run(people.project, {"q1": "Lyon"}, name="other")
    run_answer_evaluation(create_answer_evaluation(questions, [other], queue=False, resamples=10))
    questions.project.rounds.all().delete()
    page = people.client("viewer").get(reverse("evaluation:answer-leaderboard", args=[people.project.slug]),
                                       {"query_set": questions.uuid}).content.decode()
    assert "no report yet says which metric" in why(page) and "The report comes from an answer round over this set" in why(page)


def test_on_the_demo_the_leaderboard_ranks_by_acc_after_the_report_not_by_f1(db):
    call_command("load_demo")
    project = Project.objects.get(slug="acme-shop")
    client = Client()
    client.force_login(project.memberships.get(user__username="lead").user)
    round = project.rounds.get(name="Answer round 1")
    assert ranked_by(leaderboard(client, round)) == "f1"
    client.get(reverse("judgments:round-answer-metrics", args=[project.slug, round.uuid]))
    page = leaderboard(client, round)
    # acc and coverem tie at the top of the raters' report; f1 ranks the cheap assistant first, the raters the careful one.
    assert ranked_by(page) == "acc" and why(page).startswith("Ranked by acc: the metric that agrees best with your raters, tied with coverem")
    assert re.search(r"<tr><td>1</td><td>assistant-large</td>", page)


def test_runs_scored_on_different_queries_without_c_are_flagged_and_with_c_not(people, graded):
    # The three runs answer every query; a fourth skips q1, so without -c it is scored on one query fewer.
    runs = [people.project.answer_runs.get(name=name) for name in ANSWERS]
    skipping = make_answer_run(people.project, {q: a for q, a in ANSWERS["good"].items() if q != "q1"}, name="skips-q1")
    run_answer_evaluation(create_answer_evaluation(graded.pool.query_set, [*runs, skipping], queue=False, resamples=10))
    page = leaderboard(people.client("viewer"), graded)
    evaluation = people.project.answer_evaluations.get()
    scored = {row["run"]: row["queries"] for row in evaluation.results["runs"]}
    assert scored["skips-q1"] == scored["good"] - 1
    caveat = " ".join(re.search(r'<p class="message message-warning leaderboard-caveat">(.*?)</p>', page, re.S).group(1).split())
    assert caveat.startswith("The means cover different numbers of queries (") and f"skips-q1 {scored['skips-q1']}" in caveat
    run_answer_evaluation(create_answer_evaluation(graded.pool.query_set, [*runs, skipping], queue=False, resamples=10, all_queries=True))
    assert "leaderboard-caveat" not in leaderboard(people.client("viewer"), graded)


def test_a_passing_report_says_how_often_the_best_is_higher_leaving_out_the_metric_tied_with_it(people, proven):
    client = people.client("lead")
    page = client.get(reverse("judgments:round-answer-metrics", args=[proven.project.slug, proven.uuid])).content.decode()
    text = html.unescape(" ".join(re.sub(r"<[^>]+>", "", re.search(r'<p id="verdict-text">(.*?)</p>', page, re.S).group(1)).split()))
    assert "Verdict: <span class=\"verdict-pass\">pass</span>" in page
    assert text.startswith("acc and coverem agree best with the raters, tied: per-answer Kendall's tau-b 1.000")
    assert "acc is higher than each other metric in at least 100% of the resamples" in text
