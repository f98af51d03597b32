"""The "which answer metric agrees with the raters" report of an answer round: its page, downloads, command
and refusals. Figures are checked against scipy.stats over the engine's metric values and the labels the
raters gave (the lead's adjudication where there is one)."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from scipy import stats

from evaluation.engine.answers import ANSWER_MEASURES, score_answer
from judgments.models import Adjudication, Judgment, MachineGrade, RoundJudge
from judgments.ops import answer_metrics
from tests.factory import Role, add_member, make_graded_answer_round, make_round, make_user

pytestmark = pytest.mark.django_db

REFERENCES = {"q1": ["Paris"], "q2": ["1969"], "q3": ["Jupiter", "the planet Jupiter"], "q4": ["Marie Curie"],
              "q5": ["blue whale"], "q6": ["Amazon river"], "q7": []}
ANSWERS = {
    "good": {"q1": "Paris is the capital of France", "q2": "In 1969", "q3": "Jupiter", "q4": "Marie Curie did",
             "q5": "The blue whale", "q6": "The Amazon river", "q7": "Whatever"},
    "fair": {"q1": "Maybe Lyon, maybe Paris", "q2": "Around 1970", "q3": "Saturn or Jupiter", "q4": "Pierre Curie",
             "q5": "A whale", "q6": "The Nile, or the Amazon", "q7": "Whatever"},
    "=poor": {"q1": "London", "q2": "Never", "q3": "Mars", "q4": "Einstein", "q5": "An elephant", "q6": "The Thames",
              "q7": "Whatever"},
}
# Both raters agree everywhere but on ("fair", "q2"), which the lead adjudicates to 1; ("=poor", "q6") is never graded.
GRADES = {("good", q): [2, 2] for q in REFERENCES} | {("fair", q): [1, 1] for q in REFERENCES} | {("=poor", q): [0, 0] for q in REFERENCES}
GRADES |= {("good", "q4"): [1, 1], ("fair", "q1"): [2, 2], ("fair", "q2"): [0, 2], ("=poor", "q6"): [None, None]}


@pytest.fixture
def round(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    round = make_graded_answer_round(people.project, people.lead, [people.rater, rosa], ANSWERS, references=REFERENCES, grades=GRADES)
    item = round.items.get(document__answer_run__name="fair", query__query_id="q2")
    Adjudication.objects.create(item=item, grade=1, lead=people.lead)
    return round


def url(name: str, round, *extra) -> str:
    return reverse(f"judgments:{name}", args=[round.project.slug, round.uuid, *extra])


def expected() -> tuple[dict, list[tuple]]:
    """Per metric (tau, rho) from scipy over the counted answers, and the counted (run, query, label) rows."""
    labels = {key: grades[0] for key, grades in GRADES.items() if grades[0] is not None} | {("fair", "q2"): 1}
    rows = [(run, q, labels[(run, q)]) for run in ANSWERS for q in ANSWERS[run] if REFERENCES[q] and (run, q) in labels]
    found = {}
    for metric in ANSWER_MEASURES:
        values = [score_answer(ANSWERS[run][q], REFERENCES[q], [metric])[metric] for run, q, _ in rows]
        grades = [label for _, _, label in rows]
        found[metric] = (stats.kendalltau(values, grades).statistic, stats.spearmanr(values, grades).statistic)
    return found, rows


def test_the_json_download_has_scipys_tau_b_and_rho_for_every_metric_over_the_labelled_answers_with_references(people, round):
    data = json.loads(people.client("lead").get(url("round-answer-metrics-download", round, "json")).content)
    figures, rows = expected()
    assert data["n_answers"] == len(rows) == 17 and data["n_queries"] == 6 and data["n_systems"] == 3
    assert (data["n_in_round"], data["left_out"], data["no_consensus"], data["no_references"]) == (21, 4, 1, 3)
    for metric, (tau, rho) in figures.items():
        assert data["per_answer"][metric]["tau"]["value"] == pytest.approx(tau)
        assert data["per_answer"][metric]["rho"]["value"] == pytest.approx(rho)
        low, high = data["per_answer"][metric]["tau"]["low"], data["per_answer"][metric]["tau"]["high"]
        assert low <= tau + 1e-12 and tau - 1e-12 <= high
    assert data["verdict"]["best"] == max(figures, key=lambda m: figures[m][0])
    # 17 graded answers, under the 30 a verdict needs: the report says which agrees best so far, and names none.
    assert data["verdict"]["decision"]["state"] == "insufficient"
    assert data["verdict_text"].startswith(f"Not enough evidence to name a metric. {data['verdict']['best']} and coverem agree best so far")
    assert "Graded answers with reference answers: 17 of the 30 needed" in data["verdict_text"]


def test_the_system_level_compares_the_runs_over_the_queries_all_of_them_answered(people, round):
    data = json.loads(people.client("viewer").get(url("round-answer-metrics-download", round, "json")).content)
    system = data["system_level"]
    assert system["n_systems"] == 3 and system["n_queries"] == 5 and system["enough_systems"]  # q6 lacks =poor's label
    means = {row["system"]: row for row in system["systems"]}
    assert means["good"]["human"] == pytest.approx((2 * 4 + 1) / 5)
    assert means["fair"]["human"] == pytest.approx((2 + 1 + 1 + 1 + 1) / 5)
    assert means["=poor"]["human"] == 0
    names = sorted(means)
    for metric in ANSWER_MEASURES:
        tau = stats.kendalltau([means[n]["metrics"][metric] for n in names], [means[n]["human"] for n in names]).statistic
        got = system["correlations"][metric]["tau"]["value"]
        assert (got is None and tau != tau) or got == pytest.approx(tau)


def test_the_page_shows_the_verdict_what_it_covers_and_both_tables(people, round):
    page = people.client("lead").get(url("round-answer-metrics", round)).content.decode()
    data = answer_metrics.compute(round, resamples=10)
    assert "Verdict: <span class=\"verdict-insufficient\">not enough evidence</span>" in page and data["verdict"]["best"] in page
    assert "keeps ranking by f1 by default" in page
    assert "Over 17 answers to 6 queries from 3 answer runs" in page
    assert "4 are left out: 1 without a human label" in page and "3 whose query has no reference answers" in page
    for metric in ANSWER_MEASURES:
        assert f"<th scope=\"row\">{metric}" in page
    assert "=poor" in page and "Kendall's tau-b" in page and "Spearman's rho" in page
    assert "the page scores up to 2,000 answers" in page


def test_it_is_linked_from_the_round_page_and_from_reports(people, round):
    client = people.client("viewer")
    target = url("round-answer-metrics", round)
    assert target in client.get(url("round", round)).content.decode()
    assert target in client.get(reverse("judgments:reports")).content.decode()


def test_a_document_round_has_no_such_report_and_its_round_page_no_link(people):
    documents = make_round(people.project, people.lead, [people.rater], name="Documents")
    client = people.client("lead")
    assert client.get(url("round-answer-metrics", documents)).status_code == 404
    assert client.get(url("round-answer-metrics-download", documents, "json")).status_code == 404
    assert "answer-metrics" not in client.get(url("round", documents)).content.decode()


def test_two_runs_get_their_means_and_a_note_that_the_system_level_needs_three(people):
    two = {run: ANSWERS[run] for run in ("good", "=poor")}
    round = make_graded_answer_round(people.project, people.lead, [people.lead], two, references=REFERENCES,
                                     grades={key: grades[:1] for key, grades in GRADES.items() if key[0] in two})
    page = people.client("lead").get(url("round-answer-metrics", round)).content.decode()
    assert "The system-level correlation needs at least 3 answer runs" in page and "this round has 2" in page
    assert "<th scope=\"row\">good</th>" in page


def test_raters_get_403_and_outsiders_404(people, round):
    for name, extra in (("round-answer-metrics", ()), ("round-answer-metrics-download", ("csv",))):
        assert people.client("rater").get(url(name, round, *extra)).status_code == 403
        assert people.client("outsider").get(url(name, round, *extra)).status_code == 404
    assert people.client("lead").post(url("round-answer-metrics", round)).status_code == 405
    assert people.client("lead").get(url("round-answer-metrics-download", round, "xlsx")).status_code == 404


def test_the_csv_download_holds_both_tables_and_no_cell_starts_a_formula(people, round):
    response = people.client("viewer").get(url("round-answer-metrics-download", round, "csv"))
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["level", "metric", "statistic", "value", "low", "high", "n", "n_queries"]
    assert {row[0] for row in rows[1:]} == {"answer", "system", "system mean"}
    assert len([row for row in rows if row[0] == "answer"]) == 2 * len(ANSWER_MEASURES)
    assert all(not cell.startswith("=") for row in rows for cell in row)
    assert any(row[2] == "'=poor" for row in rows)


def test_the_page_gathers_the_data_in_the_same_few_queries_whatever_the_number_of_answers(people, round):
    small = make_graded_answer_round(people.project, people.lead, [people.lead],
                                     {"small-good": {"q1": "Paris"}, "small-fair": {"q1": "Lyon"}},
                                     references=REFERENCES, grades={("small-good", "q1"): [2], ("small-fair", "q1"): [0]}, name="Small")
    client = people.client("lead")
    client.get(url("round-answer-metrics", small))  # the session's first use writes it
    counts = []
    for answered in (small, round):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url("round-answer-metrics", answered)).status_code == 200
        # The project's nav may come from the cache: count the queries that read the round's answers and grades.
        counts.append(sum("judgments_document" in q["sql"] or "judgments_judgment" in q["sql"] for q in queries.captured_queries))
        assert len(queries) <= 10
    assert counts == [2, 2]


def test_a_round_beyond_the_pages_bound_names_the_command(people, round, monkeypatch):
    monkeypatch.setattr(answer_metrics, "ANSWERS_ON_PAGE", 5)
    page = people.client("lead").get(url("round-answer-metrics", round)).content.decode()
    assert "17 answers to score; the page computes up to 5" in page and f"manage.py answer_metrics {round.uuid}" in page
    response = people.client("lead").get(url("round-answer-metrics-download", round, "json"), follow=True)
    assert response.redirect_chain[0][0] == url("round-answer-metrics", round)


def test_unrateable_flags_and_machine_grades_are_not_human_labels(people, round):
    item = round.items.get(document__answer_run__name="=poor", query__query_id="q6")
    Judgment.objects.create(item=item, rater=people.rater, unrateable="other", unrateable_note="cannot tell")
    judge = RoundJudge.objects.create(round=round, name="overlap", kind="token_overlap", account=make_user("judge-bot"))
    MachineGrade.objects.create(item=item, judge=judge, outcome="judged", grade=2)
    data = answer_metrics.compute(round, resamples=10)
    assert data["no_consensus"] == 1 and data["n_answers"] == 17


def test_the_command_prints_the_table_and_the_verdict_and_writes_json(people, round, tmp_path):
    out = io.StringIO()
    call_command("answer_metrics", str(round.uuid), "--json", str(tmp_path / "report.json"), "--resamples", "50",
                 stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    data = json.loads((tmp_path / "report.json").read_text())
    assert "agree best so far" in text and "17 of the 30 needed" in text and "17 answers, 6 queries, 3 systems; left out 4 of 21" in text
    figures, _ = expected()
    assert data["per_answer"]["f1"]["tau"]["value"] == pytest.approx(figures["f1"][0]) and data["resamples"] == 50
    documents = make_round(people.project, people.lead, [people.rater], name="Documents")
    with pytest.raises(CommandError, match="grades documents, not answers"):
        call_command("answer_metrics", str(documents.uuid), stdout=io.StringIO())


def test_a_metric_that_gives_every_answer_one_value_reads_undefined_with_the_reason(people):
    round = make_graded_answer_round(people.project, people.lead, [people.lead],
                                     {"yes": {"q1": "no idea", "q2": "none"}, "no": {"q1": "nothing", "q2": "nope"}},
                                     references={"q1": ["Paris"], "q2": ["1969"]},
                                     grades={("yes", "q1"): [2], ("yes", "q2"): [1], ("no", "q1"): [0], ("no", "q2"): [0]})
    page = people.client("lead").get(url("round-answer-metrics", round)).content.decode()
    assert "undefined: the metric gives every answer the same value" in page
    assert "Not enough evidence to name a metric" in page
