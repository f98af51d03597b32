"""The demo data `make run` loads: believable, small, and idempotent (a second load changes nothing).

An outdoor shop's catalogue, a few hundred queries across head, torso and tail, and three systems'
runs (a keyword baseline, a hybrid re-ranker and a dense retriever), pooled for judging.
"""

import gzip
import io
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evaluation.answer_evaluations import create_answer_evaluation, run_answer_evaluation
from evaluation.evaluations import DEFAULT_MEASURES, create_evaluation, run_evaluation

from .lib.querylog import ColumnMapping
from .lib.sampling import Boundaries, Quota
from .lib.scales import ANSWERS, GRADED, SUPPORTED
from .models import AgreementReport, Claim, DisplayField, Judgment, Membership, Project, Query, Role, RoundItem
from .ops import reports
from .ops.actions import save_guidelines
from .ops.answers import import_answer_run, import_references
from .ops.automatic import add_judge, calibrate, run_judge, store_calibration
from .ops.grading import recount_pairs
from .ops.imports import import_corpus, import_queries, import_run
from .ops.log_sampling import SamplingSettings, draw, import_query_log, log_queries, query_id_of, save_sample
from .ops.pools import add_runs_to_pool, create_answer_pool, create_pool
from .ops.rounds import create_round, open_round

DEMO_PASSWORD = "verdict-demo"
DEMO_USERS = [
    ("lead", "Lena Lead", "lead@verdict.example", Role.LEAD),
    ("rater1", "Ravi Rater", "ravi@verdict.example", Role.RATER),
    ("rater2", "Rosa Rater", "rosa@verdict.example", Role.RATER),
]
DEMO_PROJECT = {
    "slug": "acme-shop",
    "name": "Acme Outdoor: product search",
    "description": (
        "Judgment list for the Acme Outdoor web shop's product search (tents, jackets, boots, "
        "climbing gear). Compares today's BM25 ranking with the new hybrid re-ranker."
    ),
}
QUERY_SET = "Launch queries (autumn)"
GUIDELINES = """\
# Acme Outdoor: rater guidelines

## Task
Judge each product against the shopper's **information need** shown under the query, not only the
query's words. "tent" from the home page means "show me tents"; "northpeak tent" means that brand.

## Grades
### 3 Perfect: "This is exactly what I am looking for."
- *2-person tent* -> a two-person backpacking tent.
- *red waterproof rain jacket trailco* -> TrailCo's waterproof jacket in red.

### 2 Good: "Relevant: I want these results, but haven't found the exact one yet."
- *2-person tent* -> a three-person tent of the same range.
- *red waterproof rain jacket trailco* -> the same jacket in blue.

### 1 Fair: "I see the connection, but these are not what I am looking for."
- *2-person tent* -> a tent footprint or a sleeping bag.
- *hiking boots under 170* -> boots that cost 240.

### 0 Poor: "These are terrible: I would search elsewhere."
- *2-person tent* -> a camping stove.

## Edge cases in our domain
- **Out of stock**: grade the product as if it were in stock.
- **Variants**: another colour or size of the right product is Good (2), not Perfect.
- **Price limits** ("under 200"): a product over the limit is at most Fair (1).

## Unrateable results
Mark **unrateable** with the reason when the product page is broken or not in a language you read.
Use **judge later** when you want to come back to a result.
"""
SEARCH_LOG = "Acme search log, July-October"
SEARCH_LOG_FILE = "acme-search-log.csv.gz"  # written to VERDICT_VAR_DIR/demo/ for trying the upload by hand
SAMPLE = "Refresh sample (seed 2026)"
# Health checks: a newer log whose traffic drifted to winter and water sports nobody sampled, and a new system
# nobody evaluated yet, so that the staleness triggers fire on the demo.
NEWER_LOG = "Acme search log, November"
NEWER_LOG_FILE = "acme-search-log-november.csv.gz"
NEW_RUN = "retrained-dense"
DRIFTED = ["ski goggles", "avalanche beacon", "snowshoes", "ski touring skins", "down parka", "paddle board",
           "dry bag", "wetsuit", "kayak paddle", "heated gloves", "merino base layer", "ice axe", "crampons",
           "snow shovel", "ski helmet", "thermal flask", "splitboard", "life jacket", "neoprene socks", "hand warmers",
           "balaclava", "ski socks", "gaiters", "snow boots", "insulated bottle"]
POOL = "Launch pool, depth 10"
ROUND = "Launch round 1"
GRADED_QUERIES = 40  # the demo raters have judged these queries' pairs; the rest is left to grade
JUDGE = "overlap"  # the demo round's token-overlap judge, with its calibration report
JUDGE_SETTINGS = {"min_tokens": 2, "overlap_ratio": 0.5}  # product texts are short: Evret's 15 tokens would never match
ANSWER_QUERY_SET = "Shopper questions"  # questions the shop's assistant answers from the catalogue, with reference answers
ANSWER_QUESTIONS = 48
# Two assistants: a careful one that retrieves the right product, and a cheaper one that often picks a neighbour.
ANSWER_RUNS = [("Assistant (hybrid + large model)", "assistant-large", 0.1), ("Assistant (BM25 + small model)", "assistant-small", 0.45)]
ANSWER_POOL = "Shopper answers"  # both assistants' answers, graded by the raters in ANSWER_ROUND
ANSWER_ROUND = "Answer round 1"
ANSWER_GRADED_QUESTIONS = 24  # both raters graded these questions' answers, correctness and faithfulness

BRANDS = ["Northpeak", "TrailCo", "Alpenglow", "Summit Works", "Fjordline"]
CATEGORIES = {
    "tent": (["2-person", "3-person", "ultralight", "backpacking", "family", "4-season"], "tents", 90, 650),
    "sleeping bag": (["down", "synthetic", "summer", "winter", "mummy", "kids"], "sleeping bags", 45, 420),
    "rain jacket": (["waterproof", "packable", "women's", "men's", "insulated", "breathable"], "jackets", 60, 380),
    "hiking boots": (["waterproof", "leather", "lightweight", "women's", "men's", "wide"], "footwear", 80, 290),
    "backpack": (["30 l", "45 l", "65 l", "daypack", "ultralight", "women's"], "packs", 40, 320),
    "camping stove": (["gas", "multi-fuel", "compact", "titanium", "two-burner", "wood"], "kitchen", 25, 180),
    "headlamp": (["rechargeable", "400 lumen", "red light", "waterproof", "kids", "running"], "lighting", 15, 120),
    "trekking poles": (["carbon", "aluminium", "folding", "women's", "adjustable", "cork grip"], "accessories", 30, 190),
    "climbing harness": (["sport", "alpine", "women's", "kids", "adjustable", "lightweight"], "climbing", 45, 160),
    "water filter": (["squeeze", "gravity", "pump", "bottle", "uv", "compact"], "hydration", 20, 140),
}
COLOURS = ["red", "blue", "green", "black", "orange", "grey"]


@transaction.atomic
def load_demo() -> dict:
    """Create whatever of the demo is missing; report what was created."""
    User = get_user_model()
    created = Counter()
    users = {}
    for username, full_name, email, _role in DEMO_USERS:
        first, last = full_name.split(" ", 1)
        user, made = User.objects.get_or_create(username=username, defaults={"first_name": first, "last_name": last, "email": email})
        if made:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
            created["users"] += 1
        users[username] = user
    project, made = Project.objects.get_or_create(slug=DEMO_PROJECT["slug"], defaults={**DEMO_PROJECT, "created_by": users["lead"]})
    created["projects"] += made
    for username, _name, _email, role in DEMO_USERS:
        created["memberships"] += Membership.objects.get_or_create(project=project, user=users[username], defaults={"role": role})[1]

    rng = random.Random(20261121)
    products = _catalogue(rng)
    queries = _queries(rng)
    if not project.documents.corpus().exists():
        lines = b"".join(json.dumps(p).encode() + b"\n" for p in products)
        created["documents"] += import_corpus(project, io.BytesIO(lines), "acme-catalogue.jsonl")["added"]
        for order, (field, label, render) in enumerate(
            [("title", "Product", "text"), ("brand", "Brand", "text"), ("price", "Price (EUR)", "text"),
             ("description", "Description", "long"), ("url", "Shop page", "link")]
        ):
            DisplayField.objects.create(project=project, field=field, label=label, render=render, order=order)
    if not project.guideline_versions.exists():
        save_guidelines(project, GUIDELINES, author=users["lead"], note="First version for the launch round.")
        created["guidelines versions"] += 1
    if not project.query_sets.filter(name=QUERY_SET).exists():
        lines = b"".join(json.dumps(q).encode() + b"\n" for q in queries)
        import_queries(project, lines, "launch-queries.jsonl", name=QUERY_SET, user=users["lead"],
                       description="Sampled from September's search log: head, torso and tail.")
        created["query sets"] += 1
    if not project.query_logs.filter(name=SEARCH_LOG).exists():
        path = demo_search_log(queries)
        import_query_log(project, path, SEARCH_LOG_FILE, name=SEARCH_LOG, user=users["lead"],
                         mapping=ColumnMapping(query="query", time="timestamp", segments=("language", "device")))
        created["query logs"] += 1
    if not all(project.runs.filter(name=name).exists() for _system, name, _scorer in _SYSTEMS):
        # The systems answer the launch queries and every query of the search log, under the id a sample
        # from the log gives it, so that a pool over any unstratified sample finds pairs.
        answered = {q["query_id"]: q["query"] for q in queries} | {
            query_id_of(text): text for text in log_queries(project.query_logs.get(name=SEARCH_LOG))}
        catalogue = _Catalogue(products)
        for system, name, scorer in _SYSTEMS:
            if not project.runs.filter(name=name).exists():
                run = _run_file(catalogue, answered, scorer, np.random.default_rng(list(name.encode())), tag=name,
                                noise=_NOISE.get(name, 0.4))
                import_run(project, run, f"{name}.run", name=name, system=system, user=users["lead"],
                           description=f"Top 50 per query from the {system} ranking, for the launch queries and every query of the search log.")
                created["runs"] += 1
    if not project.query_sets.filter(name=SAMPLE).exists():
        sampling_settings = SamplingSettings(boundaries=Boundaries.parse("share:0.8,0.95"), seed=2026,
                                    quotas={"head": Quota(50), "torso": Quota(100), "tail": Quota(50)})
        save_sample(draw(project.query_logs.get(name=SEARCH_LOG), sampling_settings), name=SAMPLE, user=users["lead"],
                    description="Queries new since the launch set, drawn from the search log.")
        created["query sets"] += 1
    if not project.pools.filter(name=POOL).exists():
        pool = create_pool(project, name=POOL, query_set=project.query_sets.get(name=QUERY_SET), depth=10, strategy="rrf", user=users["lead"])
        add_runs_to_pool(pool, list(project.runs.filter(name__in=[name for _, name, _ in _SYSTEMS])))
        created["pools"] += 1
    if not project.rounds.filter(name=ROUND).exists():
        round = create_round(project, name=ROUND, pool=project.pools.get(name=POOL), guidelines=project.guideline_versions.first(),
                             scale=GRADED, raters=[users["rater1"], users["rater2"]], overlap_share=0.15, user=users["lead"], seed=2026)
        open_round(round)
        _grade(round, users["rater1"], users["rater2"], random.Random(7))
        created["rounds"] += 1
    round = project.rounds.get(name=ROUND)
    if not AgreementReport.objects.filter(round=round).exists():
        reports.store(round, reports.compute(round))
        created["agreement reports"] += 1
    if not round.evaluations.exists():
        runs = [project.runs.get(name=name) for _system, name, _scorer in _SYSTEMS]
        run_evaluation(create_evaluation(round, runs, measures=list(DEFAULT_MEASURES), user=users["lead"], resamples=2000, queue=False))
        created["evaluations"] += 1
    if not round.list_versions.exists():  # v1 of the launch list: the version page, its "first version" diff, pinning
        from .ops import versions

        versions.publish(round, user=users["lead"], note="The launch round's labels, as graded for the demo.")
        created["judgment-list versions"] += 1
    created.update(_load_health(project, queries, users["lead"]))
    if referenced := _add_references(project.query_sets.get(name=QUERY_SET)):
        created["queries given references"] += referenced
    created.update(_load_answers(project, products, users["lead"]))
    created.update(_load_answer_round(project, users))
    if not round.judges.filter(name=JUDGE).exists():
        judge = add_judge(round, name=JUDGE, kind="token_overlap", settings=JUDGE_SETTINGS, user=users["lead"])
        run_judge(judge)
        store_calibration(judge, calibrate(judge))
        created["automatic judges"] += 1
    return dict(created)


def _load_health(project, queries: list[dict], lead) -> Counter:
    """The drifted log, the new system (imported, not yet evaluated) and a first staleness check."""
    from .ops import health

    created = Counter()
    if not project.query_logs.filter(name=NEWER_LOG).exists():
        import_query_log(project, drifted_search_log(queries), NEWER_LOG_FILE, name=NEWER_LOG, user=lead,
                         mapping=ColumnMapping(query="query", time="timestamp", segments=("language", "device")))
        created["query logs"] += 1
    if not project.runs.filter(name=NEW_RUN).exists():
        answered = {q["query_id"]: q["query"] for q in queries}
        catalogue = _Catalogue(_catalogue(random.Random(20261121)))
        # Retrained and barely related to what the raters saw: most of its top 10 nobody graded.
        run = _run_file(catalogue, answered, _dense_score, np.random.default_rng(list(NEW_RUN.encode())), tag=NEW_RUN, noise=8.0)
        import_run(project, run, f"{NEW_RUN}.run", name=NEW_RUN, system="Dense retriever", user=lead,
                   description="The retrained dense retriever: not evaluated yet.")
        created["runs"] += 1
    if not project.health_checks.exists():
        health.check_project(project, notify=False)
        created["health checks"] += 1
    return created


def drifted_search_log(queries: list[dict], rows: int = 8_000) -> Path:
    """November: traffic moved to 25 winter and water-sports queries in no query set; the launch queries keep
    less than half of it."""
    rng = random.Random(43)
    texts = DRIFTED + [q["query"] for q in queries]
    drifted = [400 / (n + 1) ** 0.5 for n in range(len(DRIFTED))]
    launch = sum(q["weight"] for q in queries)
    # The launch queries (judged) get 0.8 of the drifted queries' traffic: about 44% of the month.
    weights = drifted + [q["weight"] / launch * sum(drifted) * 0.8 for q in queries]
    first_day = timezone.make_aware(datetime(2026, 11, 1), UTC)
    lines = ["timestamp,query,language,device"]
    for text in rng.choices(texts, weights=weights, k=rows):
        when = first_day + timedelta(seconds=rng.randrange(20 * 86400))
        lines.append(f'{when:%Y-%m-%dT%H:%M:%SZ},"{text}",{rng.choice(["en", "en", "de"])},{rng.choice(["mobile", "desktop"])}')
    folder = Path(settings.VAR_DIR) / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NEWER_LOG_FILE
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return path


def _load_answers(project, products: list[dict], lead) -> Counter:
    """Shopper questions about catalogue products with reference answers, two assistants' answer runs, and
    their answer evaluation; each part only when missing."""
    created = Counter()
    questions = _questions(products)
    if not project.query_sets.filter(name=ANSWER_QUERY_SET).exists():
        lines = b"".join(json.dumps({key: q[key] for key in ("query_id", "query", "tier", "weight", "information_need")}).encode() + b"\n"
                         for q in questions)
        query_set, _warnings = import_queries(project, lines, "shopper-questions.jsonl", name=ANSWER_QUERY_SET, user=lead,
                                              description="Questions the shop assistant answers from the catalogue.")
        # Reference answers for most questions (a few are left without, as a lead adds them over time).
        references = b"".join(json.dumps({"query_id": q["query_id"], "answers": q["answers"]}).encode() + b"\n"
                              for n, q in enumerate(questions) if n % 8 != 5)
        import_references(query_set, references, original_name="shopper-references.jsonl")
        created["query sets"] += 1
    for system, name, mistakes in ANSWER_RUNS:
        if not project.answer_runs.filter(name=name).exists():
            data = _answer_file(questions, products, random.Random(name), mistakes=mistakes)
            import_answer_run(project, data, name=name, system=system, user=lead, original_name=f"{name}.jsonl",
                              description="Generated answers to the shopper questions, citing the products they used.")
            created["answer runs"] += 1
    query_set = project.query_sets.get(name=ANSWER_QUERY_SET)
    if not query_set.answer_evaluations.exists():
        runs = [project.answer_runs.get(name=name) for _system, name, _mistakes in reversed(ANSWER_RUNS)]  # the cheaper one is the baseline
        run_answer_evaluation(create_answer_evaluation(query_set, runs, user=lead, resamples=2000, queue=False))
        created["answer evaluations"] += 1
    return created


def _load_answer_round(project, users) -> Counter:
    """A pool of both assistants' answers and an answer round over it with the faithfulness scale, its
    first questions graded by both raters; each part only when missing."""
    created = Counter()
    if not project.pools.filter(name=ANSWER_POOL).exists():
        create_answer_pool(project, name=ANSWER_POOL, query_set=project.query_sets.get(name=ANSWER_QUERY_SET),
                           answer_runs=[project.answer_runs.get(name=name) for _system, name, _mistakes in ANSWER_RUNS], user=users["lead"])
        created["pools"] += 1
    if not project.rounds.filter(name=ANSWER_ROUND).exists():
        round = create_round(project, name=ANSWER_ROUND, pool=project.pools.get(name=ANSWER_POOL), guidelines=project.guideline_versions.first(),
                             scale=ANSWERS, faithfulness_scale=SUPPORTED, raters=[users["rater1"], users["rater2"]], raters_per_pair=2,
                             user=users["lead"], seed=2611)
        open_round(round)
        _grade_answers(round, users["rater1"], users["rater2"], random.Random(11))
        created["rounds"] += 1
    return created


def _grade_answers(round, first, second, rng: random.Random) -> None:
    """Both raters grade the first questions' answers: right when the answer cites the product the question
    is about (its information need names it), and its claims supported by what it cites; the second rater
    one grade apart now and then."""
    queries = list(round.items.order_by("query__query_id").values_list("query_id", flat=True).distinct()[:ANSWER_GRADED_QUESTIONS])
    items = list(round.items.filter(query_id__in=queries).select_related("query", "document").order_by("query__query_id", "document__doc_id"))
    start = timezone.now() - timedelta(days=1)
    judgments = []
    for n, item in enumerate(items):
        cites = item.document.fields.get("cites", [])
        right = bool(cites) and f"({cites[0]})" in item.query.information_need
        grade = 2 if right else 0
        faithfulness = 2 if cites else 0
        for rater, spread in ((first, 0.1), (second, 0.2)):
            given = min(2, max(0, grade + rng.choice([-1, 1]))) if rng.random() < spread else grade
            supported = min(2, max(0, faithfulness + rng.choice([-1, 1]))) if rng.random() < spread else faithfulness
            when = start + timedelta(seconds=20 * n + (5 if rater == second else 0))
            judgments.append(Judgment(item=item, rater=rater, grade=given, faithfulness=supported, created_at=when, updated_at=when,
                                      seconds=rng.uniform(8, 40)))
    Judgment.objects.bulk_create(judgments)
    recount_pairs(round)


def _questions(products: list[dict]) -> list[dict]:
    """Questions about the price, colour or department of products, each with its reference answers."""
    rng = random.Random(2611)
    chosen = rng.sample(products, ANSWER_QUESTIONS)
    questions = []
    for n, product in enumerate(chosen):
        kind = ("price", "colour", "department")[n % 3]
        title = product["title"]
        if kind == "price":
            text, answers = f"How much does the {title} cost?", [f"{product['price']:.2f} euros", f"EUR {product['price']:.2f}"]
        elif kind == "colour":
            text, answers = f"What colour is the {title}?", [product["colour"]]
        else:
            text, answers = f"Where in the shop do I find the {title}?", [f"in {product['category']}", product["category"]]
        tier = "head" if n < 8 else "torso" if n < 24 else "tail"
        weight = {"head": 300.0, "torso": 40.0, "tail": 5.0}[tier] + n
        questions.append({"query_id": f"a{n + 1:03d}", "query": text, "tier": tier, "weight": weight, "kind": kind, "doc_id": product["doc_id"],
                          "information_need": f"The {kind} of {title} ({product['doc_id']}).", "answers": answers})
    return questions


def _answer_file(questions: list[dict], products: list[dict], rng: random.Random, *, mistakes: float) -> bytes:
    """An assistant's answers as JSONL: with probability `mistakes` it describes another product of the catalogue
    (and cites it); the careful one also answers in full sentences, the cheap one tersely and skips a few."""
    by_id = {p["doc_id"]: p for p in products}
    lines = []
    for question in questions:
        if mistakes > 0.3 and rng.random() < 0.08:
            continue  # no answer
        product = by_id[question["doc_id"]]
        if rng.random() < mistakes:
            product = rng.choice(products)
        value = {"price": f"{product['price']:.2f} euros", "colour": product["colour"], "department": product["category"]}[question["kind"]]
        if mistakes <= 0.3:
            answer = {"price": f"The {product['title']} costs {value}.", "colour": f"It is {value}.",
                      "department": f"You will find it in {value}."}[question["kind"]]
        else:
            answer = value
        lines.append(json.dumps({"query_id": question["query_id"], "answer": answer, "cites": [product["doc_id"]]}))
    return ("\n".join(lines) + "\n").encode()


def _add_references(query_set) -> int:
    """Reference texts for the token-overlap judge: the query with its information need, as a lead would write
    the ideal result down. Only for queries that have none (demos loaded before judges existed)."""
    missing = [query for query in query_set.queries.all() if not query.references]
    for query in missing:
        query.references = [f"{query.text}: {query.information_need}"]
    Query.objects.bulk_update(missing, ["references"], batch_size=500)
    return len(missing)


def demo_search_log(queries: list[dict], rows: int = 60_000) -> Path:
    """A gzipped CSV search log over 120 days: the launch queries with their traffic, thousands of
    rarer queries, the spelling variants real logs have, a little personal data and a few broken rows."""
    rng = random.Random(42)
    texts = [q["query"] for q in queries]
    weights = [q["weight"] for q in queries]
    words = sorted({word for text in texts for word in text.split()})
    # The long tail: rare word combinations, Zipf-like weights; about 6,000 distinct queries in the last
    # 90 days, so that the default tier boundaries (head to rank 500, torso to 5,000) leave a tail to sample.
    for n in range(16000):
        texts.append(" ".join(rng.sample(words, rng.choice((2, 3, 3, 4)))))
        weights.append(3000 / (n + 20) ** 0.8)
    first_day = timezone.make_aware(datetime(2026, 7, 3), UTC)
    lines = ["timestamp,query,language,device"]
    for text in rng.choices(texts, weights=weights, k=rows):
        when = first_day + timedelta(seconds=rng.randrange(120 * 86400))
        spelled = rng.choices([text, text.title(), f"  {text}  ", f"{text}?", text.upper()], weights=(80, 8, 5, 5, 2))[0]
        language = rng.choices(["en", "de", "fr"], weights=(85, 10, 5))[0]
        device = rng.choices(["mobile", "desktop", "tablet"], weights=(60, 35, 5))[0]
        lines.append(f'{when:%Y-%m-%dT%H:%M:%SZ},"{spelled}",{language},{device}')
    for extra in ("order status jane.doe@example.com", "call me +49 170 1234567", "card 4111111111111111"):
        lines.append(f"2026-10-20T10:00:00Z,{extra},en,mobile")
    lines += ["yesterday,tent,en,mobile", "2026-10-21T10:00:00Z,,en,mobile"]
    folder = Path(settings.VAR_DIR) / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SEARCH_LOG_FILE
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return path


def _likely_grade(item: RoundItem) -> int:
    """What a careful rater would say: how much of the query the product's title and description cover."""
    query = set(_tokens(item.query.text)) - {"under"}
    product = set(_tokens(f"{item.document.fields['title']} {item.document.fields['description']}"))
    share = len(query & product) / max(len(query), 1)
    return 3 if share > 0.99 else 2 if share >= 0.6 else 1 if share >= 0.3 else 0


def _grade(round, first, second, rng: random.Random) -> None:
    """The first queries graded by two raters who mostly agree: the first rater judges every pair, the
    second the overlap pairs, one grade apart a quarter of the time; a few flags and gold pairs."""
    queries = list(round.items.order_by("query_id").values_list("query_id", flat=True).distinct()[:GRADED_QUERIES])
    items = list(round.items.filter(query_id__in=queries).select_related("query", "document")
                 .order_by("query_id", "-priority", "document__doc_id"))  # the same grades on every database
    start = timezone.now() - timedelta(days=2)
    judgments = []
    for n, item in enumerate(items):
        grade = _likely_grade(item)
        when = start + timedelta(seconds=9 * n)
        if n % 97 == 13:
            judgments.append(Judgment(item=item, rater=first, unrateable="broken", created_at=when, updated_at=when,
                                      seconds=rng.uniform(4, 20)))
        else:
            judgments.append(Judgment(item=item, rater=first, grade=grade, created_at=when, updated_at=when, seconds=rng.uniform(3, 25)))
        if item.required > 1:
            other = min(3, max(0, grade + rng.choice([-1, 1]))) if rng.random() < 0.25 else grade
            judgments.append(Judgment(item=item, rater=second, grade=other, created_at=when, updated_at=when,
                                      seconds=rng.uniform(3, 25)))
        if n % 50 == 7:
            RoundItem.objects.filter(pk=item.pk).update(gold_grade=grade)
    Judgment.objects.bulk_create(judgments)
    recount_pairs(round)
    later = round.items.exclude(query_id__in=queries).order_by("query_id", "-priority").first()
    Claim.objects.create(item=later, rater=second, kind=Claim.Kind.LATER)


def _catalogue(rng: random.Random) -> list[dict]:
    products = []
    for category, (variants, department, low, high) in CATEGORIES.items():
        for brand in BRANDS:
            for variant in rng.sample(variants, 4):
                colour = rng.choice(COLOURS)
                number = len(products) + 1
                title = f"{brand} {variant} {category}".replace("  ", " ")
                products.append({
                    "doc_id": f"P{number:05d}",
                    "title": title.title().replace("'S", "'s").replace(" L ", " l "),
                    "brand": brand,
                    "category": department,
                    "price": round(rng.uniform(low, high), 2),
                    "colour": colour,
                    "description": (
                        f"The {brand} {variant} {category} in {colour}. "
                        f"{rng.choice(['Built for long trips', 'Made for weekend trails', 'Designed for wet climates', 'Tested in the Alps'])}, "
                        f"{rng.choice(['with recycled materials', 'with a lifetime warranty', 'and easy to repair', 'weighing less than most'])}."
                    ),
                    "url": f"https://shop.acme-outdoor.example/p/P{number:05d}",
                })
    return products


def _queries(rng: random.Random) -> list[dict]:
    queries = []

    def add(text: str, tier: str, weight: float, need: str) -> None:
        queries.append({"query_id": f"q{len(queries) + 1:04d}", "query": text, "tier": tier, "weight": round(weight, 1),
                        "information_need": need, "segment": "en"})

    for category, (variants, _department, _low, high) in CATEGORIES.items():
        add(category, "head", rng.uniform(4000, 20000), f"Browse {category}s; any brand or model.")
        add(f"{category}s", "head", rng.uniform(1500, 6000), f"Browse {category}s.")
        for brand in BRANDS:
            add(f"{brand.lower()} {category}", "torso", rng.uniform(150, 900), f"A {category} made by {brand}.")
        for variant in variants:
            add(f"{variant} {category}", "torso", rng.uniform(100, 700), f"A {category} that is {variant}.")
            add(f"{variant} {category} under {int(high * 0.6)}", "tail", rng.uniform(3, 40),
                f"A {variant} {category} costing less than {int(high * 0.6)} euros.")
            colour = rng.choice(COLOURS)
            add(f"{colour} {variant} {category} {rng.choice(BRANDS).lower()}", "tail", rng.uniform(1, 15),
                f"A {colour} {variant} {category} from that brand; another colour is acceptable but less good.")
    return queries


def _tokens(text: str) -> list[str]:
    return text.lower().replace("-", " ").replace("'", "").split()


class _Catalogue:
    """The products as token matrices (product x word), so that each system scores every query at once."""

    def __init__(self, products: list[dict]):
        self.doc_ids = [p["doc_id"] for p in products]
        texts = [_tokens(p["title"] + " " + p["description"]) for p in products]
        titles = [set(_tokens(p["title"])) for p in products]
        categories = [title - set(_tokens(p["brand"])) for title, p in zip(titles, products)]
        self.words = {word: i for i, word in enumerate(sorted({word for text in texts for word in text}))}
        frequency = self._matrix([Counter(text) for text in texts])
        documents = (frequency > 0).sum(axis=0)
        idf = np.log(1 + (len(products) - documents + 0.5) / (documents + 0.5))
        self.keyword = idf * frequency * 2.2 / (frequency + 1.2)  # BM25's saturated term weight
        self.title = self._matrix([Counter(title) for title in titles])
        self.category = self._matrix([Counter(category) for category in categories])

    def _matrix(self, counts: list[Counter]) -> np.ndarray:
        """Rows of word counts; words outside the catalogue's vocabulary score nothing, so they are left out."""
        matrix = np.zeros((len(counts), len(self.words)))
        for row, counted in enumerate(counts):
            for word, n in counted.items():
                if word in self.words:
                    matrix[row, self.words[word]] = n
        return matrix

    def queries(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Per query: its words counted, its distinct words, its words without a plural s, and its length."""
        words = [_tokens(text) for text in texts]
        return {"counts": self._matrix([Counter(w) for w in words]), "distinct": self._matrix([Counter(set(w)) for w in words]),
                "singular": self._matrix([Counter(word.rstrip("s") for word in w) for w in words]),
                "length": np.array([max(len(w), 1) for w in words], dtype=float)}


def _keyword_score(catalogue: _Catalogue, queries: dict) -> np.ndarray:
    return queries["counts"] @ catalogue.keyword.T


def _hybrid_score(catalogue: _Catalogue, queries: dict) -> np.ndarray:
    title_share = (queries["distinct"] @ catalogue.title.T) / queries["length"][:, None]
    return _keyword_score(catalogue, queries) + 2.0 * title_share


def _dense_score(catalogue: _Catalogue, queries: dict) -> np.ndarray:
    # Stands in for an embedding model: rewards the category words and ignores brand names.
    return queries["distinct"] @ catalogue.category.T + 0.3 * (queries["singular"] @ catalogue.category.T)


_SYSTEMS = [("BM25", "bm25-baseline", _keyword_score), ("Hybrid re-ranker", "hybrid-v2", _hybrid_score),
            ("Dense retriever", "dense-e5", _dense_score)]
# How much chance moves each system's scores: the baseline's keyword ties are broken carelessly, so that the
# re-ranker's title match visibly beats it on the leaderboard.
_NOISE = {"bm25-baseline": 5.0}


def _run_file(catalogue: _Catalogue, queries: dict[str, str], scorer, rng: np.random.Generator, *, tag: str, noise: float,
              depth: int = 50) -> bytes:
    """A TREC run over `queries` ({query id: text}), each distinct text ranked once: the same text under
    two ids (a launch query and its sampled twin) gets the same ranking."""
    texts = sorted(set(queries.values()))
    scores = scorer(catalogue, catalogue.queries(texts)) + rng.uniform(0, noise, size=(len(texts), len(catalogue.doc_ids)))
    top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    row_of = {text: row for row, text in enumerate(texts)}
    lines = []
    for query_id, text in queries.items():
        row = row_of[text]
        lines += [f"{query_id} Q0 {catalogue.doc_ids[doc]} {rank} {scores[row, doc]:.4f} {tag}" for rank, doc in enumerate(top[row], start=1)]
    return ("\n".join(lines) + "\n").encode()
