"""Small helpers that build test data through the real actions."""

from django.contrib.auth import get_user_model

from judgments import actions
from judgments.models import Membership, Project, Role

PASSWORD = "correct horse battery staple"


def make_user(username: str, **fields):
    fields.setdefault("email", f"{username}@example.com")
    return get_user_model().objects.create_user(username=username, password=PASSWORD, **fields)


def make_project(lead, name: str = "Shop search") -> Project:
    return actions.create_project(name=name, creator=lead, description="Product search judgments")


def add_member(project: Project, user, role: str) -> Membership:
    return actions.add_member(project, user, role)


__all__ = ["PASSWORD", "Role", "add_member", "answer_doc_id", "answers_file", "make_answer_round", "make_answer_run", "make_pool", "make_project", "make_round", "make_user", "run_queued_jobs", "trec_run", "upload"]


def run_queued_jobs() -> list:
    """Stand in for the worker: run every queued job now, in order. Returns the finished jobs."""
    from judgments.jobs import execute_job
    from judgments.models import Job

    return [execute_job(pk) for pk in Job.objects.filter(state=Job.State.QUEUED).order_by("created_at").values_list("pk", flat=True)]


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def trec_run(rows: dict[str, list[str]], tag: str = "sys") -> bytes:
    """A TREC run file: {query_id: [doc ids best first]}, scores falling with the rank."""
    lines = [f"{qid} Q0 {doc} {rank} {100 - rank} {tag}" for qid, docs in rows.items() for rank, doc in enumerate(docs, start=1)]
    return ("\n".join(lines) + "\n").encode()


def answers_file(answers: dict) -> bytes:
    """An answer run as JSONL: {query_id: answer text, or (answer text, [cited doc ids])}."""
    import json

    lines = []
    for qid, value in answers.items():
        text, cites = value if isinstance(value, tuple) else (value, None)
        lines.append(json.dumps({"query_id": qid, "answer": text, **({"cites": cites} if cites else {})}))
    return ("\n".join(lines) + "\n").encode()


def make_answer_run(project, answers: dict, *, name: str = "rag", system: str = "RAG"):
    """An answer run stored through the real import: `answers` as answers_file takes them."""
    from judgments.answers import import_answer_run

    return import_answer_run(project, answers_file(answers), name=name, system=system, original_name=f"{name}.jsonl")


def make_pool(project, pairs: dict[str, list[str]], name: str = "Pool"):
    """A pool over `pairs` ({query_id: [doc ids best first]}), with every document in the corpus."""
    import io
    import json

    from judgments.imports import import_corpus, import_queries, import_run
    from judgments.pools import add_runs_to_pool, create_pool

    docs = sorted({doc for ranked in pairs.values() for doc in ranked})
    corpus = "".join(json.dumps({"doc_id": doc, "title": f"Title of {doc}", "body": f"Text of {doc}"}) + "\n" for doc in docs)
    import_corpus(project, io.BytesIO(corpus.encode()), "docs.jsonl")
    queries = "query_id,query,information_need\n" + "".join(f"{qid},query {qid},need of {qid}\n" for qid in pairs)
    collection, _ = import_queries(project, queries.encode(), "queries.csv", name=f"{name} queries")
    run, _ = import_run(project, trec_run(pairs), "r.run", name=f"{name} run", system="BM25")
    pool = create_pool(project, name=name, query_set=collection, depth=max(len(d) for d in pairs.values()), strategy="best_rank")
    add_runs_to_pool(pool, [run])
    return pool


def make_round(project, lead, raters, pairs: dict[str, list[str]] | None = None, *, open: bool = True, **options):
    """A round over a fresh pool (three queries of four documents unless `pairs` says otherwise)."""
    from judgments import rounds
    from judgments.scales import GRADED

    pairs = pairs or {f"q{q}": [f"d{q}{d}" for d in range(1, 5)] for q in range(1, 4)}
    name = options.pop("name", "Round 1")
    pool = make_pool(project, pairs, name=f"{name} pool")
    guidelines = project.guideline_versions.first() or actions.save_guidelines(project, "# Rules", author=lead)[0]
    options.setdefault("scale", GRADED)
    options.setdefault("overlap_share", 0)
    round = rounds.create_round(project, name=name, pool=pool, guidelines=guidelines, raters=raters, user=lead, seed=7, **options)
    if open:
        rounds.open_round(round)
        round.refresh_from_db()
    return round


def answer_doc_id(run, query_id: str) -> str:
    """The opaque doc id of an answer document: raters grading blind never see the system's name."""
    import hashlib

    return "answer-" + hashlib.sha256(f"{run.uuid}/{query_id}".encode()).hexdigest()[:16]


def make_answer_round(project, lead, raters, answers: dict[str, dict[str, str]], *, references: dict[str, list[str]],
                      grades: dict[tuple[str, str], list[int | None]] | None = None, name: str = "Answer round", scale=None):
    """An open answer round: `answers` is {answer run name: {query_id: answer}}; the queries (every query id
    named) get `references`; `grades` is {(run name, query_id): [grade of raters[0], of raters[1], ...]}
    (None: that rater gives none), recorded through grading. Two raters per pair unless one rater is given."""
    from judgments import grading, rounds
    from judgments.imports import import_queries
    from judgments.models import Document, Pool, PoolPair
    from judgments.pools import create_pool
    from judgments.scales import make_scale, Grade

    query_ids = sorted({qid for by_query in answers.values() for qid in by_query} | set(references))
    csv = "query_id,query\n" + "".join(f"{qid},question {qid}\n" for qid in query_ids)
    collection, _ = import_queries(project, csv.encode(), "questions.csv", name=f"{name} questions")
    queries = {q.query_id: q for q in collection.queries.all()}
    for qid, texts in references.items():
        queries[qid].references = texts
        queries[qid].save(update_fields=["references"])
    pool = create_pool(project, name=f"{name} pool", query_set=collection, depth=1, strategy="best_rank")
    pool.kind = Pool.Kind.ANSWERS
    pool.save(update_fields=["kind"])
    for run_name, by_query in answers.items():
        run = make_answer_run(project, by_query, name=run_name, system=run_name)
        pool.answer_runs.add(run)
        for qid, text in by_query.items():
            doc = Document.objects.create(project=project, doc_id=answer_doc_id(run, qid), fields={"answer": text, "cites": []},
                                          answer_run=run)
            PoolPair.objects.create(pool=pool, query=queries[qid], doc_id=doc.doc_id, document=doc, best_rank=1, n_systems=1,
                                    provenance={run_name: 1}, priority=1.0)
    guidelines = project.guideline_versions.first() or actions.save_guidelines(project, "# Rules", author=lead)[0]
    scale = scale or make_scale("graded", [Grade(0, "Wrong"), Grade(1, "Partly right"), Grade(2, "Right")])
    round = rounds.create_round(project, name=name, pool=pool, guidelines=guidelines, raters=raters, user=lead, seed=7, scale=scale,
                                raters_per_pair=min(2, len(raters)), overlap_share=0)
    rounds.open_round(round)
    round.refresh_from_db()
    items = {(item.document.answer_run.name, item.query.query_id): item
             for item in round.items.select_related("query", "document__answer_run", "round")}
    for key, given in (grades or {}).items():
        for rater, grade in zip(raters, given):
            if grade is not None:
                grading.record(items[key], rater, grading.Verdict(grade=grade))
    return round
