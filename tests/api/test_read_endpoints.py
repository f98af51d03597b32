"""What the read endpoints return, checked against what the test put in (not against the code's own output)."""

import io
import json

import pyarrow.parquet as pq
import pytest

from .conftest import GRADES

# The round's consensus rule is majority vote, a tie going to the lower grade: (2, 1) is 1.
EXPECTED_LABELS = {("q1", "d11"): 3, ("q1", "d12"): 1, ("q1", "d13"): 0, ("q1", "d14"): 1}
HOSTILE = ["x", "-1", "0", "501", "1e9", "99999999999999999999", "", "\x00", "a" * 3000, "Zürich ☃", "<script>", "%00"]


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_round_s_qrels_are_the_final_labels(world):
    response = world.client("viewer").get(world.path("/api/v1/projects/{slug}/rounds/{round}/judgments.qrels"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert ".qrels" in response["Content-Disposition"]
    lines = [line.split() for line in body(response).decode().splitlines()]
    assert {(q, d): int(g) for q, zero, d, g in lines} == EXPECTED_LABELS and all(zero == "0" for _, zero, _, _ in lines)


def test_the_round_s_json_and_csv_hold_the_same_labels(world):
    client = world.client("lead")
    listed = json.loads(body(client.get(world.path("/api/v1/projects/{slug}/rounds/{round}/judgments.json"))))
    from_json = {(query["query_id"], doc["doc_id"]): doc["rating"] for query in listed for doc in query["ratings"]}
    assert from_json == EXPECTED_LABELS
    rows = body(client.get(world.path("/api/v1/projects/{slug}/rounds/{round}/judgments.csv"))).decode().splitlines()
    header = rows[0].split(",")
    cells = [dict(zip(header, row.split(","))) for row in rows[1:]]
    assert {(cell["query_id"], cell["doc_id"]): int(cell["label"]) for cell in cells} == EXPECTED_LABELS


def test_a_version_s_labels_are_those_published(world):
    client = world.client("viewer")
    qrels = body(client.get(world.path("/api/v1/projects/{slug}/versions/{version}/labels.qrels"))).decode()
    assert {(q, d): int(g) for q, _, d, g in (line.split() for line in qrels.splitlines())} == EXPECTED_LABELS
    rows = body(client.get(world.path("/api/v1/projects/{slug}/versions/{version}/labels.csv"))).decode().splitlines()
    assert rows[0] == "query_id,query,doc_id,grade,source" and len(rows) == 1 + len(EXPECTED_LABELS)


def test_a_run_downloads_as_the_stored_parquet(world, people):
    response = world.client("viewer").get(world.path("/api/v1/projects/{slug}/runs/{run}/download"))
    assert response.status_code == 200 and response.streaming
    table = pq.read_table(io.BytesIO(body(response)))
    run = people.project.runs.get(uuid=world.objects["run"])
    assert table.num_rows == run.n_rows == 12
    with run.file.open("rb") as stored:
        assert pq.read_table(stored).equals(table)


def test_the_query_set_downloads_as_csv(world):
    rows = body(world.client("viewer").get(world.path("/api/v1/projects/{slug}/query-sets/{query_set}/queries.csv"))).decode().splitlines()
    assert rows[0].startswith("query_id,query") and [row.split(",")[0] for row in rows[1:]] == ["q1", "q2", "q3"]


def test_the_project_counts_what_it_holds(world):
    project = world.client("rater").get(world.path("/api/v1/projects/{slug}")).json()
    # Three queries of round 1, one of the lead's round; 12 + 2 documents; a run per round; two rounds.
    assert project["counts"] == {"queries": 4, "documents": 14, "runs": 2, "rounds": 2}
    assert project["role"] == "rater" and project["scale"]["kind"] == "graded"


def test_runs_are_listed_and_filtered_by_name(world):
    client = world.client("viewer")
    listed = client.get(world.path("/api/v1/projects/{slug}/runs")).json()["items"]
    assert sorted(run["name"] for run in listed) == ["Lead's own round pool run", "Round 1 pool run"]
    named = client.get(world.path("/api/v1/projects/{slug}/runs?name=Round 1 pool run")).json()["items"]
    assert [run["uuid"] for run in named] == [str(world.objects["run"])]
    assert named[0]["n_lines"] == 12 and named[0]["url"].endswith(f"/runs/{world.objects['run']}")
    assert client.get(named[0]["url"]).json() == named[0]


def test_lists_page_with_next_links(world):
    client = world.client("lead")
    first = client.get(world.path("/api/v1/projects/{slug}/rounds?limit=1")).json()
    assert len(first["items"]) == 1 and first["next"]
    second = client.get(first["next"]).json()
    assert len(second["items"]) == 1 and second["next"] is None
    assert {first["items"][0]["name"], second["items"][0]["name"]} == {"Round 1", "Lead's own round"}


@pytest.mark.parametrize("query", ["limit=501", "limit=0", "offset=-1", "limit=x", "round=not-a-uuid"])
def test_a_bad_list_parameter_is_a_400_naming_it(world, query):
    path = "/versions" if query.startswith("round") else "/rounds"
    response = world.client("lead").get(world.path("/api/v1/projects/{slug}" + path + "?" + query))
    assert response.status_code == 400
    assert response.json()["code"] == "bad_request" and query.split("=")[0] in response.json()["detail"]


def test_a_rater_sees_only_the_rounds_they_grade_and_their_own_progress(world, people):
    client = world.client("rater")
    listed = client.get(world.path("/api/v1/projects/{slug}/rounds")).json()["items"]
    assert [round["name"] for round in listed] == ["Round 1"]
    assert client.get(world.path("/api/v1/projects/{slug}/rounds/{other_round}")).status_code == 404
    detail = client.get(world.path("/api/v1/projects/{slug}/rounds/{round}")).json()
    assert [row["rater"] for row in detail["raters"]] == [people.rater.username]
    assert detail["raters"][0]["graded"] == len(GRADES)


def test_a_lead_sees_every_round_and_every_rater_s_progress(world, people):
    detail = world.client("lead").get(world.path("/api/v1/projects/{slug}/rounds/{round}")).json()
    assert sorted(row["rater"] for row in detail["raters"]) == sorted([people.lead.username, people.rater.username])
    # 12 pairs, each needing two judgments; both raters graded the four pairs of q1.
    assert (detail["n_pairs"], detail["judged_pairs"], detail["judgments_done"], detail["judgments_needed"]) == (12, 4, 8, 24)
    assert detail["progress"] == pytest.approx(8 / 24)


def test_the_pool_report_names_each_run_s_contribution(world):
    pool = world.client("viewer").get(world.path("/api/v1/projects/{slug}/pools/{pool}")).json()
    assert pool["n_pairs"] == 12 and pool["state"] == "ready" and pool["runs"] == [str(world.objects["run"])]
    assert pool["report"]["total_pairs"] == 12 and pool["report"]["unique_by_system"] == {"Round 1 pool run": 12}


def test_the_agreement_summary_is_the_stored_report_s(world, people):
    summary = world.client("viewer").get(world.path("/api/v1/projects/{slug}/rounds/{round}/agreement")).json()
    stored = people.project.rounds.get(uuid=world.objects["round"]).agreement_report.data["summary"]
    assert (summary["n_items"], summary["n_judgments"], summary["raters"]) == (4, 8, 2)
    assert summary["statistics"]["percent_agreement"]["value"] == pytest.approx(0.75)  # three pairs of four agree
    assert summary["statistics"]["alpha_ordinal"]["value"] == stored["statistics"]["alpha_ordinal"]["value"]


def test_a_round_without_agreement_report_is_404_no_report(world):
    response = world.client("lead").get(world.path("/api/v1/projects/{slug}/rounds/{other_round}/agreement"))
    assert response.status_code == 404 and response.json()["code"] == "no_report"


def test_versions_filter_by_round(world):
    client = world.client("viewer")
    assert [v["uuid"] for v in client.get(world.path("/api/v1/projects/{slug}/versions?round={round}")).json()["items"]] == [str(world.objects["version"])]
    assert client.get(world.path("/api/v1/projects/{slug}/versions?round={other_round}")).json()["items"] == []


def test_no_hostile_parameter_or_path_answers_500(world):
    client = world.client("lead")
    failures = []
    for value in HOSTILE:
        for path in ["/rounds?limit={v}&offset={v}&name={v}", "/runs?name={v}&limit=2", "/versions?round={v}", "/answer-runs?name={v}",
                     "/rounds/{v}", "/runs/{v}/download", "/versions/{v}/labels.qrels", "/rounds/{round}/judgments.{v}",
                     "/versions/{version}/labels.{v}", "/pools/{v}", "/query-sets/{v}/queries.csv"]:
            url = world.path("/api/v1/projects/{slug}" + path.replace("{v}", "{{v}}")).replace("{v}", value)
            response = client.get(url)
            body(response)
            if response.status_code >= 500 or not response["Content-Type"].startswith(("application/json", "text/")):
                failures.append(f"{url[:120]} -> {response.status_code}")
    assert not failures, "\n".join(failures)
