"""Small helpers that build test data through the real actions."""

from django.contrib.auth import get_user_model

from judgments.models import Membership, Project, Role
from judgments.ops import actions

PASSWORD = "correct horse battery staple"


def make_user(username: str, **fields):
    fields.setdefault("email", f"{username}@example.com")
    return get_user_model().objects.create_user(username=username, password=PASSWORD, **fields)


def make_project(lead, name: str = "Shop search") -> Project:
    return actions.create_project(name=name, creator=lead, description="Product search judgments")


def add_member(project: Project, user, role: str) -> Membership:
    return actions.add_member(project, user, role)


__all__ = ["PASSWORD", "Role", "add_member", "answers_file", "make_answer_round", "make_answer_run", "make_graded_answer_round", "make_pool", "make_project", "make_round", "make_user", "run_queued_jobs", "trec_run", "upload"]


def run_queued_jobs() -> list:
    """Stand in for the worker: run every queued job now, in order. Returns the finished jobs."""
    from judgments.models import Job
    from judgments.ops.jobs import execute_job

    return [execute_job(pk) for pk in Job.objects.filter(state=Job.State.QUEUED).order_by("created_at").values_list("pk", flat=True)]


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def parquet_bytes(table) -> bytes:
    import io

    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


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
    from judgments.ops.answers import import_answer_run

    return import_answer_run(project, answers_file(answers), name=name, system=system, original_name=f"{name}.jsonl")


def make_pool(project, pairs: dict[str, list[str]], name: str = "Pool"):
    """A pool over `pairs` ({query_id: [doc ids best first]}), with every document in the corpus."""
    import io
    import json

    from judgments.ops.imports import import_corpus, import_queries, import_run
    from judgments.ops.pools import add_runs_to_pool, create_pool

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
    from judgments.lib.scales import GRADED
    from judgments.ops import rounds

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


def make_answer_round(project, lead, raters, *, faithfulness: bool = True, open: bool = True, name: str = "Answers round", **options):
    """A round over a pool of answers: queries q1-q3, two answer runs (rag-a answers all three citing
    corpus documents, rag-b answers q1 citing a document missing from the corpus); the default answer
    scale and, with `faithfulness`, the default faithfulness scale."""
    import io
    import json

    from judgments.lib.scales import ANSWERS, SUPPORTED
    from judgments.ops import rounds
    from judgments.ops.imports import import_corpus, import_queries
    from judgments.ops.pools import create_answer_pool

    if not project.documents.corpus().filter(doc_id="d1").exists():
        corpus = "".join(json.dumps({"doc_id": f"d{n}", "title": f"Title of d{n}", "body": f"Text of d{n}"}) + "\n" for n in range(1, 4))
        import_corpus(project, io.BytesIO(corpus.encode()), "docs.jsonl")
    queries = "query_id,query,information_need\n" + "".join(f"q{n},question {n},need of q{n}\n" for n in range(1, 4))
    collection, _ = import_queries(project, queries.encode(), "queries.csv", name=f"{name} queries")
    runs = [make_answer_run(project, {f"q{n}": (f"Answer {n} by A", [f"d{n}"]) for n in range(1, 4)}, name=f"{name} rag-a"),
            make_answer_run(project, {"q1": ("Answer 1 by B", ["d1", "nowhere"])}, name=f"{name} rag-b")]
    pool = create_answer_pool(project, name=f"{name} pool", query_set=collection, answer_runs=runs, user=lead)
    guidelines = project.guideline_versions.first() or actions.save_guidelines(project, "# Rules", author=lead)[0]
    options.setdefault("overlap_share", 0)
    round = rounds.create_round(project, name=name, pool=pool, guidelines=guidelines, raters=raters, user=lead, seed=7,
                                scale=ANSWERS, faithfulness_scale=SUPPORTED if faithfulness else None, **options)
    if open:
        rounds.open_round(round)
        round.refresh_from_db()
    return round


def make_graded_answer_round(project, lead, raters, answers: dict[str, dict[str, str]], *, references: dict[str, list[str]],
                             grades: dict[tuple[str, str], list[int | None]] | None = None, name: str = "Graded answers"):
    """An open answer round on the default answer scale (0 wrong, 1 partly right, 2 right), graded: `answers`
    is {answer run name: {query_id: answer}}, every query named gets `references` (none when not listed),
    `grades` is {(run name, query_id): [grade by raters[0], by raters[1], ...]} (None: no grade from that
    rater), recorded through grading. Two raters per pair (one when one rater is given)."""
    from judgments.lib.scales import ANSWERS
    from judgments.ops import grading, rounds
    from judgments.ops.imports import import_queries
    from judgments.ops.pools import create_answer_pool

    query_ids = sorted({qid for by_query in answers.values() for qid in by_query} | set(references))
    queries = "query_id,query\n" + "".join(f"{qid},question {qid}\n" for qid in query_ids)
    collection, _ = import_queries(project, queries.encode(), "questions.csv", name=f"{name} questions")
    for query in collection.queries.filter(query_id__in=list(references)):
        query.references = references[query.query_id]
        query.save(update_fields=["references"])
    runs = [make_answer_run(project, by_query, name=run_name, system=run_name) for run_name, by_query in answers.items()]
    pool = create_answer_pool(project, name=f"{name} pool", query_set=collection, answer_runs=runs, user=lead)
    guidelines = project.guideline_versions.first() or actions.save_guidelines(project, "# Rules", author=lead)[0]
    round = rounds.create_round(project, name=name, pool=pool, guidelines=guidelines, raters=raters, user=lead, seed=7, scale=ANSWERS,
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
