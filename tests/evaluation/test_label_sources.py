"""Judge-filled evaluations are marked wherever their scores are shown: the leaderboard (which ranks the raters'
labels only unless the lead includes judge-filled ones, remembered in the query string), the overview's latest
evaluation, the evaluation list, the evaluation and comparison pages, the API, the CSV and JSON downloads; each
names the judge and the share of the labels it gave. An evaluation stored before the share was kept still renders."""

import csv
import html
import io
import json
import re

import pandas as pd
import pytest
from django.urls import reverse

from evaluation.models import Evaluation
from evaluation.provenance import LabelSource
from judgments.models import Judgment, RoundItem
from tests.api.conftest import token_for
from tests.evaluation.test_judge_fill import evaluate, partly_graded  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def page_text(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def plain(text: str) -> str:
    """The page's words without tags, spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


@pytest.fixture
def evaluated(partly_graded):  # noqa: F811
    """The run `reverse` evaluated on the raters' labels (q1 and q2), then both runs with the judge filling q3.
    The oracle for the share: the round's pairs without any human grade over all its pairs, counted here."""
    round, judge = partly_graded
    runs = {run.name: run for run in round.pool.runs.all()}
    from evaluation.evaluations import create_evaluation, run_evaluation

    human = run_evaluation(create_evaluation(round, [runs["reverse"]], measures=["nDCG@10", "P@1"], queue=False, resamples=100))
    filled = evaluate(round, judge)
    graded = set(Judgment.objects.filter(item__round=round, grade__isnull=False).values_list("item", flat=True))
    pairs = RoundItem.objects.filter(round=round).count()
    ungraded = pairs - len(graded)
    assert (ungraded, pairs) == (4, 12)
    return round, human, filled, ungraded, pairs


def mean(evaluation, run: str, measure: str = "nDCG@10") -> float:
    return next(row for row in evaluation.results["runs"] if row["run"] == run)["mean"][measure]


def test_the_leaderboard_ranks_the_raters_labels_only_unless_the_lead_includes_judge_filled_ones(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    url = reverse("evaluation:leaderboard", args=[round.project.slug]) + f"?round={round.uuid}&measure=nDCG@10"
    page = page_text(people.client("viewer"), url)
    words = plain(page)
    assert "Ranked on the raters' labels only : evaluations whose unjudged pairs an automatic judge filled are left out." in words
    assert "1 run scored only by judge-filled evaluations is not listed (Round 1 pool run)." in words
    assert '<option value="raters" selected>Raters\' labels only</option>' in page
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]+?)[ <]", page)
    assert rows == [("1", "reverse")]
    table = page.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert str(human.uuid) in table and str(filled.uuid) not in table  # the row is the raters' evaluation
    assert "robot-badge" not in page.split('<table class="leaderboard">')[1]  # no judge-filled row

    link = re.search(r'<a href="(\?[^"]*labels=all[^"]*)">Include judge-filled evaluations</a>', page).group(1)
    page = page_text(people.client("viewer"), reverse("evaluation:leaderboard", args=[round.project.slug]) + link.replace("&amp;", "&"))
    words = plain(page)
    assert '<option value="all" selected>Include judge-filled evaluations</option>' in page
    assert "Ranked on raters' labels and judge-filled evaluations" in words
    table = page.split('<table class="leaderboard">')[1]
    assert table.count('class="label-source judge-filled"') == 2
    assert sorted(re.findall(r"<td>\d+</td><td>([^<]+)<small class=\"label-source-line\">", table)) == ["Round 1 pool run", "reverse"]
    share = f"{ungraded / pairs:.0%}"
    assert plain(table).count(f"judge-filled: {share} of labels from overlap") == 2
    table = table.split("</table>")[0]
    assert str(filled.uuid) in table and str(human.uuid) not in table  # each row is the newer, judge-filled evaluation
    assert "4 labelled by the judge @10" in plain(table)  # q3's four documents sit in each run's top 10
    assert "with labels (the raters' or the automatic judge's): 3" in plain(page)
    # The choice is kept when the round or measure changes: the form sends it along.
    assert re.search(r'<select name="labels" id="leaderboard-labels" data-submit-on-change>', page)
    assert people.client("viewer").get(url + "&labels=judge").status_code == 400


def test_the_overview_marks_a_judge_filled_latest_evaluation_and_lists_the_raters_leaderboard(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    page = page_text(people.client("viewer"), f"/p/{round.project.slug}/")
    box = plain(page.split('id="evaluation-title"')[1].split("</article>")[0])
    assert f"judge-filled: {ungraded / pairs:.0%} of labels ({ungraded} of {pairs}) from overlap" in box
    assert "on the raters' labels only (1 run evaluated on them in this round)" in box
    assert f"reverse dense {mean(human, 'reverse'):.4f} over 2 queries" in box
    assert "Scored only by judge-filled evaluations, so not ranked here: Round 1 pool run" in box
    assert 'robot-badge' in page.split('id="evaluation-title"')[1].split("</article>")[0]


def test_the_evaluation_list_the_evaluation_page_and_the_comparison_mark_the_judge_filled_one(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    client = people.client("viewer")
    listing = page_text(client, reverse("evaluation:evaluations", args=[round.project.slug]))
    cells = [plain(row) for row in listing.split("<tbody>")[1].split("</tr>")[:2]]
    # Newest first: the judge-filled one, then the raters' one.
    assert f"judge-filled: {ungraded / pairs:.0%} of labels from overlap" in cells[0] and "robot-badge" in listing
    assert "raters only" in cells[1]
    page = plain(page_text(client, filled.get_absolute_url()))
    assert f"judge-filled: {ungraded / pairs:.0%} of labels ({ungraded} of {pairs}) from overlap : these scores rest partly" in page
    assert "raters' labels only" in plain(page_text(client, human.get_absolute_url()))
    compare = plain(page_text(client, reverse("evaluation:comparison", args=[round.project.slug, filled.uuid])))
    assert f"Labels: judge-filled: {ungraded / pairs:.0%} of labels ({ungraded} of {pairs}) from overlap ." in compare


def test_an_evaluation_stored_without_the_share_still_renders(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    results = dict(filled.results)
    results["fill"] = {key: value for key, value in results["fill"].items() if key != "share"}  # as stored before the share
    Evaluation.objects.filter(pk=filled.pk).update(results=results)
    client = people.client("viewer")
    assert f"{ungraded / pairs:.0%} of labels ({ungraded} of {pairs}) from overlap" in plain(page_text(client, filled.get_absolute_url()))
    del results["fill"]  # an evaluation whose job stored no count: the judge is still named, the share said to be unknown
    Evaluation.objects.filter(pk=filled.pk).update(results=results)
    page = plain(page_text(client, reverse("evaluation:evaluations", args=[round.project.slug])))
    assert "judge-filled by overlap (share not recorded)" in page
    leaderboard = reverse("evaluation:leaderboard", args=[round.project.slug]) + f"?round={round.uuid}&measure=nDCG@10&labels=all"
    assert "judge-filled by overlap (share not recorded)" in plain(page_text(client, leaderboard))
    assert "judge-filled by overlap (share not recorded)" in plain(page_text(client, f"/p/{round.project.slug}/"))


def test_the_share_never_rounds_to_none_or_all():
    assert LabelSource("j", 1, 1000).text == "judge-filled: under 1% of labels (1 of 1,000) from j"
    assert LabelSource("j", 999, 1000).percent == "over 99%"
    assert LabelSource("j", 3527, 4202).short == "judge-filled: 84% of labels from j"
    assert LabelSource(None, None, 40).text == "raters' labels only"
    assert LabelSource("j", None, None, scored=False).text == "judge-filled by j (share counted when scored)"


def download(client, evaluation, what: str, fmt: str):
    response = client.get(reverse("evaluation:download", args=[evaluation.project.slug, evaluation.uuid, what, fmt]))
    assert response.status_code == 200
    name = re.search(r'filename="([^"]+)"', response["Content-Disposition"]).group(1)
    return name, response.content.decode()


def test_every_download_says_where_the_labels_came_from_and_guards_the_judge_s_name(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    Evaluation.objects.filter(pk=filled.pk).update(results={**filled.results, "fill": {**filled.results["fill"], "judge": "=HYPERLINK(1)"}})
    filled.refresh_from_db()
    client = people.client("viewer")
    share = ungraded / pairs
    for what, fmt in (("aggregate", "csv"), ("per-query", "csv"), ("breakdown", "csv"), ("comparison", "csv")):
        name, body = download(client, filled, what, fmt)
        assert name.endswith(f"_judge-filled-hyperlink1_{what}.csv"), name
        rows = list(csv.DictReader(io.StringIO(body)))
        assert rows and {row["labels_source"] for row in rows} == {"judge_filled"}
        assert {row["judge"] for row in rows} == {"'=HYPERLINK(1)"}  # the formula guard
        assert [float(row["judge_label_share"]) for row in rows] == pytest.approx([share] * len(rows))
        assert not any(cell[:1] and cell[:1] in "=+@" for row in csv.reader(io.StringIO(body)) for cell in row), what
    name, body = download(client, filled, "aggregate", "json")
    data = json.loads(body)
    assert (data["labels_source"], data["judge"], data["judge_labels"], data["labels"]) == ("judge_filled", "=HYPERLINK(1)", ungraded, pairs)
    assert data["judge_label_share"] == pytest.approx(share)
    _, body = download(client, filled, "per-query", "json")
    rows = json.loads(body)
    assert {row["labels_source"] for row in rows} == {"judge_filled"} and [row["judge_label_share"] for row in rows] == pytest.approx([share] * len(rows))
    _, body = download(client, filled, "comparison", "json")
    assert json.loads(body)["labels_source"] == "judge_filled"
    name, _ = download(client, filled, "trec-reverse", "txt")
    assert "_judge-filled-hyperlink1_" in name  # trec_eval's own format has no room for a field: the name says it
    name, body = download(client, human, "aggregate", "csv")
    assert "judge" not in name.split("_evaluation-")[1]
    assert {(row["labels_source"], row["judge"], row["judge_label_share"]) for row in csv.DictReader(io.StringIO(body))} == {("human", "", "0.0")}


def test_the_tiers_segments_and_unjudged_shares_csv_is_one_long_table(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    from evaluation.evaluations import create_evaluation, run_evaluation

    round.pool.query_set.queries.filter(query_id__in=["q1", "q2"]).update(tier="head", segment="en")
    round.pool.query_set.queries.filter(query_id="q3").update(tier="tail", segment="de")
    evaluation = run_evaluation(create_evaluation(round, list(round.pool.runs.order_by("name")), measures=["nDCG@10", "P@1"],
                                                  queue=False, resamples=100))
    client = people.client("viewer")
    _, body = download(client, evaluation, "breakdown", "csv")
    table = pd.read_csv(io.StringIO(body))
    assert list(table.columns) == ["run", "group", "group_value", "queries", "measure", "value", "queries_over_20_percent",
                                   "labels_source", "judge", "judge_label_share"]
    assert set(table["group"]) == {"all", "tier", "segment"}
    assert table["value"].dtype.kind == "f" and table["queries"].dtype.kind == "i"
    # The oracle: the per-query download, grouped by pandas.
    _, per_query = download(client, evaluation, "per-query", "csv")
    values = pd.read_csv(io.StringIO(per_query)).set_index("query_id")
    tiers = dict(round.pool.query_set.queries.values_list("query_id", "tier"))
    for run in ("Round 1 pool run", "reverse"):
        for measure in ("nDCG@10", "P@1", "UnjudgedShare@10", "UnjudgedShare"):
            column = values[f"{run} {measure}"]
            expected = column.groupby(column.index.map(tiers)).mean()
            got = table[(table["run"] == run) & (table["group"] == "tier") & (table["measure"] == measure)].set_index("group_value")["value"]
            assert got.to_dict() == pytest.approx(expected.to_dict()), (run, measure)
            overall = table[(table["run"] == run) & (table["group"] == "all") & (table["measure"] == measure)]
            assert overall["value"].item() == pytest.approx(column.mean())
    over = table[(table["group"] == "all") & table["measure"].str.startswith("UnjudgedShare")]
    assert over["queries_over_20_percent"].notna().all() and table.loc[table["group"] != "all", "queries_over_20_percent"].isna().all()


def test_the_api_says_where_each_evaluation_s_labels_came_from(evaluated, people):
    round, human, filled, ungraded, pairs = evaluated
    from django.test import Client

    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_for(people.lead, people.project)}"
    base = f"/api/v1/projects/{round.project.slug}/evaluations"
    listed = {item["uuid"]: item for item in client.get(base).json()["items"]}
    assert (listed[str(human.uuid)]["labels_source"], listed[str(human.uuid)]["judge"], listed[str(human.uuid)]["judge_label_share"]) == (
        "human", None, 0.0)
    one = client.get(f"{base}/{filled.uuid}").json()
    assert (one["labels_source"], one["judge"], one["judge_labels"], one["labels"]) == ("judge_filled", "overlap", ungraded, pairs)
    assert one["judge_label_share"] == pytest.approx(ungraded / pairs)
    assert listed[str(filled.uuid)]["judge_label_share"] == pytest.approx(ungraded / pairs)
    compared = client.get(f"{base}/{filled.uuid}/comparison").json()
    assert compared["labels_source"] == "judge_filled" and compared["judge"] == "overlap"
    per_query = client.get(f"{base}/{filled.uuid}/per-query").json()
    assert per_query["labels_source"] == "judge_filled" and per_query["items"]


def test_the_evaluate_and_compare_commands_say_where_the_labels_came_from(partly_graded, tmp_path):  # noqa: F811
    from django.core.management import call_command

    round, judge = partly_graded
    out = io.StringIO()
    call_command("evaluate", str(round.uuid), "--runs", "reverse", "--measures", "P@1", "--fill-judge", "overlap",
                 "--json", str(tmp_path / "evaluate.json"), stdout=out)
    assert "Labels: judge-filled: 33% of labels (4 of 12) from overlap" in out.getvalue()
    assert json.loads((tmp_path / "evaluate.json").read_text())["labels_source"] == "judge_filled"
    out = io.StringIO()
    call_command("compare", str(round.uuid), "--runs", "reverse", "Round 1 pool run", "--measures", "P@1", "--resamples", "100",
                 "--json", str(tmp_path / "compare.json"), stdout=out)
    assert "Labels: raters' labels only" in out.getvalue()
    written = json.loads((tmp_path / "compare.json").read_text())
    assert (written["labels_source"], written["judge"], written["judge_label_share"]) == ("human", None, 0.0)
