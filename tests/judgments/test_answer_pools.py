"""Pools of answers: each query paired with every answer run's answer, answers kept out of the corpus."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judgments.models import Document, Pool
from judgments.ops.imports import import_corpus, import_queries
from judgments.ops.pools import PoolRefused, answer_doc_id, create_answer_pool
from tests.factory import make_answer_run


@pytest.fixture
def answers(people):
    project = people.project
    import_queries(project, b"query_id,query,information_need\nq1,tent,a tent for two\nq2,boots,\nq3,stove,\n", "q.csv", name="Launch")
    import_corpus(project, io.BytesIO(b'{"doc_id": "d1", "title": "Tent"}\n{"doc_id": "d2", "title": "Boots"}\n'), "docs.jsonl")
    make_answer_run(project, {"q1": ("A two-person tent", ["d1"]), "q2": ("Hiking boots", ["d2", "d1"]), "q9": ("?", [])}, name="rag-a")
    make_answer_run(project, {"q1": ("A hammock", []), "q3": ("A gas stove", ["d9"])}, name="rag-b")
    make_answer_run(project, {"x1": ("Nothing", [])}, name="elsewhere")
    return people


def post_pool(people, runs, name="Answers 1", who="lead"):
    project = people.project
    form = {"name": name, "kind": "answers", "query_set": project.query_sets.get().uuid, "depth": 10, "strategy": "best_rank",
            "answer_runs": [str(project.answer_runs.get(name=r).uuid) for r in runs]}
    return people.client(who).post(reverse("judgments:pool-create", args=[project.slug]), form)


def test_a_pool_of_answers_pairs_each_query_with_each_runs_answer(answers):
    response = post_pool(answers, ["rag-a", "rag-b"])
    pool = Pool.objects.get(name="Answers 1")
    assert response.status_code == 302 and response.url == pool.get_absolute_url()
    assert pool.kind == Pool.Kind.ANSWERS
    assert set(pool.answer_runs.values_list("name", flat=True)) == {"rag-a", "rag-b"}
    got = {(p.query.query_id, p.document.answer_run.name, p.document.fields["answer"], tuple(p.document.fields["cites"]), p.best_rank,
            p.n_systems, tuple(p.provenance.items())) for p in pool.pairs.select_related("query", "document__answer_run")}
    assert got == {("q1", "rag-a", "A two-person tent", ("d1",), 1, 1, (("rag-a", 1),)),
                   ("q2", "rag-a", "Hiking boots", ("d2", "d1"), 1, 1, (("rag-a", 1),)),
                   ("q1", "rag-b", "A hammock", (), 1, 1, (("rag-b", 1),)),
                   ("q3", "rag-b", "A gas stove", ("d9",), 1, 1, (("rag-b", 1),))}  # q9 is not in the set
    assert pool.report["total_pairs"] == 4 and pool.report["answers_by_run"] == {"rag-a": 2, "rag-b": 2}
    assert pool.report["missing_from_corpus"] == 0


def test_answer_ids_are_opaque_and_never_name_the_system(answers):
    post_pool(answers, ["rag-a"])
    run = answers.project.answer_runs.get(name="rag-a")
    for document in Document.objects.filter(answer_run=run):
        assert document.doc_id.startswith("answer-") and len(document.doc_id) == len("answer-") + 16
        assert "rag" not in document.doc_id
    assert Document.objects.filter(doc_id=answer_doc_id(run, "q1"), answer_run=run).exists()


def test_a_second_pool_over_the_same_run_reuses_its_answer_documents(answers):
    post_pool(answers, ["rag-a"])
    before = set(Document.objects.filter(answer_run__isnull=False).values_list("pk", flat=True))
    post_pool(answers, ["rag-a"], name="Answers 2")
    assert set(Document.objects.filter(answer_run__isnull=False).values_list("pk", flat=True)) == before
    assert Pool.objects.get(name="Answers 2").pairs.count() == 2


def test_a_run_with_no_answer_for_the_sets_queries_is_refused_and_nothing_is_left(answers):
    response = post_pool(answers, ["rag-a", "elsewhere"])
    assert response.status_code == 200
    text = response.content.decode()
    assert "“elsewhere” has no answer for a query of “Launch”" in text and "x1" in text
    assert not Pool.objects.exists() and not Document.objects.filter(answer_run__isnull=False).exists()


def test_the_form_asks_for_answer_runs_for_a_pool_of_answers(answers):
    response = post_pool(answers, [])
    assert response.status_code == 200 and "Choose at least one answer run" in response.content.decode()
    assert not Pool.objects.exists()


def test_the_form_shows_how_many_queries_each_answer_run_answers(answers):
    response = answers.client("lead").get(reverse("judgments:pool-create", args=[answers.project.slug]))
    text = response.content.decode()
    assert "Answer runs, for a pool of answers" in text and "2 of 3" in text and "0 of 3: none, so no pairs" in text


def test_raters_and_viewers_cannot_build_a_pool_and_outsiders_get_404(answers):
    assert post_pool(answers, ["rag-a"], who="rater").status_code == 403
    assert post_pool(answers, ["rag-a"], who="viewer").status_code == 403
    assert post_pool(answers, ["rag-a"], who="outsider").status_code == 404
    assert not Pool.objects.exists()


def test_the_pool_page_of_answers_lists_its_answer_runs(answers):
    post_pool(answers, ["rag-a", "rag-b"])
    pool = Pool.objects.get()
    text = answers.client("lead").get(pool.get_absolute_url()).content.decode()
    assert "Pool of answers" in text and "2 answers to the set" in text and "Add runs to this pool" not in text


def test_create_answer_pool_refuses_another_projects_runs(answers, people):
    from tests.factory import make_project
    other = make_project(people.lead, name="Other")
    run = make_answer_run(other, {"q1": ("x", [])}, name="theirs")
    with pytest.raises(PoolRefused, match="another project"):
        create_answer_pool(answers.project, name="P", query_set=answers.project.query_sets.get(), answer_runs=[run])


def test_the_command_builds_a_pool_of_answers(answers):
    out = io.StringIO()
    call_command("build_pool", answers.project.slug, "--query-set", "Launch", "--answers", "rag-a", "rag-b", stdout=out)
    assert "Pool of answers 'Launch answers': 4 answers over 3 queries from 2 answer runs." in out.getvalue()
    with pytest.raises(CommandError, match="no answer run named 'nope'"):
        call_command("build_pool", answers.project.slug, "--query-set", "Launch", "--answers", "nope")
    with pytest.raises(CommandError, match="has no answer for a query"):
        call_command("build_pool", answers.project.slug, "--query-set", "Launch", "--answers", "elsewhere", "--name", "E")


def test_corpus_pages_counts_and_document_pages_leave_answers_out(answers):
    post_pool(answers, ["rag-a"])
    project, client = answers.project, answers.client("lead")
    assert project.documents.count() == 4 and project.documents.corpus().count() == 2
    text = client.get(reverse("judgments:corpus", args=[project.slug])).content.decode()
    answer = Document.objects.filter(answer_run__isnull=False).first()
    assert "d1" in text and answer.doc_id not in text and "A two-person tent" not in text
    assert answer.doc_id not in client.get(reverse("judgments:corpus", args=[project.slug]), {"q": "answer-"}).content.decode()
    assert client.get(reverse("judgments:document", args=[project.slug, answer.doc_id])).status_code == 404


def test_a_corpus_import_cannot_take_an_answers_id(answers):
    from judgments.lib.fileformats import FileProblem
    post_pool(answers, ["rag-a"])
    answer = Document.objects.filter(answer_run__isnull=False).first()
    with pytest.raises(FileProblem, match="belongs to a generated answer"):
        import_corpus(answers.project, io.BytesIO(b'{"doc_id": "%s", "title": "Sneaky"}\n' % answer.doc_id.encode()), "d.jsonl")
    answer.refresh_from_db()
    assert "answer" in answer.fields


def test_a_document_pool_never_links_an_answer_document(answers):
    post_pool(answers, ["rag-a"])
    answer = Document.objects.filter(answer_run__isnull=False).first()
    from judgments.ops.imports import import_run
    from judgments.ops.pools import add_runs_to_pool, create_pool
    from tests.factory import trec_run
    project = answers.project
    run, _ = import_run(project, trec_run({"q1": [answer.doc_id, "d1"]}), "r.run", name="bm25", system="BM25")
    pool = create_pool(project, name="Docs", query_set=project.query_sets.get(), depth=5, strategy="best_rank")
    add_runs_to_pool(pool, [run])
    assert pool.pairs.get(doc_id=answer.doc_id).document is None and pool.pairs.get(doc_id="d1").document is not None
    assert pool.report["missing_from_corpus"] == 1


def test_the_pools_list_names_the_answer_runs_of_a_pool_of_answers(answers):
    post_pool(answers, ["rag-a", "rag-b"])
    text = answers.client("lead").get(reverse("judgments:pools", args=[answers.project.slug])).content.decode()
    assert "rag-a, rag-b <small class=\"muted\">(answers)</small>" in text or "rag-b, rag-a <small class=\"muted\">(answers)</small>" in text
