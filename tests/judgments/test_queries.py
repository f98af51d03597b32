"""Query sets: importing files through a job, adding and editing queries by hand."""

from django.urls import reverse

from judgments.models import Job, Query, QueryCollection
from tests.factory import run_queued_jobs, upload

CSV = b"query_id,query,information_need,tier,weight,segment,brand\nq1,2 person tent,A light tent for hiking,head,120,en,acme\nq2,rain jacket,,torso,,en,\nq3,Rain Jacket,,tail,1,de,\n"


def import_url(people):
    return reverse("judgments:query-set-import", args=[people.project.slug])


def test_a_lead_imports_a_query_set_and_sees_the_warnings_on_the_job_page(people):
    client = people.client("lead")
    response = client.post(import_url(people), {"file": upload("queries.csv", CSV), "name": "Launch set"})
    job = Job.objects.get(kind="import_queries")
    assert response["Location"] == job.get_absolute_url()
    [finished] = run_queued_jobs()
    assert finished.state == Job.State.SUCCEEDED, finished.error
    collection = QueryCollection.objects.get(project=people.project, name="Launch set")
    q1 = collection.queries.get(query_id="q1")
    assert (q1.text, q1.information_need, q1.tier, q1.weight, q1.segment, q1.extra) == (
        "2 person tent", "A light tent for hiking", "head", 120.0, "en", {"brand": "acme"})
    assert collection.queries.count() == 3
    page = client.get(job.get_absolute_url()).content.decode()
    assert "repeats query q2" in page
    assert collection.get_absolute_url() in page


def test_a_bad_file_fails_the_job_with_the_line_and_stores_nothing(people):
    people.client("lead").post(import_url(people), {"file": upload("queries.csv", b"query_id,query\nq1,a\nq1,b\n"), "name": "Bad"})
    [failed] = run_queued_jobs()
    assert failed.state == Job.State.FAILED
    assert "queries.csv:3: query_id 'q1' was already used on line 2" in failed.error
    assert not QueryCollection.objects.filter(name="Bad").exists()
    assert not Query.objects.exists()


def test_an_oversized_upload_is_refused_before_anything_is_stored(people, settings):
    settings.UPLOAD_MAX_BYTES = 1024
    response = people.client("lead").post(import_url(people), {"file": upload("big.csv", b"x" * 2048), "name": "Big"})
    assert response.status_code == 200
    assert "UPLOAD_MAX_BYTES" in response.content.decode()
    assert not Job.objects.exists()


def test_a_taken_name_is_refused_in_the_form(people):
    client = people.client("lead")
    client.post(reverse("judgments:query-set-create", args=[people.project.slug]), {"name": "Manual"})
    response = client.post(import_url(people), {"file": upload("q.csv", CSV), "name": "Manual"})
    assert "already has a query set with this name" in response.content.decode()


def test_a_lead_adds_and_edits_queries_by_hand(people):
    client = people.client("lead")
    client.post(reverse("judgments:query-set-create", args=[people.project.slug]), {"name": "Manual", "description": ""})
    collection = QueryCollection.objects.get(name="Manual")
    add = reverse("judgments:query-add", args=[people.project.slug, collection.uuid])
    client.post(add, {"query_id": "m1", "text": "headlamp", "information_need": "", "tier": "", "weight": "", "segment": ""})
    duplicate = client.post(add, {"query_id": "m1", "text": "other", "information_need": "", "tier": "", "weight": "", "segment": ""})
    assert "already has a query with this id" in duplicate.content.decode()
    edit = reverse("judgments:query-edit", args=[people.project.slug, collection.uuid, "m1"])
    client.post(edit, {"query_id": "m1", "text": "LED headlamp", "information_need": "bright", "tier": "tail", "weight": "2", "segment": "en",
                       "version": 1})
    query = collection.queries.get()
    assert (query.text, query.information_need, query.weight) == ("LED headlamp", "bright", 2.0)


def test_the_query_set_page_lists_and_searches_queries(people):
    from judgments.ops.imports import import_queries

    collection, _ = import_queries(people.project, CSV, "q.csv", name="Set")
    page = people.client("viewer").get(collection.get_absolute_url(), {"q": "tent"}).content.decode()
    assert "2 person tent" in page and "rain jacket" not in page


def test_the_import_queries_command_prints_what_it_did_and_fails_clearly(people, tmp_path, capsys):
    import pytest
    from django.core.management import CommandError, call_command

    good = tmp_path / "launch.csv"
    good.write_bytes(CSV)
    call_command("import_queries", people.project.slug, str(good))
    assert "Query set 'launch': 3 queries imported." in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"query_id": "a"}\n')
    with pytest.raises(CommandError, match=r"bad.jsonl:1: missing query"):
        call_command("import_queries", people.project.slug, str(bad))
    with pytest.raises(CommandError, match="no project with the slug 'nope'"):
        call_command("import_queries", "nope", str(good))


def test_the_next_page_keeps_the_search(people):
    client = people.client("lead")
    rows = "".join(f"q{i},tent {i}\n" for i in range(120))
    client.post(import_url(people), {"file": upload("q.csv", f"query_id,query\n{rows}".encode()), "name": "Many"})
    run_queued_jobs()
    collection = QueryCollection.objects.get(name="Many")
    page = client.get(collection.get_absolute_url(), {"q": "tent"}).content.decode()
    assert 'href="?q=tent&amp;page=2"' in page and "Page 1 of 3" in page
