"""Judgment-list versions: publishing, the immutable snapshot and its downloads, the difference from the
previous version, who may see them, and the publish_list command."""

import csv
import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Job, Judgment, JudgmentListVersion, Query
from judgments.ops import grading, versions
from judgments.ops.grading import Verdict
from tests.factory import make_round, run_queued_jobs

pytestmark = pytest.mark.django_db

PAIRS = {"q1": ["d11", "d12", "d13"], "q2": ["d21", "d22"], "q3": ["d31"]}


def grade_all(round, rater, grades: dict[tuple[str, str], int]) -> None:
    items = {(i.query.query_id, i.document.doc_id): i for i in round.items.select_related("query", "document", "round")}
    for key, grade in grades.items():
        grading.record(items[key], rater, Verdict(grade=grade))


FIRST = {("q1", "d11"): 3, ("q1", "d12"): 1, ("q1", "d13"): 0, ("q2", "d21"): 2, ("q2", "d22"): 2}


@pytest.fixture
def graded(people):
    round = make_round(people.project, people.lead, [people.rater], PAIRS)
    grade_all(round, people.rater, FIRST)
    return round


def publish_over_http(client, people, round, **data):
    client.force_login(people.lead)
    response = client.post(reverse("judgments:round-publish", args=[people.project.slug, round.uuid]), data)
    return response


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_lead_publishes_the_round_labels_as_v1_through_a_job(client, people, graded):
    response = publish_over_http(client, people, graded, note="First list", threshold="")
    job = Job.objects.get(kind="publish_list")
    assert response.status_code == 302 and response.url == job.get_absolute_url()
    [finished] = run_queued_jobs()
    assert finished.state == Job.State.SUCCEEDED, finished.error
    version = JudgmentListVersion.objects.get()
    assert (version.number, version.n_pairs, version.n_queries, version.note) == (1, 5, 2, "First list")
    assert version.grade_counts == {"0": 1, "1": 1, "2": 2, "3": 1}
    assert version.guidelines_number == graded.guidelines.number and version.consensus_rule == graded.consensus_rule
    with version.file.open("rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == version.sha256
    frame = versions.read(version)
    assert list(frame.columns) == ["query_id", "query", "doc_id", "grade", "source"]
    assert set(frame["source"]) == {"human"}
    page = client.get(version.get_absolute_url())
    assert page.status_code == 200 and version.sha256 in page.content.decode()
    assert "first version" in page.content.decode()


def test_publishing_a_round_without_labels_is_refused_with_a_reason(client, people):
    round = make_round(people.project, people.lead, [people.rater], PAIRS)
    response = publish_over_http(client, people, round)
    assert response.status_code == 302 and not Job.objects.filter(kind="publish_list").exists()
    assert "has no labels yet" in client.get(response.url).content.decode()
    with pytest.raises(CommandError, match="has no labels yet"):
        call_command("publish_list", str(round.uuid))


def test_a_version_is_immutable_and_its_exports_stay_byte_identical(client, people, graded):
    version = versions.publish(graded, user=people.lead)
    client.force_login(people.viewer)
    before = {fmt: body(client.get(reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, fmt])))
              for fmt in versions.VERSION_FORMATS}
    assert before["qrels"].decode().splitlines() == ["q1 0 d11 3", "q1 0 d12 1", "q1 0 d13 0", "q2 0 d21 2", "q2 0 d22 2"]
    # The round moves on: a grade changes, a new pair is graded, a query's text is edited.
    Judgment.objects.filter(item__document__doc_id="d11").update(grade=0)
    grade_all(graded, people.rater, {("q3", "d31"): 1})
    Query.objects.filter(query_id="q1").update(text="edited text")
    after = {fmt: body(client.get(reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, fmt])))
             for fmt in versions.VERSION_FORMATS}
    assert after == before and "query q1" in before["json"].decode()
    with pytest.raises(ValueError, match="never changed"):
        version.note = "edited"
        version.save()


def test_downloads_name_the_version_in_their_file_name(client, people, graded):
    version = versions.publish(graded, user=people.lead)
    client.force_login(people.lead)
    response = client.get(reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, "qrels"]))
    assert 'filename="round-1_qrels@v1.qrels"' in response["Content-Disposition"]
    binary = versions.publish(graded, threshold=2)
    assert versions.filename(binary, "qrels") == "round-1_qrels-binary-ge2@v2.qrels"
    assert "".join(versions.export(binary, "qrels")).splitlines()[:2] == ["q1 0 d11 1", "q1 0 d12 0"]
    assert client.get(reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, "xlsx"])).status_code == 404


def test_the_version_page_shows_pairs_added_removed_and_changed_per_query(client, people, graded):
    versions.publish(graded)
    Judgment.objects.filter(item__document__doc_id="d12").update(grade=3)  # changed 1 -> 3
    Judgment.objects.filter(item__document__doc_id="d22").delete()  # removed
    grade_all(graded, people.rater, {("q3", "d31"): 2})  # added
    second = versions.publish(graded, note="refresh")
    assert second.number == 2
    found = versions.difference(second)
    assert found["totals"] == {"added": 1, "removed": 1, "changed": 1}
    assert found["changes"].astype(object).where(found["changes"].notna(), None).values.tolist() == [
        ["q1", "d12", "changed", 1, 3], ["q2", "d22", "removed", 2, None], ["q3", "d31", "added", None, 2]]
    client.force_login(people.lead)
    page = client.get(second.get_absolute_url()).content.decode()
    assert "1 pair added, 1 removed" in page and "1 with another label" in page
    response = client.get(reverse("judgments:list-version-changes", args=[people.project.slug, second.uuid]))
    assert 'filename="round-1_labels-changes-from-v1@v2.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(body(response).decode())))
    assert rows == [["query_id", "query", "doc_id", "change", "old_grade", "new_grade"], ["q1", "query q1", "d12", "changed", "1", "3"],
                    ["q2", "query q2", "d22", "removed", "2", ""], ["q3", "query q3", "d31", "added", "", "2"]]


def test_the_changes_csv_never_starts_a_cell_with_a_formula(people):
    round = make_round(people.project, people.lead, [people.rater], {"=cmd": ["@d1"]})
    grade_all(round, people.rater, {("=cmd", "@d1"): 1})
    first = versions.publish(round)
    Judgment.objects.update(grade=2)
    second = versions.publish(round)
    text = "".join(versions.difference_csv(versions.difference(second)))
    assert "'=cmd" in text and "'@d1" in text and "\n=" not in text
    assert "'=cmd" in "".join(versions.export(first, "csv"))


def test_an_adjudicated_label_is_marked_as_such(people, graded):
    from judgments.models import Adjudication

    Adjudication.objects.create(item=graded.items.get(document__doc_id="d13"), grade=2, lead=people.lead)
    frame = versions.read(versions.publish(graded))
    assert frame.set_index("doc_id").loc["d13", ["grade", "source"]].tolist() == [2, "adjudicated"]


def test_raters_get_403_and_outsiders_404_on_versions(client, people, graded):
    version = versions.publish(graded)
    pages = [version.get_absolute_url(), reverse("judgments:list-version-download", args=[people.project.slug, version.uuid, "qrels"])]
    for page in pages:
        client.force_login(people.rater)
        assert client.get(page).status_code == 403
        client.force_login(people.outsider)
        assert client.get(page).status_code == 404
    client.force_login(people.viewer)
    assert client.post(reverse("judgments:round-publish", args=[people.project.slug, graded.uuid])).status_code == 403
    client.force_login(people.lead)
    assert client.get(reverse("judgments:round-publish", args=[people.project.slug, graded.uuid])).status_code == 405
    assert client.post(version.get_absolute_url()).status_code == 405
    assert client.get(reverse("judgments:list-version-changes", args=[people.project.slug, version.uuid])).status_code == 404


def test_the_round_and_export_pages_list_the_versions(client, people, graded):
    version = versions.publish(graded)
    client.force_login(people.lead)
    page = client.get(graded.get_absolute_url()).content.decode()
    assert version.get_absolute_url() in page and "Publish the current labels as v2" in page
    client.force_login(people.viewer)
    page = client.get(reverse("judgments:round-export", args=[people.project.slug, graded.uuid])).content.decode()
    assert "qrels@v1" in page and "Publish the current" not in page


def test_the_publish_list_command_publishes_the_next_version(people, graded):
    out = io.StringIO()
    call_command("publish_list", str(graded.uuid), "--note", "from cron", stdout=out)
    call_command("publish_list", graded.name, "--project", people.project.slug, stdout=out)
    assert "v1: 5 labelled pairs over 2 queries" in out.getvalue() and "v2" in out.getvalue()
    assert list(JudgmentListVersion.objects.order_by("number").values_list("number", "note")) == [(1, "from cron"), (2, "")]


@pytest.mark.parametrize("rule", ["majority", "median", "mean", "min_top3"])
def test_a_version_holds_the_labels_the_round_export_gives(people, rule):
    """The publish path computes labels on whole columns; the round's streamed export is the oracle."""
    from judgments.models import Adjudication, Round
    from judgments.ops import judgment_files
    from tests.factory import add_member, make_user, Role

    others = [make_user(name) for name in ("rosa", "rene")]
    for other in others:
        add_member(people.project, other, Role.RATER)
    raters = [people.rater, *others]
    round = make_round(people.project, people.lead, raters, {f"q{q}": [f"d{q}{d}" for d in range(8)] for q in range(5)},
                       raters_per_pair=3)
    Round.objects.filter(pk=round.pk).update(consensus_rule=rule)
    round.refresh_from_db()
    items = list(round.items.select_related("query", "document", "round").order_by("pk"))
    for n, item in enumerate(items):
        for r, rater in enumerate(raters[: 1 + n % 3]):  # one, two or three grades
            if n % 7 == 6 and r == 0:
                grading.record(item, rater, Verdict(unrateable="broken"))
            else:
                grading.record(item, rater, Verdict(grade=(n * (r + 2)) % 4))
    Adjudication.objects.create(item=items[4], grade=3, lead=people.lead)
    expected = sorted((f.query_id, f.query, f.doc_id, f.label, "adjudicated" if f.adjudicated else "human")
                      for f in judgment_files.final_labels(round))
    frame = versions.read(versions.publish(round))
    assert list(frame.itertuples(index=False, name=None)) == expected


def test_export_judgments_writes_a_version_byte_for_byte(people, graded, tmp_path):
    version = versions.publish(graded)
    Judgment.objects.update(grade=0)  # the round moves on; the version does not
    call_command("export_judgments", str(graded.uuid), "--version", "1", "--output", str(tmp_path), stderr=io.StringIO())
    written = (tmp_path / "round-1_qrels@v1.qrels").read_text()
    assert written == "".join(versions.export(version, "qrels")) and "q1 0 d11 3" in written
    with pytest.raises(CommandError, match="no published version v2"):
        call_command("export_judgments", str(graded.uuid), "--version", "2")
    with pytest.raises(CommandError, match="qrels, json or consensus-csv"):
        call_command("export_judgments", str(graded.uuid), "--version", "1", "--format", "ltr")
