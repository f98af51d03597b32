"""Concurrent judgment-list downloads through the REST API, against gunicorn on PostgreSQL.

    .venv/bin/python benchmarks/api_reads.py [--labels 100000] [--concurrency 100]

Case (target from issue 18 "A REST API...", on the 2-core machine):
  * 100 concurrent GETs of a 100,000-label qrels download -> p95 at most 200 ms.
Measured for a published version (`versions/{uuid}/labels.qrels`, immutable, ETag known before the file is read)
and for a round (`rounds/{uuid}/judgments.qrels`, the labels as they are now, ETag the digest of the bytes),
each as a full download and as a conditional GET a client holding the file sends (If-None-Match -> 304).

The round of benchmarks/versions.py (built with SQL, kept in the benchmark database) is reused; gunicorn is
started as benchmarks/grading_load.py starts it, with API_RATE_LIMIT=0.
"""

import argparse
import http.client
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_django import setup_django
from grading_load import free_port, start_server, stop_server
from versions import build_round

TARGET_P95_MS = 200.0
TIMEOUT_SECONDS = 120


def fetch(port: int, path: str, token: str, etag: str | None) -> tuple[float, int, int]:
    """Seconds to the last byte, status (0: no answer within the timeout), bytes."""
    headers = {"Authorization": f"Bearer {token}", **({"If-None-Match": etag} if etag else {})}
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        status, size = response.status, len(response.read())
    except OSError:
        status, size = 0, 0
    finally:
        conn.close()
    return time.perf_counter() - started, status, size


def burst(port: int, path: str, token: str, concurrency: int, etag: str | None = None) -> dict:
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda _: fetch(port, path, token, etag), range(concurrency)))
    times = sorted(seconds * 1000 for seconds, _, _ in results)
    return {"p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))], "max": times[-1],
            "statuses": sorted({status for _, status, _ in results}), "bytes": results[0][2]}


def prepare(labels: int):
    """The round, its published version and a lead's read token."""
    from django.contrib.auth import get_user_model

    from api.models import ApiToken
    from judgments import versions
    from judgments.models import Membership, Role

    round = build_round(labels)
    lead = get_user_model().objects.get_or_create(username="bench-api-lead")[0]
    Membership.objects.get_or_create(project=round.project, user=lead, defaults={"role": Role.LEAD})
    version = round.list_versions.order_by("-number").first() or versions.publish(round, note="api benchmark")
    ApiToken.objects.filter(user=lead).delete()
    _, secret = ApiToken.issue(user=lead, project=round.project, name="benchmark", scope="read")
    return round, version, secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    options = parser.parse_args()
    setup_django()
    round, version, token = prepare(options.labels)
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key-" + "x" * 40)
    os.environ["API_RATE_LIMIT"] = "0"
    port = free_port()
    log = Path(__file__).resolve().parent / "data" / "api-reads-gunicorn.log"
    # A busy machine takes longer than the default 30 s to boot the workers.
    server = start_server(port, options.workers, options.threads, log, seconds=600, ready_within=180)
    slug = round.project.slug
    cases = [("version labels.qrels", f"/api/v1/projects/{slug}/versions/{version.uuid}/labels.qrels"),
             ("round judgments.qrels", f"/api/v1/projects/{slug}/rounds/{round.uuid}/judgments.qrels")]
    rows, ok = [], True
    try:
        for label, path in cases:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS)
            started = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            answer = conn.getresponse()
            etag, _ = answer.getheader("ETag"), answer.read()
            alone = (time.perf_counter() - started) * 1000
            conn.close()
            full = burst(port, path, token, options.concurrency)
            cached = burst(port, path, token, options.concurrency, etag)
            print(f"{label}: alone {alone:.0f} ms; {full}; 304s {cached}", flush=True)
            rows.append((label, alone, full, cached))
            ok = ok and full["p95"] <= TARGET_P95_MS
    finally:
        stop_server(server)
    print(f"| {options.concurrency} concurrent GETs, {version.n_pairs:,} labels | bytes | one alone ms | p50 ms | p95 ms | max ms | statuses "
          f"(0: no answer in {TIMEOUT_SECONDS} s) | 304: p50 / p95 ms | target |")
    print("|---|---:|---:|---:|---:|---:|---|---|---|")
    for label, alone, full, cached in rows:
        verdict = "PASS" if full["p95"] <= TARGET_P95_MS else "FAIL"
        print(f"| {label} | {full['bytes'] / 1e6:.1f} MB | {alone:.0f} | {full['p50']:.0f} | **{full['p95']:.0f}** | {full['max']:.0f} | {full['statuses']} | "
              f"{cached['p50']:.0f} / {cached['p95']:.0f} ({cached['statuses']}) | {verdict} (p95 <= {TARGET_P95_MS:.0f} ms) |")
    print(f"\nserver: gunicorn gthread {options.workers} x {options.threads}, PostgreSQL, loopback; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores (other engineers' tests share them)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
