"""Answer rounds: made over a pool of answers, graded over HTTP on the answer scale and (optionally) the
faithfulness scale, with agreement, consensus and exports naming the answer run."""

import csv
import io
import json
import re

import pytest
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from judgments.lib.scales import SUPPORTED
from judgments.models import AgreementReport, Judgment, Round
from judgments.ops import grading, rounds
from judgments.ops.actions import ActionRefused
from judgments.ops.grading import Verdict
from tests.factory import Role, add_member, make_answer_round, make_round, make_user, run_queued_jobs

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rosa(people):
    rosa = make_user("rosa")
    add_member(people.project, rosa, Role.RATER)
    return rosa


def url(name: str, round: Round, *extra) -> str:
    return reverse(f"judgments:{name}", args=[round.project.slug, round.uuid, *extra])


def shown_item(response) -> str:
    return re.search(r'id="grader" class="grader" data-item="([^"]*)"', response.content.decode()).group(1)


# -- making one


def test_the_round_form_makes_an_answer_round_with_both_scales(people):
    round = make_answer_round(people.project, people.lead, [people.rater], open=False, name="Seed")
    guidelines = people.project.guideline_versions.first()
    form = {"name": "Answers", "pool": round.pool.uuid, "guidelines": guidelines.number, "scale": "answers",
            "faithfulness": "supported", "raters": ["ravi"], "raters_per_pair": 1, "overlap_percent": 0, "order": "grouped"}
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form)
    assert response.status_code == 302, response.content.decode()[:3000]
    made = Round.objects.get(name="Answers")
    assert [g["label"] for g in made.scale["grades"]] == ["Wrong", "Partly right", "Right"]
    assert made.faithfulness_grading_scale == SUPPORTED


def test_the_round_form_offers_the_answer_scale_first_when_the_newest_pool_holds_answers(people):
    make_answer_round(people.project, people.lead, [people.rater], open=False)
    page = people.client("lead").get(reverse("judgments:round-create", args=[people.project.slug])).content.decode()
    assert re.search(r'<input[^>]*name="scale" value="answers"[^>]*checked', page)
    assert "Faithfulness to the cited documents" in page


def test_a_custom_faithfulness_scale_is_checked(people):
    round = make_answer_round(people.project, people.lead, [people.rater], open=False, name="Seed")
    form = {"name": "Answers", "pool": round.pool.uuid, "guidelines": 1, "scale": "answers", "faithfulness": "custom",
            "custom_faithfulness": "0 | No\n0 | Also no", "raters": ["ravi"], "raters_per_pair": 1, "overlap_percent": 0, "order": "grouped"}
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form)
    assert response.status_code == 200 and "Two grades have the same value." in response.content.decode()
    form["custom_faithfulness"] = "0 | Unsupported\n1 | Supported | Every claim is cited"
    assert people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form).status_code == 302
    assert Round.objects.get(name="Answers").faithfulness_grading_scale.values == [0, 1]


def test_a_document_round_refuses_a_faithfulness_scale(people):
    document_round = make_round(people.project, people.lead, [people.rater], open=False)
    form = {"name": "Docs", "pool": document_round.pool.uuid, "guidelines": 1, "scale": "graded", "faithfulness": "supported",
            "raters": ["ravi"], "raters_per_pair": 1, "overlap_percent": 0, "order": "grouped"}
    response = people.client("lead").post(reverse("judgments:round-create", args=[people.project.slug]), form)
    assert response.status_code == 200 and "Only a round over a pool of answers grades faithfulness" in response.content.decode()
    with pytest.raises(ActionRefused, match="pool of answers"):
        rounds.create_round(people.project, name="X", pool=document_round.pool, guidelines=document_round.guidelines,
                            scale=document_round.grading_scale, faithfulness_scale=SUPPORTED)


def test_the_faithfulness_scale_is_fixed_once_the_round_has_judgments(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    rounds.update_round(round, faithfulness_scale=None)  # no judgments yet: it may go
    round.refresh_from_db()
    assert round.faithfulness_scale is None
    round = rounds.update_round(round, faithfulness_scale=SUPPORTED)
    item = round.items.first()
    grading.record(item, people.rater, Verdict(grade=2, faithfulness=1))
    with pytest.raises(ActionRefused, match="faithfulness scale cannot change"):
        rounds.update_round(round, faithfulness_scale=None)


def test_a_pair_per_answer_is_served_and_answers_are_all_in_the_round(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    assert round.items.count() == 4  # rag-a answers q1-q3, rag-b q1
    assert all(item.document.answer_run_id for item in round.items.select_related("document"))


# -- grading


def test_the_screen_shows_the_query_the_answer_and_its_cited_documents_never_the_system(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    seen = set()
    for _ in range(4):
        response = client.get(url("grade", round))
        page = response.content.decode()
        item = round.items.select_related("document", "query").get(uuid=shown_item(response))
        seen.add(item.document.fields["answer"])
        assert item.query.text in page and f"need of {item.query.query_id}" in page
        assert item.document.fields["answer"] in page
        for doc_id in item.document.fields["cites"]:
            if doc_id == "nowhere":
                assert "Not in the corpus" in page
            else:
                assert f"Title of {doc_id}" in page and f"Text of {doc_id}" in page
        assert "rag-a" not in page and "rag-b" not in page and "RAG" not in page and "Answers round pool" not in page  # blind
        for label in ("Wrong", "Partly right", "Right", "Not supported", "Partly supported", "Fully supported"):
            assert label in page
        assert "Second digit" in page and "Backspace" in page  # the keys help
        client.post(url("grade-item", round, item.uuid), {"grade": "2", "faithfulness": "1"})
    assert len(seen) == 4


def test_a_grade_with_faithfulness_is_saved_and_the_next_answer_comes(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    first = shown_item(client.get(url("grade", round)))
    response = client.post(url("grade-item", round, first), {"grade": "1", "faithfulness": "2", "note": "half right"}, **HTMX)
    assert response.status_code == 200 and "<html" not in response.content.decode()
    assert shown_item(response) not in ("", first)
    judgment = Judgment.objects.get(item__uuid=first)
    assert (judgment.grade, judgment.faithfulness, judgment.note) == (1, 2, "half right")


def test_the_server_refuses_a_grade_without_faithfulness_and_keeps_the_pair(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    first = shown_item(client.get(url("grade", round)))
    response = client.post(url("grade-item", round, first), {"grade": "2", "note": "keep me"}, **HTMX)
    page = response.content.decode()
    assert "Give the faithfulness grade too" in page and shown_item(response) == first and "keep me" in page
    assert not Judgment.objects.exists()
    response = client.post(url("grade-item", round, first), {"grade": "2", "faithfulness": "7"})
    assert "7 is not a grade of this round&#x27;s faithfulness scale" in response.content.decode()
    assert not Judgment.objects.exists()


def test_a_round_without_faithfulness_grades_with_one_digit_and_refuses_a_faithfulness_grade(people):
    round = make_answer_round(people.project, people.lead, [people.rater], faithfulness=False)
    client = people.client("rater")
    response = client.get(url("grade", round))
    page = response.content.decode()
    assert "data-two-step" not in page and 'data-grade="2"' in page and "Not supported" not in page
    first = shown_item(response)
    refused = client.post(url("grade-item", round, first), {"grade": "2", "faithfulness": "1"})
    assert "This round grades no faithfulness" in refused.content.decode() and not Judgment.objects.exists()
    client.post(url("grade-item", round, first), {"grade": "0"})
    assert Judgment.objects.get().grade == 0 and Judgment.objects.get().faithfulness is None


def test_unrateable_and_later_work_in_answer_rounds(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    first = shown_item(client.get(url("grade", round)))
    client.post(url("grade-item", round, first), {"later": "1"})
    second = shown_item(client.get(url("grade", round)))
    assert second != first
    client.post(url("grade-item", round, second), {"unrateable": "broken"})
    judgment = Judgment.objects.get(item__uuid=second)
    assert judgment.grade is None and judgment.faithfulness is None and judgment.unrateable == "broken"
    refused = client.post(url("grade-item", round, first), {"unrateable": "broken", "faithfulness": "1"})
    assert "An unrateable pair takes no faithfulness grade" in refused.content.decode()


def test_a_rater_changes_both_grades_as_today(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    first = shown_item(client.get(url("grade", round)))
    client.post(url("grade-item", round, first), {"grade": "0", "faithfulness": "0"})
    page = client.get(url("grade-item", round, first)).content.decode()
    assert "You judged this pair" in page and "0 Wrong, faithfulness 0 Not supported" in page
    assert re.search(r'name="grade" value="0"[^>]*checked', page) and re.search(r'name="faithfulness" value="0"[^>]*checked', page)
    client.post(url("grade-item", round, first), {"grade": "2", "faithfulness": "1"})
    judgment = Judgment.objects.get()
    assert (judgment.grade, judgment.faithfulness) == (2, 1)
    assert judgment.item.judgments.count() == 1
    client.post(url("grade-item", round, first), {"grade": "2", "faithfulness": "2"})  # faithfulness alone
    from judgments.models import JudgmentEdit
    edits = list(JudgmentEdit.objects.filter(item__uuid=first).values_list("old_grade", "new_grade", "old_faithfulness", "new_faithfulness"))
    assert edits == [(0, 2, 0, 1), (2, 2, 1, 2)]
    history = people.client("lead").get(url("round-query", round, judgment.item.query.query_id)).content.decode()
    assert "faithfulness 0 → 1" in history and "faithfulness 1 → 2" in history


def test_the_bulk_page_shows_every_answer_of_a_query_and_saves_both_grades(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    client = people.client("rater")
    page = client.get(url("grade-bulk", round, "q1")).content.decode()
    assert "Answer 1 by A" in page and "Answer 1 by B" in page and "rag-a" not in page and "rag-b" not in page
    assert "Save both grades" in page and "Not in the corpus" in page
    item = round.items.filter(query__query_id="q1").first()
    response = client.post(url("grade-item", round, item.uuid), {"bulk": "1", "grade": "1", "faithfulness": "2"}, **HTMX)
    assert "Saved: 1 Partly right, faithfulness 2 Fully supported" in response.content.decode()
    response = client.post(url("grade-item", round, item.uuid), {"bulk": "1", "grade": "1"}, **HTMX)
    assert "Give the faithfulness grade too" in response.content.decode()
    assert Judgment.objects.get().faithfulness == 2


def test_outsiders_get_404_and_viewers_cannot_grade(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    item = round.items.first()
    assert people.client("outsider").get(url("grade", round)).status_code == 404
    assert people.client("outsider").post(url("grade-item", round, item.uuid), {"grade": "1", "faithfulness": "1"}).status_code == 404
    assert people.client("viewer").post(url("grade-item", round, item.uuid), {"grade": "1", "faithfulness": "1"}).status_code in (403, 404)
    assert not Judgment.objects.exists()


# -- agreement, consensus, exports


def graded(people, rosa) -> Round:
    """Every answer graded by two raters: the same correctness but one, faithfulness apart on two."""
    round = make_answer_round(people.project, people.lead, [people.rater, rosa], raters_per_pair=2)
    items = list(round.items.select_related("query", "document").order_by("pk"))
    for n, item in enumerate(items):
        grading.record(item, people.rater, Verdict(grade=n % 3, faithfulness=(n + 1) % 3))
        grading.record(item, rosa, Verdict(grade=n % 3 if n else 2, faithfulness=(n + 1) % 3 if n < 2 else 0))
    return round


def test_the_agreement_report_has_a_faithfulness_section_equal_to_sklearn(people, rosa):
    round = graded(people, rosa)
    client = people.client("lead")
    client.post(url("round-agreement-compute", round))
    [job] = run_queued_jobs()
    assert job.state == "succeeded", job.error
    data = AgreementReport.objects.get(round=round).data
    ravi = dict(Judgment.objects.filter(rater=people.rater).values_list("item_id", "faithfulness"))
    theirs = dict(Judgment.objects.filter(rater=rosa).values_list("item_id", "faithfulness"))
    a, b = zip(*[(ravi[item], theirs[item]) for item in sorted(ravi)])
    assert data["faithfulness"]["summary"]["n_items"] == 4
    assert data["faithfulness"]["pairs"][0]["kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2]))
    ravi_g = dict(Judgment.objects.filter(rater=people.rater).values_list("item_id", "grade"))
    rosa_g = dict(Judgment.objects.filter(rater=rosa).values_list("item_id", "grade"))
    a, b = zip(*[(ravi_g[item], rosa_g[item]) for item in sorted(ravi_g)])
    assert data["pairs"][0]["kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2]))  # the main scale, unchanged
    page = client.get(url("round-agreement", round)).content.decode()
    assert "Faithfulness agreement" in page and "0 Not supported, 1 Partly supported, 2 Fully supported" in page
    assert "Cohen&#x27;s kappa (quadratic weights), mean over rater pairs" in page.split("Faithfulness agreement")[1]
    rows = list(csv.reader(io.StringIO(client.get(url("round-agreement-download", round, "csv")).content.decode())))
    faithful = {row[1]: row for row in rows if row[0] == "faithfulness statistic"}
    assert float(faithful["mean_pairwise_kappa"][2]) == pytest.approx(data["faithfulness"]["summary"]["statistics"]["mean_pairwise_kappa"]["value"], abs=1e-3)
    assert json.loads(client.get(url("round-agreement-download", round, "json")).content)["faithfulness"]["summary"]["n_items"] == 4


def test_the_agreement_report_of_a_round_without_faithfulness_has_no_such_section(people, rosa):
    round = make_answer_round(people.project, people.lead, [people.rater, rosa], raters_per_pair=2, faithfulness=False)
    for item in round.items.all():
        grading.record(item, people.rater, Verdict(grade=1))
        grading.record(item, rosa, Verdict(grade=1))
    people.client("lead").post(url("round-agreement-compute", round))
    run_queued_jobs()
    assert AgreementReport.objects.get(round=round).data["faithfulness"] is None
    assert "Faithfulness agreement" not in people.client("lead").get(url("round-agreement", round)).content.decode()


def download(client, round, fmt, **options) -> str:
    response = client.get(url("round-export", round), {"format": fmt, **options})
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


def test_exports_carry_the_answer_documents_ids_and_name_the_answer_run_and_query(people, rosa):
    round = graded(people, rosa)
    client = people.client("viewer")
    answers = {item.document.doc_id: (item.query.query_id, item.document.answer_run.name)
               for item in round.items.select_related("document__answer_run", "query")}
    qrels = download(client, round, "qrels")
    assert {tuple(line.split()[::2]) for line in qrels.splitlines()} <= {(q, d) for d, (q, _run) in answers.items()} | set()
    assert {line.split()[2] for line in qrels.splitlines()} == set(answers)
    assert "rag" not in qrels
    listed = json.loads(download(client, round, "json"))
    ratings = {r["doc_id"]: (query["query_id"], query["query"], r["answer_run"]) for query in listed for r in query["ratings"]}
    assert {doc: (q, run) for doc, (q, _text, run) in ratings.items()} == answers
    assert all(text.startswith("question ") for _q, text, _run in ratings.values())
    rows = list(csv.DictReader(io.StringIO(download(client, round, "long-csv"))))
    assert len(rows) == 8 and {row["answer_run"] for row in rows} == {run for _q, run in answers.values()}
    for row in rows:
        judgment = Judgment.objects.get(item__document__doc_id=row["doc_id"], rater__username=row["rater"])
        assert int(row["faithfulness"]) == judgment.faithfulness and answers[row["doc_id"]][0] == row["query_id"]
        assert row["query"].startswith("question ")
    consensus = list(csv.DictReader(io.StringIO(download(client, round, "consensus-csv"))))
    assert {row["doc_id"] for row in consensus} == set(answers)


def test_the_long_csv_of_a_document_round_keeps_its_columns(people):
    round = make_round(people.project, people.lead, [people.rater])
    header = download(people.client("lead"), round, "long-csv").splitlines()[0]
    assert header == "query_id,query,doc_id,rater,grade,unrateable,unrateable_note,note,seconds,created_at,updated_at,source"


def test_consensus_and_adjudication_work_on_the_answer_scale(people, rosa):
    round = graded(people, rosa)
    round.adjudication_margin = 1
    round.save()
    client = people.client("lead")
    page = client.get(url("round-adjudication", round)).content.decode()
    assert page.count(' id="pair-') == 1  # the first answer: 0 against 2
    item = round.items.order_by("pk").first()
    client.post(url("round-adjudicate", round, item.uuid), {"grade": "1", "note": "partly"})
    assert f"{item.query.query_id} 0 {item.document.doc_id} 1\n" in download(client, round, "qrels")


def test_the_leads_pages_show_answers_blind_with_their_cited_documents(people, rosa):
    round = graded(people, rosa)
    round.adjudication_margin = 1
    round.save()
    client = people.client("lead")
    disputed = round.items.select_related("document").order_by("pk").first().document
    adjudication = client.get(url("round-adjudication", round)).content.decode()
    assert disputed.fields["answer"] in adjudication and f"Title of {disputed.fields['cites'][0]}" in adjudication
    query = client.get(url("round-query", round, "q1")).content.decode()
    assert "Answer 1 by A" in query and "Answer 1 by B" in query and "Title of d1" in query
    for page in (adjudication, query):
        assert "rag-a" not in page and "rag-b" not in page and "/documents/answer-" not in page


def test_the_leads_query_page_shows_each_raters_faithfulness_beside_the_answer_grade(people, rosa):
    round = graded(people, rosa)
    answers, faithfulness = {0: "Wrong", 1: "Partly right", 2: "Right"}, {0: "Not supported", 1: "Partly supported", 2: "Fully supported"}
    client = people.client("lead")
    for item in round.items.select_related("query"):
        page = client.get(url("round-query", round, item.query.query_id)).content.decode()
        article = page.split(f'id="pair-{item.uuid}"')[1].split('class="pair-judgments"')[0]
        for judgment in item.judgments.select_related("rater"):
            shown = re.sub(r"<[^>]+>", "", re.search(rf"<strong>{judgment.rater.username}</strong>:(.*?)<small", article, re.S).group(1))
            assert " ".join(shown.split()) == (f"{judgment.grade} {answers[judgment.grade]}, "
                                                f"faithfulness {judgment.faithfulness} {faithfulness[judgment.faithfulness]}")
        assert "Best rank" not in article  # an answer has no rank
    assert Judgment.objects.filter(item__round=round).values("faithfulness").distinct().count() == 3  # every grade was shown
    # Raters never see other raters' grades: the page is the lead's and viewers'.
    assert people.client("rater").get(url("round-query", round, "q1")).status_code in (403, 404)


def test_the_leads_query_page_of_an_answer_round_without_faithfulness_shows_the_grade_alone(people):
    round = make_answer_round(people.project, people.lead, [people.rater], faithfulness=False)
    item = round.items.select_related("query").first()
    grading.record(item, people.rater, Verdict(grade=2))
    page = people.client("lead").get(url("round-query", round, item.query.query_id)).content.decode()
    assert "2 Right" in page and "faithfulness" not in page.lower().replace("faithfulness-change", "")


def test_the_round_page_names_both_scales(people):
    round = make_answer_round(people.project, people.lead, [people.rater])
    page = people.client("lead").get(round.get_absolute_url()).content.decode()
    assert "answers scale (0 Wrong, 1 Partly right, 2 Right)" in page
    assert "faithfulness scale (0 Not supported, 1 Partly supported, 2 Fully supported)" in page


def test_run_evaluations_do_not_offer_answer_rounds(people):
    from evaluation.forms import EvaluationForm
    answers = make_answer_round(people.project, people.lead, [people.rater])
    documents = make_round(people.project, people.lead, [people.rater])
    offered = set(EvaluationForm(project=people.project).fields["round"].queryset)
    assert documents in offered and answers not in offered


def test_the_run_leaderboard_does_not_list_answer_rounds(people):
    answers = make_answer_round(people.project, people.lead, [people.rater])
    documents = make_round(people.project, people.lead, [people.rater])
    page = people.client("lead").get(reverse("evaluation:leaderboard", args=[people.project.slug])).content.decode()
    assert documents.name in page and answers.name not in page


def test_an_exported_json_list_of_answers_imports_into_another_round_over_the_pool(people, rosa):
    from judgments.ops import judgment_files
    round = graded(people, rosa)
    data = download(people.client("lead"), round, "json").encode()
    copy = rounds.create_round(people.project, name="Copy", pool=round.pool, guidelines=round.guidelines, scale=round.grading_scale,
                               raters=[people.rater], overlap_share=0, user=people.lead)
    rounds.open_round(copy)
    result = judgment_files.import_judgments(copy, data, "answers.json", rater="ravi")
    assert result.summary and Judgment.objects.filter(item__round=copy).count() == 4
