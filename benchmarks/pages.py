"""Leads', viewers' and raters' pages of big rounds, and the agreement report job, on PostgreSQL.

    make bench-pages        (or: .venv/bin/python benchmarks/pages.py [--sizes 10000,100000,500000] [--loads 20]
                             [--pages "round page,flags"] [--no-job])

What it does (issue 19):
  * builds (or reuses, in the benchmark database) one round per size with `agreement.build_round`: pairs of
    100 documents per query, every pair graded by 2 raters, so 500,000 pairs hold 1,000,000 judgments;
    a stored agreement report, and a lead, a viewer and the two raters as members;
  * loads every lead, viewer and rater page of each round through Django's test client, 20 times each after
    one untimed load (so the first-use costs, template compilation and connection set-up, are left out),
    and prints the median and p95 of each, the growth from the smallest round to the largest, and PASS or
    FAIL against 300 ms at the largest round;
  * computes and stores the agreement report of the largest round (the job, 1,000 bootstrap resamples) in a
    fresh process, for its time and peak RSS: target at most 8 s and under 600 MB.

It also EXPLAINs the grading screen's next-pair queries on each round: their plan must not change with the
size. Its last line reads `slowest page: N ms (PAGE)`. Exits 1 when a target is missed.
"""

import argparse
import gc
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import time

from agreement import build_round
from bench_django import ROOT, setup_django

TARGET_MS = 300.0
TARGET_JOB_SECONDS = 8.0
TARGET_JOB_MB = 600.0
SIZES = (10_000, 100_000, 500_000)


def slug_of(size: int) -> str:
    return f"bench-pages-{size}"


def prepare(size: int):
    """The round of `size` pairs with its members and a stored agreement report (computed with 10 resamples
    when missing: the pages read it, they never compute it)."""
    from django.contrib.auth import get_user_model

    from judgments.models import AgreementReport, Membership, Role
    from judgments.ops import reports

    round = build_round(size, slug=slug_of(size))
    users = get_user_model().objects
    members = {"lead": users.get_or_create(username="bench-lead")[0], "viewer": users.get_or_create(username="bench-viewer")[0]}
    for role, user in members.items():
        Membership.objects.get_or_create(project=round.project, user=user, defaults={"role": role})
    for rater in round.raters.all():
        Membership.objects.get_or_create(project=round.project, user=rater, defaults={"role": Role.RATER})
    members["rater"] = round.raters.order_by("username").first()
    if not AgreementReport.objects.filter(round=round).exists():
        reports.store(round, reports.compute(round, resamples=10))
    return round, members


def pages_of(round, members) -> list[tuple[str, str, object]]:
    """(page, url, user): every page a lead, a viewer and a rater of the round opens."""
    from django.urls import reverse

    slug, uuid = round.project.slug, round.uuid
    query = round.pool.query_set.queries.order_by("query_id").first().query_id
    pool = round.pool.uuid
    read = [("project", reverse("judgments:project", args=[slug])),
            ("rounds list", reverse("judgments:rounds", args=[slug])),
            ("round page", reverse("judgments:round", args=[slug, uuid])),
            ("round page, per query", reverse("judgments:round-query", args=[slug, uuid, query])),
            ("flags", reverse("judgments:round-flags", args=[slug, uuid])),
            ("agreement report", reverse("judgments:round-agreement", args=[slug, uuid])),
            ("adjudication queue", reverse("judgments:round-adjudication", args=[slug, uuid])),
            ("export", reverse("judgments:round-export", args=[slug, uuid])),
            ("automatic judges", reverse("judgments:round-judges", args=[slug, uuid])),
            ("pools", reverse("judgments:pools", args=[slug])),
            ("pool", reverse("judgments:pool", args=[slug, pool])),
            ("reports", reverse("judgments:reports"))]
    lead_only = [("round settings", reverse("judgments:round-edit", args=[slug, uuid]))]
    rater = [("grading screen", reverse("judgments:grade", args=[slug, uuid])),
             ("grading, one query", reverse("judgments:grade-bulk", args=[slug, uuid, query])),
             ("work queue", reverse("judgments:my-queue"))]
    return ([(f"lead: {page}", url, members["lead"]) for page, url in read + lead_only]
            + [(f"viewer: {page}", url, members["viewer"]) for page, url in read]
            + [(f"rater: {page}", url, members["rater"]) for page, url in rater])


def time_page(url: str, user, loads: int) -> tuple[float, float]:
    from django.test import Client

    client = Client()
    client.force_login(user)
    first = client.get(url)
    if first.status_code != 200:
        sys.exit(f"{url} answered {first.status_code} to {user.username}")
    times = []
    for _ in range(loads):
        started = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), sorted(times)[max(0, round(0.95 * len(times)) - 1)]


def next_pair_plan(round, rater) -> list[str]:
    """The plan of the grading screen's next-pair queries (EXPLAIN, costs left out): node types and indexes."""
    from django.db import connection

    from judgments.ops import grading

    plans = []

    def explain(execute, sql, params, many, context):
        if sql.startswith("SELECT i.id FROM judgments_rounditem i WHERE"):
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
                plans.append(_shape(cursor.fetchone()[0][0]["Plan"]))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        grading.next_item(round, rater)
    return plans


def _shape(node: dict) -> str:
    inner = ", ".join(_shape(child) for child in node.get("Plans", []))
    return f"{node['Node Type']}{' on ' + node['Index Name'] if 'Index Name' in node else ''}{f' ({inner})' if inner else ''}"


def job_case(size: int) -> dict:
    setup_django()
    from judgments.models import Round
    from judgments.ops import reports

    round = Round.objects.get(project__slug=slug_of(size))
    started = time.perf_counter()
    stored = reports.store(round, reports.compute(round))
    return {"seconds": time.perf_counter() - started, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "judgments": stored.judgments}


def in_child(size: int) -> dict:
    result = subprocess.run([sys.executable, __file__, "--job", str(size)], cwd=ROOT,  # celery puts the cwd first on sys.path: benchmarks/api.py would hide the api app
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"the report job failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="round sizes in pairs, comma-separated")
    parser.add_argument("--loads", type=int, default=20, help="timed loads of each page")
    parser.add_argument("--no-job", action="store_true", help="leave out the agreement report job (its case takes a minute or more)")
    parser.add_argument("--pages", default="", help="time only the pages whose name contains one of these, comma-separated")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave the loaded objects to the cyclic collector's full passes (config/wsgi.py freezes them)")
    parser.add_argument("--job", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.job:
        print(json.dumps(job_case(options.job)))
        return
    sizes = sorted(int(size) for size in options.sizes.split(","))
    setup_django()
    from django.conf import settings
    from django.urls import get_resolver

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    logging.getLogger("axes").setLevel(logging.WARNING)  # one login per page timed
    timings: dict[str, dict[int, tuple[float, float]]] = {}
    plans = {}
    for size in sizes:
        started = time.perf_counter()
        round, members = prepare(size)
        print(f"round of {size:,} pairs ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        plans[size] = next_pair_plan(round, members["rater"])
        if not options.no_freeze:  # as config/wsgi.py does once the app is loaded
            get_resolver().url_patterns
            gc.freeze()
        wanted = [part.strip() for part in options.pages.split(",") if part.strip()]
        for page, url, user in pages_of(round, members):
            if wanted and not any(part in page for part in wanted):
                continue
            timings.setdefault(page, {})[size] = time_page(url, user, options.loads)
    job = None if options.no_job else in_child(sizes[-1])

    smallest, largest = sizes[0], sizes[-1]
    print("\n| page | " + " | ".join(f"{size:,} pairs: median / p95 ms" for size in sizes) + " | growth (p95) | target |")
    print("|---|" + "---:|" * len(sizes) + "---:|---|")
    for page, by_size in timings.items():
        cells = " | ".join(f"{by_size[size][0]:.0f} / {by_size[size][1]:.0f}" for size in sizes)
        growth = by_size[largest][1] / by_size[smallest][1]
        verdict = "PASS" if by_size[largest][1] <= TARGET_MS else "FAIL"
        print(f"| {page} | {cells} | x{growth:.1f} | {verdict} (p95 <= {TARGET_MS:.0f} ms) |")
    same_plan = all(plans[size] == plans[smallest] for size in sizes)
    print(f"\nnext-pair queries' plans {'the same' if same_plan else 'DIFFER'} at {', '.join(f'{size:,}' for size in sizes)} pairs: "
          + "; ".join(dict.fromkeys(plans[largest])) + ("" if same_plan else f" (at {smallest:,}: {'; '.join(dict.fromkeys(plans[smallest]))})"))
    load = f"{options.loads} loads a page{' (objects not frozen)' if options.no_freeze else ''}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    if job is None:
        job_ok = True
        print(f"\nagreement report job: not run (--no-job); {load}")
    else:
        job_ok = job["seconds"] <= TARGET_JOB_SECONDS and job["peak_mb"] < TARGET_JOB_MB
        print(f"\nagreement report job, {job['judgments']:,} judgments ({largest:,} pairs), 1,000 resamples: **{job['seconds']:.1f} s**, "
              f"peak RSS {job['peak_mb']:,.0f} MB: {'PASS' if job_ok else 'FAIL'} (<= {TARGET_JOB_SECONDS:.0f} s, < {TARGET_JOB_MB:.0f} MB); {load}")
    slowest = max(timings, key=lambda page: timings[page][largest][1])
    pages_ok = all(by_size[largest][1] <= TARGET_MS for by_size in timings.values())
    print(f"slowest page: {timings[slowest][largest][1]:.0f} ms ({slowest})")
    sys.exit(0 if pages_ok and job_ok and same_plan else 1)


if __name__ == "__main__":
    main()
