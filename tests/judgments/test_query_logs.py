"""Query logs in the app: upload, map columns, import as a job, preview a tiered sample, save it as a query set,
download it; the same from the commands; and who may do what."""

import csv
import hashlib
import io
import re

import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Job, QueryCollection, QueryLog
from tests.factory import run_queued_jobs, upload

pytestmark = pytest.mark.django_db


def log_csv() -> bytes:
    """40 queries: query i (0-based) searched 40 - i times, spread over days in October 2026, in English
    or German; three spellings of one query, a personal-data query and one bad row."""
    lines = ["timestamp,query,lang,device"]
    for i in range(40):
        for n in range(40 - i):
            lines.append(f"2026-10-{1 + n % 28:02d}T12:00:00Z,query {i:02d},{'de' if i % 5 == 0 else 'en'},mobile")
    lines += ["2026-10-02T08:00:00Z,  Query   00?,en,desktop", "2026-10-03T08:00:00Z,ＱＵＥＲＹ 00,en,desktop",
              "2026-10-04T08:00:00Z,mail me at jane.doe@example.com,en,desktop", "not-a-time,query 01,en,desktop"]
    return ("\n".join(lines) + "\n").encode()


def upload_and_map(client, project, content=None, filename="searches.csv", **mapping):
    response = client.post(reverse("judgments:query-log-upload", args=[project.slug]), {"file": upload(filename, content or log_csv())})
    assert response.status_code == 302, response.content.decode()[:2000]
    map_url = response["Location"]
    page = client.get(map_url).content.decode()
    form = {"name": "October", "query_column": "query", "time_column": "timestamp", "count_column": "",
            "segment_columns": ["lang"], "nfkc": "on", "casefold": "on", "collapse_whitespace": "on",
            "trim_punctuation": "on", "drop_personal": "on", "max_bad_percent": "5", **mapping}
    return page, client.post(map_url, form)


def imported_log(people, **mapping) -> QueryLog:
    _page, response = upload_and_map(people.client("lead"), people.project, **mapping)
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return QueryLog.objects.get(project=people.project)


SETTINGS = {"preview": "1", "window_days": "90", "boundaries": "rank", "head_until": "5", "torso_until": "20",
            "head": "3", "torso": "5", "tail": "4", "head_method": "traffic", "torso_method": "uniform",
            "tail_method": "uniform", "seed": "11", "exclude_earlier": "on"}


def test_a_lead_maps_the_columns_and_the_import_job_keeps_only_the_counts(people):
    client = people.client("lead")
    page, response = upload_and_map(client, people.project)
    assert "timestamp" in page and "lang" in page and "query 00" in page  # the first rows, to map by
    job = Job.objects.get(kind="import_query_log")
    assert response["Location"] == job.get_absolute_url()
    [finished] = run_queued_jobs()
    assert finished.state == Job.State.SUCCEEDED, finished.error
    log = QueryLog.objects.get(project=people.project, name="October")
    assert log.rows_read == 820 + 4 and log.rows_bad == 1 and log.rows_personal == 1
    assert log.n_queries == 40 and log.impressions == 820 + 2
    assert not default_storage.exists(job.params["upload"])  # the log file itself is gone
    page = client.get(log.get_absolute_url()).content.decode()
    assert "unparseable timestamp" in page  # the bad row, with its line
    assert "ＱＵＥＲＹ 00" in page and "Query   00?" in page  # the spellings normalisation merged


def test_the_mapping_page_ticks_the_guessed_segment_columns(people):
    page, _response = upload_and_map(people.client("lead"), people.project)
    ticked = re.findall(r'<input type="checkbox" name="segment_columns" value="([^"]+)"[^>]*checked', page)
    assert ticked == ["lang", "device"]


def test_uploading_the_same_log_again_warns_naming_the_earlier_log(people):
    client = people.client("lead")
    first = imported_log(people)
    assert first.sha256 == hashlib.sha256(log_csv()).hexdigest()
    response = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]), {"file": upload("again.csv", log_csv())},
                           follow=True)
    assert "This file is byte for byte the log “October”" in response.content.decode()
    _page, mapped = upload_and_map(client, people.project, name="October again")
    [job] = run_queued_jobs()
    assert job.result["warnings"] == [f"This file is byte for byte the log “October”, imported {first.created_at:%Y-%m-%d}: "
                                      "importing it again makes a second log with the same searches."]
    second = QueryLog.objects.get(name="October again")
    assert "The same file as the log" in client.get(second.get_absolute_url()).content.decode()
    other = client.post(reverse("judgments:query-log-upload", args=[people.project.slug]),
                        {"file": upload("other.csv", log_csv() + b"2026-10-05T08:00:00Z,tent,en,mobile\n")}, follow=True)
    assert "byte for byte" not in other.content.decode()


def test_the_preview_shows_tiers_the_traffic_curve_and_the_sample_and_saving_keeps_it(people):
    log = imported_log(people)
    client = people.client("lead")
    page = client.get(log.get_absolute_url(), SETTINGS).content.decode()
    assert "Sample with seed 11" in page and "<svg" in page and "head | torso" in page
    response = client.post(reverse("judgments:query-log-sample", args=[people.project.slug, log.uuid]),
                           {**SETTINGS, "name": "October sample"})
    collection = QueryCollection.objects.get(name="October sample")
    assert response["Location"] == collection.get_absolute_url()
    assert collection.source == QueryCollection.Source.SAMPLE and collection.parameters["seed"] == 11
    tiers = sorted(collection.queries.values_list("tier", flat=True))
    assert tiers == ["head"] * 3 + ["tail"] * 4 + ["torso"] * 5
    # Head drawn proportionally to traffic: each weighs the head's traffic (spellings merged) over 3.
    head_traffic = (40 + 2) + 39 + 38 + 37 + 36
    assert [q.weight for q in collection.queries.filter(tier="head")] == [pytest.approx(head_traffic / 3)] * 3
    for query in collection.queries.filter(tier="torso"):  # uniform: 5 of the 15 torso queries, weight = traffic x 15 / 5
        assert query.weight == pytest.approx(query.extra["traffic"] * 3)
    for query in collection.queries.all():  # each keeps its raw log rows, at most 20
        assert len(query.extra["log_rows"]) == min(query.extra["traffic"], 20)
        assert all(row["raw"].strip() and row["line"] > 1 for row in query.extra["log_rows"])

    page = client.get(collection.get_absolute_url()).content.decode()
    assert "Sampled from the query log" in page and "seed 11" in page
    download = client.get(reverse("judgments:query-set-csv", args=[people.project.slug, collection.uuid]))
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert len(rows) == 12 and {row["tier"] for row in rows} == {"head", "torso", "tail"}
    assert all(float(row["weight"]) > 0 and int(row["traffic"]) > 0 for row in rows)


def test_a_tail_the_boundaries_leave_empty_is_warned_about_in_the_preview_and_the_command(people, capsys):
    log = imported_log(people)
    page = people.client("lead").get(log.get_absolute_url(), {**SETTINGS, "torso_until": "5000"}).content.decode()
    warning = "The tail quota asks for 4 queries but 0 were drawn: no query falls in the tail with these tier boundaries."
    assert page.count(warning) == 2  # at the form and above the result
    assert re.search(r'state-failed">0 of 4</td>', page)
    saved = people.client("lead").post(reverse("judgments:query-log-sample", args=[people.project.slug, log.uuid]),
                                       {**SETTINGS, "torso_until": "5000", "name": "Short tail"}, follow=True)
    assert "Saved 8 sampled queries" in saved.content.decode() and warning in saved.content.decode()
    call_command("sample_queries", people.project.slug, "--head", "3", "--torso", "5", "--tail", "4", "--seed", "1",
                 "--boundaries", "rank:5,5000", "--dry-run")
    assert f"Warning: {warning}" in capsys.readouterr().out


def test_the_same_seed_draws_the_same_sample_and_earlier_queries_can_be_left_out(people):
    log = imported_log(people)
    client = people.client("lead")
    save = reverse("judgments:query-log-sample", args=[people.project.slug, log.uuid])
    client.post(save, {**SETTINGS, "exclude_earlier": "", "name": "A"})
    client.post(save, {**SETTINGS, "exclude_earlier": "", "name": "B"})
    client.post(save, {**SETTINGS, "name": "Refresh"})
    ids = {name: set(QueryCollection.objects.get(name=name).queries.values_list("query_id", flat=True)) for name in ("A", "B", "Refresh")}
    assert ids["A"] == ids["B"] and len(ids["A"]) == 12
    assert not ids["Refresh"] & ids["A"] and ids["Refresh"]


def test_a_sample_stratified_by_a_segment_gives_each_value_its_own_quota(people):
    log = imported_log(people)
    response = people.client("lead").post(reverse("judgments:query-log-sample", args=[people.project.slug, log.uuid]),
                                          {**SETTINGS, "stratify_by": "lang", "name": "By language"})
    assert response.status_code == 302
    collection = QueryCollection.objects.get(name="By language")
    segments = set(collection.queries.values_list("segment", flat=True))
    assert segments == {"en", "de"}
    # 8 German queries, tiered on their own: 5 head (3 drawn), 3 torso (all 3: fewer than the quota).
    assert collection.queries.filter(segment="de", tier="head").count() == 3
    assert collection.queries.filter(segment="de", tier="torso").count() == 3
    assert collection.queries.filter(segment="en").count() == 3 + 5 + 4


def test_a_bad_log_fails_the_job_naming_the_file_and_line_and_stores_nothing(people):
    bad = b"timestamp,query\n" + b"".join(b"2026-10-01,q\n" for _ in range(5)) + b"yesterday,q\nsoon,q\n"
    upload_and_map(people.client("lead"), people.project, content=bad, filename="bad.csv", segment_columns=[], max_bad_percent="1")
    [job] = run_queued_jobs()
    assert job.state == Job.State.FAILED
    assert "bad.csv" in job.error and "line 7" in job.error
    assert not QueryLog.objects.exists()


def test_an_empty_or_unreadable_file_is_refused_before_any_job(people):
    client = people.client("lead")
    url = reverse("judgments:query-log-upload", args=[people.project.slug])
    assert "The submitted file is empty" in client.post(url, {"file": upload("empty.csv", b"")}).content.decode()
    response = client.post(url, {"file": upload("junk.parquet", b"\x00\x01garbage\xff" * 200)})
    page = client.get(response["Location"], follow=True).content.decode()
    assert "junk.parquet" in page and "Import a query log" in page
    assert not Job.objects.exists()
    stash = f"uploads/{people.project.slug}"
    assert not any(default_storage.listdir(f"{stash}/{folder}")[1] for folder in default_storage.listdir(stash)[0])


def test_the_commands_import_a_log_and_print_the_tier_table(people, tmp_path, capsys):
    path = tmp_path / "searches.csv.gz"
    import gzip

    path.write_bytes(gzip.compress(log_csv()))
    call_command("import_query_log", people.project.slug, str(path), "--time-column", "timestamp", "--segment-column", "lang",
                 "--max-bad-share", "0.05")
    out = capsys.readouterr().out
    assert "824 rows read, 1 bad, 1 dropped as personal data" in out and "40 queries" in out
    call_command("sample_queries", people.project.slug, "--head", "3", "--torso", "5", "--tail", "4", "--seed", "5",
                 "--boundaries", "rank:5,20", "--name", "Cmd", "--csv", str(tmp_path / "sample.csv"))
    out = capsys.readouterr().out
    assert re.search(r"head\s+5\s+192\s+0\.234\s+0\s+3\s+traffic", out), out
    assert "Saved 12 queries as query set 'Cmd' (seed 5)" in out
    assert len((tmp_path / "sample.csv").read_text().splitlines()) == 13


def test_the_commands_report_bad_input(people, tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(b"when,what\n2026-01-01,x\n")
    with pytest.raises(CommandError, match="log.csv.*query"):
        call_command("import_query_log", people.project.slug, str(path))
    with pytest.raises(CommandError, match="has no query log"):
        call_command("sample_queries", people.project.slug)
    call_command("import_query_log", people.project.slug, str(path), "--query-column", "what", "--time-column", "when")
    with pytest.raises(CommandError, match="rank"):
        call_command("sample_queries", people.project.slug, "--boundaries", "rank:500,100")


def test_outsiders_get_404_and_members_without_the_right_403(people):
    log = imported_log(people)
    slug = people.project.slug
    reads = [reverse("judgments:query-logs", args=[slug]), log.get_absolute_url()]
    writes = [reverse("judgments:query-log-upload", args=[slug]), reverse("judgments:query-log-sample", args=[slug, log.uuid]),
              reverse("judgments:query-log-delete", args=[slug, log.uuid])]
    for url in reads:
        assert people.client("outsider").get(url).status_code == 404
    for url in writes:
        assert people.client("outsider").post(url, {**SETTINGS, "name": "x"}).status_code == 404
    for url in reads:
        assert people.client("viewer").get(url).status_code == 200
        assert people.client("rater").get(url).status_code == 403
    for url in writes:
        assert people.client("viewer").post(url, {**SETTINGS, "name": "x"}).status_code == 403
    assert QueryLog.objects.count() == 1 and not QueryCollection.objects.filter(name="x").exists()


def test_deleting_a_log_removes_its_files_and_keeps_sampled_query_sets(people):
    log = imported_log(people)
    client = people.client("lead")
    client.post(reverse("judgments:query-log-sample", args=[people.project.slug, log.uuid]), {**SETTINGS, "name": "Kept"})
    client.post(reverse("judgments:query-log-delete", args=[people.project.slug, log.uuid]))
    assert not QueryLog.objects.exists()
    assert not default_storage.exists(f"{log.folder}/daily.parquet")
    assert QueryCollection.objects.get(name="Kept").queries.count() == 12
