"""Pooling stored runs: provenance, best rank, priorities, incremental re-pooling, the report."""

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Job, Pool, PoolPair
from judgments.ops.imports import import_corpus, import_queries, import_run
from tests.factory import run_queued_jobs, trec_run


@pytest.fixture
def setup(people):
    project = people.project
    import_queries(project, b"query_id,query\nq1,tent\nq2,boots\nq3,stove\n", "q.csv", name="Launch")
    import_corpus(project, io.BytesIO(b"".join(b'{"doc_id": "%s", "title": "T"}\n' % d for d in [b"a", b"b", b"c", b"d", b"e"])), "docs.jsonl")
    runs = {
        "bm25": trec_run({"q1": ["a", "b", "c"], "q2": ["d", "e"], "q9": ["a"]}),
        "dense": trec_run({"q1": ["b", "x", "a"], "q2": ["e"]}),
        "hybrid": trec_run({"q1": ["c", "a"], "q3": ["e", "a"]}),
    }
    for name, data in runs.items():
        import_run(project, data, f"{name}.run", name=name, system=name.upper())
    return people


def build(people, runs: list[str], depth: int = 2, name: str = "Pool A", strategy: str = "best_rank") -> Pool:
    project = people.project
    form = {"name": name, "query_set": project.query_sets.get().uuid, "depth": depth, "strategy": strategy,
            "runs": [str(project.runs.get(name=r).uuid) for r in runs]}
    response = people.client("lead").post(reverse("judgments:pool-create", args=[project.slug]), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    return Pool.objects.get(name=name)


def pairs(pool) -> dict:
    return {(p.query.query_id, p.doc_id): (p.best_rank, p.provenance) for p in pool.pairs.select_related("query")}


def test_a_pool_is_the_union_of_each_systems_top_k_with_who_found_what(setup):
    pool = build(setup, ["bm25", "dense"], depth=2)
    assert pairs(pool) == {
        ("q1", "a"): (1, {"bm25": 1}),
        ("q1", "b"): (1, {"bm25": 2, "dense": 1}),
        ("q1", "x"): (2, {"dense": 2}),
        ("q2", "d"): (1, {"bm25": 1}),
        ("q2", "e"): (1, {"bm25": 2, "dense": 1}),
    }  # q9 is not in the query set; ranks below 2 are not pooled


def test_documents_missing_from_the_corpus_are_listed_not_dropped(setup):
    pool = build(setup, ["bm25", "dense"], depth=2)
    assert pool.report["missing_from_corpus"] == 1
    assert pool.report["missing_examples"] == [["q1", "x"]]
    assert PoolPair.objects.get(doc_id="x").document is None
    assert PoolPair.objects.get(doc_id="a").document.doc_id == "a"
    page = setup.client("viewer").get(pool.get_absolute_url()).content.decode()
    assert "missing from the corpus" in page


def test_the_report_counts_unique_documents_and_overlap(setup):
    pool = build(setup, ["bm25", "dense"], depth=2)
    report = pool.report
    assert report["total_pairs"] == 5
    assert report["unique_by_system"] == {"bm25": 2, "dense": 1}
    # bm25 top-2 pairs {q1a, q1b, q2d, q2e}, dense {q1b, q1x, q2e}: 2 shared of 5
    assert report["overlap_matrix"]["bm25"]["dense"] == pytest.approx(2 / 5)
    assert report["queries_without_pairs"] == 1


def test_adding_a_run_adds_only_new_pairs_and_keeps_the_existing_ones(setup):
    pool = build(setup, ["bm25", "dense"], depth=2)
    before = {(p.query.query_id, p.doc_id): p.pk for p in pool.pairs.select_related("query")}
    add = reverse("judgments:pool-add-runs", args=[setup.project.slug, pool.uuid])
    setup.client("lead").post(add, {"runs": [str(setup.project.runs.get(name="hybrid").uuid)]})
    [job] = run_queued_jobs()
    assert job.state == Job.State.SUCCEEDED, job.error
    after = {(p.query.query_id, p.doc_id): p for p in pool.pairs.select_related("query")}
    assert set(after) - set(before) == {("q1", "c"), ("q3", "e"), ("q3", "a")}
    assert all(after[key].pk == pk for key, pk in before.items())
    assert after[("q1", "a")].provenance == {"bm25": 1, "hybrid": 2}
    assert set(pool.runs.values_list("name", flat=True)) == {"bm25", "dense", "hybrid"}


def test_the_judging_order_follows_the_strategy(setup):
    pool = build(setup, ["bm25", "dense"], depth=2, strategy="rrf")
    first = pool.pairs.first()
    # RRF: q1/b and q2/e are found by both systems at ranks 2 and 1: 1/62 + 1/61 beats any single system
    assert (first.query.query_id, first.doc_id) in {("q1", "b"), ("q2", "e")}
    assert first.priority == pytest.approx(1 / 62 + 1 / 61)


def test_pooling_more_than_three_systems_shallowly_warns(setup):
    from judgments.ops.imports import import_run

    import_run(setup.project, trec_run({"q1": ["a"]}, "four"), "four.run", name="four", system="FOUR")
    project = setup.project
    form = {"name": "Wide", "query_set": project.query_sets.get().uuid, "depth": 10, "strategy": "best_rank",
            "runs": [str(r.uuid) for r in project.runs.all()]}
    response = setup.client("lead").post(reverse("judgments:pool-create", args=[project.slug]), form, follow=True)
    assert "TREC practice pools 20 to 50 deep" in response.content.decode()


def test_the_build_pool_command(setup, capsys):
    call_command("build_pool", setup.project.slug, "--query-set", "Launch", "--runs", "bm25", "dense", "--depth", "2")
    out = capsys.readouterr().out
    assert "Pool 'Launch depth 2': 5 pairs over 2 queries from 2 runs; 1 pairs name documents missing from the corpus." in out
    call_command("build_pool", setup.project.slug, "--query-set", "Launch", "--runs", "hybrid", "--depth", "2")
    assert "8 pairs" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no stored run named 'nope'"):
        call_command("build_pool", setup.project.slug, "--query-set", "Launch", "--runs", "nope")
    with pytest.raises(CommandError, match="exists with depth 2, not 5"):
        call_command("build_pool", setup.project.slug, "--query-set", "Launch", "--runs", "bm25", "--depth", "5", "--name", "Launch depth 2")


@pytest.fixture
def sampled(setup):
    """A query set with hashed ids, like a sample from a log, that none of the runs answers."""
    import_queries(setup.project, b"query_id,query\nq3fa9c1d2e4b0,tent\nq77aa01bc9e3f,boots\n", "s.csv", name="Sampled")
    return setup.project.query_sets.get(name="Sampled")


def test_a_pool_no_run_answers_is_refused_with_ids_from_both_sides(setup, sampled):
    project = setup.project
    form = {"name": "Empty", "query_set": sampled.uuid, "depth": 10, "strategy": "best_rank",
            "runs": [str(r.uuid) for r in project.runs.all()]}
    page = setup.client("lead").post(reverse("judgments:pool-create", args=[project.slug]), form).content.decode()
    assert "The pool would have no pairs: none of the chosen runs has results for a query of “Sampled”" in page
    assert "the set&#x27;s ids (q3fa9c1d2e4b0, q77aa01bc9e3f) are not the runs&#x27; (q1, q2, q3, ...)" in page
    assert not Pool.objects.exists() and not Job.objects.exists()


def test_adding_runs_that_answer_none_of_the_pools_queries_is_refused(setup):
    pool = build(setup, ["bm25"], depth=2)
    import_run(setup.project, trec_run({"x1": ["a"]}, "other"), "other.run", name="other", system="OTHER")
    client = setup.client("lead")
    url = reverse("judgments:pool-add-runs", args=[setup.project.slug, pool.uuid])
    page = client.post(url, {"runs": [str(setup.project.runs.get(name="other").uuid)]}, follow=True).content.decode()
    assert "These runs would add no pairs: none of the chosen runs has results for a query of “Launch”" in page
    assert "the runs&#x27; (x1)" in page and not Job.objects.filter(kind="build_pool", state=Job.State.QUEUED).exists()
    page = client.post(url, {}, follow=True).content.decode()
    assert "Choose at least one run that is not in the pool yet." in page


def test_the_command_refuses_an_empty_pool_and_leaves_nothing_behind(setup, sampled):
    with pytest.raises(CommandError, match=r"the set's ids \(q3fa9c1d2e4b0, q77aa01bc9e3f\) are not the runs' \(q1, q2, q9\)"):
        call_command("build_pool", setup.project.slug, "--query-set", "Sampled", "--runs", "bm25", "dense")
    assert not Pool.objects.exists()


def test_the_pool_form_shows_each_runs_coverage_of_the_chosen_query_set(setup, sampled):
    project, client = setup.project, setup.client("lead")
    url = reverse("judgments:pool-create", args=[project.slug])
    launch = project.query_sets.get(name="Launch")
    page = client.get(url, {"query_set": launch.uuid}).content.decode()
    assert "Coverage of “Launch”" in page and f'<option value="{launch.uuid}" selected>' in page
    assert sorted(coverage_rows(page)) == [["bm25", "2 of 3", "q3"], ["dense", "2 of 3", "q3"], ["hybrid", "2 of 3", "q2"]]
    assert f'href="?query_set={sampled.uuid}"' in page  # the no-JavaScript way to another set
    partial = client.get(url, {"query_set": sampled.uuid}, headers={"HX-Request": "true"}).content.decode()
    assert partial.strip().startswith('<section id="run-coverage"') and "<form" not in partial
    assert ["bm25", "0 of 2: none, so no pairs", "q3fa9c1d2e4b0, q77aa01bc9e3f"] in coverage_rows(partial)


def test_the_query_set_choice_asks_htmx_for_the_coverage(setup):
    page = setup.client("lead").get(reverse("judgments:pool-create", args=[setup.project.slug])).content.decode()
    select = re.search(r'<select name="query_set"[^>]*>', page).group(0)
    assert 'hx-get="/p/' in select and 'hx-target="#run-coverage"' in select


@pytest.mark.parametrize(("who", "status"), [("outsider", 404), ("viewer", 403), ("rater", 403)])
def test_only_leads_see_the_pool_form(setup, who, status):
    assert setup.client(who).get(reverse("judgments:pool-create", args=[setup.project.slug])).status_code == status


def coverage_rows(page: str) -> list[list[str]]:
    section = page[page.index('id="run-coverage"'):]
    body = section[section.index("<tbody>"):section.index("</tbody>")]
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_deleting_a_pool_or_its_project_removes_its_pairs(setup):
    pool = build(setup, ["bm25", "dense"], depth=2)
    assert PoolPair.objects.filter(pool=pool).count() == 5
    pool.delete()
    assert not PoolPair.objects.exists()
    pool = build(setup, ["bm25"], depth=2, name="Pool B")
    setup.project.delete()
    assert not PoolPair.objects.exists()


def test_the_pool_form_defaults_to_the_query_set_the_runs_answer_not_the_newest(setup, sampled):
    """"Sampled" is the newest set and no run answers it: the form picks "Launch", which every run answers."""
    project, client = setup.project, setup.client("lead")
    launch = project.query_sets.get(name="Launch")
    assert project.query_sets.first() == sampled  # newest first
    page = client.get(reverse("judgments:pool-create", args=[project.slug])).content.decode()
    assert f'<option value="{launch.uuid}" selected>' in page and "Coverage of “Launch”" in page
    why = " ".join(re.search(r'id="coverage-set-why">(.*?)</p>', page, re.S).group(1).split())
    assert why.startswith("The query set most of the project's runs answer: 3 of 3 runs have results for at least one of its 3 queries")
    assert "state-failed" not in page
    # Chosen on purpose, the other set still shows, and says it was chosen.
    page = client.get(reverse("judgments:pool-create", args=[project.slug]), {"query_set": sampled.uuid}).content.decode()
    why = " ".join(re.search(r'id="coverage-set-why">(.*?)</p>', page, re.S).group(1).split())
    assert f'<option value="{sampled.uuid}" selected>' in page and why.startswith("The set you chose: 0 of 3 runs")
