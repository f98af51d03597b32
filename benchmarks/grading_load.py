"""Grading under load: simulated raters "save a grade, get the next pair" against gunicorn on PostgreSQL.

    make bench-grading        (or: .venv/bin/python benchmarks/grading_load.py [--seconds 60] [--raters 50]
                                   [--think 0.5-1.5] [--workers 2 --threads 4])

What it does (the grading-rounds issue):
  * builds a fresh project through the real actions: 400 queries x 25 documents = 10,000 pairs, one open
    round, 15% of the pairs drawn for a second judgment (the default overlap share), 50 raters;
  * starts `gunicorn config.wsgi` on 127.0.0.1 with DEBUG off and persistent database connections;
  * runs one thread per rater, each on its own keep-alive connection: load the grading page once, then
    loop "think, POST a grade (htmx), read the next pair out of the answer" for --seconds. Think time is
    uniform in --think seconds (default 0.5-1.5 s: a fast human); --think 0 measures saturation;
  * times each POST (save grade + render the next pair) on the client: p50/p95/p99/max and throughput;
  * then checks the database: every acknowledged grade (HTTP 200) is stored exactly once with its grade,
    nothing is stored that was not sent, n_judged matches the judgments, no pair is judged more often
    than it needs, and the round's kept totals (the raters' "to go") equal the sums over its pairs.

Target on the 2-core machine: p95 at most 50 ms, nothing lost or doubled. Exits 1 otherwise.

Server: gunicorn's gthread worker, because the sync worker closes the connection after every response
and browsers keep theirs alive. Default 2 workers x 4 threads: one process per core, so two requests
run Python at once, and four threads per process to cover the time a request waits on PostgreSQL.
When requests cost 20 ms of Python (session 2), 2x4 gave a lower p95 than 3x2 and 4x1. A grade now
costs about 7 ms of Python and 4 ms of PostgreSQL CPU (the "server CPU per request" row), with prepared
statements (DATABASE_PREPARED_STATEMENTS, on by default) and persistent connections.
The setup (about 5 s) and the one page load per rater before the loop are not timed.

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/verdict_bench, created if
missing). The server's log goes to benchmarks/data/grading-gunicorn.log.
"""

import argparse
import http.client
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench_django import DATA, DATABASE_URL, ROOT, setup_django
SLUG = "bench-grading"
TARGET_P95_MS = 50.0
GRADER = re.compile(r'<div\b[^>]*\bid="grader"[^>]*>')
DATA_ITEM = re.compile(r'\bdata-item="([^"]*)"')
REFUSAL = re.compile(rb'class="message message-error" role="alert">([^<]*)<')


def analyze(*tables: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(tables)}")


def fresh_round(n_queries: int, n_docs: int, n_raters: int, *, n_runs: int = 1, judging_order: str = "pool"):
    """A new open round over n_queries x n_docs pairs, built through the actions a lead's clicks call. With
    `n_runs` > 1 the pool also holds runs that rank each query's documents in a seeded shuffle (the provenance an
    adaptive judging order learns from), and the round serves each query's pairs in `judging_order`."""
    import io
    import json

    from django.contrib.auth import get_user_model

    from judgments.lib.scales import GRADED
    from judgments.models import Project, Role, Round
    from judgments.ops import actions, rounds
    from judgments.ops.imports import import_corpus, import_queries, import_run
    from judgments.ops.pools import add_runs_to_pool, create_pool
    from tests.factory import trec_run

    users = get_user_model().objects
    old = Project.objects.filter(slug=SLUG).first()
    if old is not None:
        Round.objects.filter(project=old).delete()  # rounds protect their pool; drop them first
        old.delete()
    lead = users.filter(username="bench-lead").first() or users.create_user("bench-lead")
    # A round with an overlap share needs two raters, even when only one is simulated.
    raters = [users.filter(username=f"bench-rater-{i:02d}").first() or users.create_user(f"bench-rater-{i:02d}")
              for i in range(1, max(n_raters, 2) + 1)]
    project = actions.create_project(name="Grading bench", slug=SLUG, creator=lead)
    for rater in raters:
        actions.add_member(project, rater, Role.RATER)
    pairs = {f"q{q:04d}": [f"D{q:04d}-{d:03d}" for d in range(n_docs)] for q in range(n_queries)}
    corpus = "".join(json.dumps({"doc_id": doc, "title": f"Product {doc}", "body": "Warm and packable. " * 4}) + "\n"
                     for docs in pairs.values() for doc in docs)
    import_corpus(project, io.BytesIO(corpus.encode()), "docs.jsonl")
    # Without fresh statistics PostgreSQL links pool pairs to documents with a nested loop over the
    # whole corpus (about 25 s for 10,000 pairs), a pooling problem this benchmark does not measure.
    analyze("judgments_document")
    queries = "query_id,query\n" + "".join(f"{qid},query {qid}\n" for qid in pairs)
    collection, _ = import_queries(project, queries.encode(), "queries.csv", name="Bench queries")
    shuffle = random.Random(0)
    runs = [import_run(project, trec_run(pairs if r == 0 else {q: shuffle.sample(docs, len(docs)) for q, docs in pairs.items()}),
                       f"bench-{r}.run", name=f"Run {r}", system=f"Run {r}")[0] for r in range(n_runs)]
    pool = create_pool(project, name="Bench pool", query_set=collection, depth=n_docs, strategy="best_rank")
    add_runs_to_pool(pool, runs)
    guidelines, _ = actions.save_guidelines(project, "# Grade what the shopper wants", author=lead)
    round = rounds.create_round(project, name="Load", pool=pool, guidelines=guidelines, scale=GRADED, raters=raters,
                                overlap_share=0.15, judging_order=judging_order, user=lead)
    rounds.open_round(round)
    # A live server's tables have had statistics for a while; freshly loaded ones have none yet.
    analyze("judgments_rounditem", "judgments_judgment", "judgments_claim")
    return round, raters


def session_cookie(user) -> str:
    """A logged-in session, stored the way django.contrib.auth.login() stores one."""
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(seconds: float) -> dict:
    # Persistent connections that outlive the run, so that each PostgreSQL backend's CPU time is counted.
    return {**os.environ, "DATABASE_URL": DATABASE_URL, "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_CONN_MAX_AGE": str(int(seconds) + 120), "SECURE_SSL_REDIRECT": "false",
            "STATIC_ROOT": str(DATA / "static"), "MEDIA_ROOT": str(DATA / "media"), "LOG_LEVEL": "WARNING"}


def start_server(port: int, workers: int, threads: int, log: Path, seconds: float, ready_within: float = 30) -> subprocess.Popen:
    env = server_env(seconds)
    # With DEBUG off, {% static %} reads the manifest that collectstatic writes.
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
                   cwd=ROOT, env=env, check=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread",
         "--workers", str(workers), "--threads", str(threads), "--keep-alive", "10", "--error-logfile", str(log)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + ready_within
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"gunicorn exited with {server.returncode}; see {log}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    sys.exit(f"gunicorn did not answer on port {port} within {ready_within:.0f} s; see {log}")


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@dataclass
class Tally:
    """What the raters saw, shared by their threads (list.append and Counter updates under the lock)."""

    latencies: list = field(default_factory=list)  # seconds per acknowledged POST
    acks: list = field(default_factory=list)  # (rater pk, item uuid, grade) per HTTP 200
    # POSTs not acknowledged, by status (or exception: their outcome is unknown) -> count
    errors: Counter = field(default_factory=Counter)
    first_error: dict = field(default_factory=dict)
    ran_out: int = 0  # raters who were told nothing is left
    page_loads: int = 0
    page_errors: Counter = field(default_factory=Counter)  # the same for the GETs of the grading page
    lock: threading.Lock = field(default_factory=threading.Lock)


def item_of(body: bytes) -> str | None:
    """The pair in a #grader element ("" when nothing is left); None when there is no such element."""
    text = body.decode("utf-8", "replace")
    tag = GRADER.search(text)
    if tag is None:
        return None
    found = DATA_ITEM.search(tag.group(0))
    return found.group(1) if found else None


def rate(port: int, grade_url: str, rater_pk: int, sessionid: str, think: tuple[float, float], stop_at: float,
         seed: int, tally: Tally) -> None:
    rng = random.Random(seed)
    csrf = secrets.token_hex(16)  # a 32-character secret; Django accepts it unmasked in the header
    cookies = f"sessionid={sessionid}; csrftoken={csrf}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def exchange(errors: Counter, method: str, url: str, **request) -> tuple[http.client.HTTPResponse, bytes] | None:
        """Send a request on the keep-alive connection; on a network error count it and reconnect."""
        nonlocal conn
        try:
            conn.request(method, url, **request)
            response = conn.getresponse()
            return response, response.read()
        except (OSError, http.client.HTTPException) as exc:
            with tally.lock:
                errors[type(exc).__name__] += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            return None

    def load_page() -> str | None:
        answered = exchange(tally.page_errors, "GET", grade_url, headers={"Cookie": cookies})
        if answered is None:
            return None
        response, body = answered
        with tally.lock:
            tally.page_loads += 1
            if response.status != 200:
                tally.page_errors[response.status] += 1
                tally.first_error.setdefault(f"{response.status} (GET)", body[:300].decode("utf-8", "replace"))
        return item_of(body) if response.status == 200 else None

    item = load_page()
    while time.monotonic() < stop_at:
        if item is None:  # the page failed: try again after a pause, as a person would reload
            time.sleep(1)
            item = load_page()
            continue
        if item == "":
            with tally.lock:
                tally.ran_out += 1
            break
        if think[1] > 0:
            time.sleep(rng.uniform(*think))
            if time.monotonic() >= stop_at:
                break
        grade = rng.randint(0, 3)
        body = urllib.parse.urlencode({"grade": grade})
        headers = {"Cookie": cookies, "X-CSRFToken": csrf, "HX-Request": "true",
                   "Content-Type": "application/x-www-form-urlencoded"}
        start = time.perf_counter()
        answered = exchange(tally.errors, "POST", f"{grade_url}{item}/", body=body, headers=headers)
        if answered is None:
            item = load_page()
            continue
        response, answer = answered
        seconds = time.perf_counter() - start
        refusal = REFUSAL.search(answer) if response.status == 200 else None
        if refusal:  # htmx answers a refused grade with the same pair and the reason: not an acknowledgement
            with tally.lock:
                tally.errors["200 refused"] += 1
                tally.first_error.setdefault("200 refused", refusal.group(1).decode())
            item = load_page()
        elif response.status == 200:
            with tally.lock:
                tally.latencies.append(seconds)
                tally.acks.append((rater_pk, item, grade))
            item = item_of(answer)
        else:
            with tally.lock:
                tally.errors[response.status] += 1
                tally.first_error.setdefault(response.status, answer[:300].decode("utf-8", "replace"))
            item = load_page()
    conn.close()


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def cpu_of(pids) -> dict[int, float]:
    """CPU seconds (user + system) each live process has used so far, from /proc/<pid>/stat."""
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def server_processes(server: subprocess.Popen) -> tuple[list[int], list[int]]:
    """The gunicorn workers, and the PostgreSQL backends serving this database (not this process's)."""
    from django.db import connection

    workers = [int(pid) for pid in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
        backends = [pid for (pid,) in cursor.fetchall()]
    return workers, backends


def check_database(round, tally: Tally) -> dict:
    """Compare what the raters were told was saved with what the database holds."""
    from django.db import connection
    from django.db.models import Count, F

    from judgments.models import Judgment, RaterTotals, RoundItem, RoundTotals
    from judgments.ops import grading

    acked: dict = {}
    acked_twice = 0
    for rater, item, grade in tally.acks:
        acked_twice += (rater, item) in acked
        acked[(rater, item)] = grade
    stored = {(rater, str(item)): grade for rater, item, grade in
              Judgment.objects.filter(item__round=round).values_list("rater_id", "item__uuid", "grade")}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM (SELECT 1 FROM judgments_judgment j "
                       "JOIN judgments_rounditem i ON i.id = j.item_id WHERE i.round_id = %s "
                       "GROUP BY j.item_id, j.rater_id HAVING count(*) > 1) AS doubled", [round.pk])
        doubled = cursor.fetchone()[0]
    items = RoundItem.objects.filter(round=round).annotate(n=Count("judgments"))
    kept = RoundTotals.objects.filter(round=round).values("pairs", "complete", "done", "needed").first()
    return {
        "acknowledged": len(acked),
        "stored": len(stored),
        "lost": sum(1 for key in acked if key not in stored),
        "wrong_grade": sum(1 for key, grade in acked.items() if key in stored and stored[key] != grade),
        "unacknowledged": sum(1 for key in stored if key not in acked),
        "doubled": doubled,
        "served_twice": acked_twice,
        "n_judged_off": items.exclude(n_judged=F("n")).count(),
        "over_judged": items.filter(n__gt=F("required")).count(),
        "totals_off": int(kept != grading.round_totals(round)),  # the counts raters see, against the sums
        # the leads' counters (issue 19): each rater's kept totals and each pair's spread against the judgments
        "rater_totals_off": int(sorted(RaterTotals.objects.filter(round=round).values_list("rater", "judgments", "unrateable", "last_at"))
                                != sorted(tuple(row.values()) for row in grading.rater_totals(round))),
        "spreads_off": spreads_off(round),
    }


def spreads_off(round) -> int:
    """Pairs whose kept spread is not their highest grade minus their lowest (none without a grade)."""
    from judgments.models import Judgment

    grades: dict = {}
    for item, grade in Judgment.objects.filter(item__round=round, grade__isnull=False).values_list("item_id", "grade"):
        grades.setdefault(item, []).append(grade)
    return sum(1 for item, spread in round.items.values_list("pk", "spread")
               if spread != (max(grades[item]) - min(grades[item]) if item in grades else None))


def report(args, tally: Tally, elapsed: float, check: dict, cpu: dict) -> bool:
    ms = np.array(tally.latencies) * 1000
    n = len(ms)
    p50, p95, p99, top = np.percentile(ms, [50, 95, 99, 100]) if n else (float("nan"),) * 4
    failed = sum(tally.errors.values())
    # A stored grade nobody was told about is only allowed for a POST whose answer never came (or failed).
    in_flight_ok = check["unacknowledged"] <= failed
    data_ok = in_flight_ok and 0 == check["lost"] == check["wrong_grade"] == check["doubled"] == check["served_twice"] \
        == check["n_judged_off"] == check["over_judged"] == check["totals_off"] == check["rater_totals_off"] == check["spreads_off"]
    speed_ok = n > 0 and p95 <= TARGET_P95_MS
    think = "none (saturation)" if args.think[1] == 0 else f"uniform {args.think[0]:g}-{args.think[1]:g} s"
    errors = ", ".join(f"{count} x {status}" for status, count in tally.errors.most_common()) or "none"
    print(f"\n| grading load: {args.raters} raters, think time {think}, {args.seconds:g} s | measured | target |")
    print("|---|---:|---|")
    print(f"| server | gunicorn gthread {args.workers} x {args.threads}, PostgreSQL, loopback | |")
    print(f"| grades acknowledged (save grade + next pair) | {n:,} | |")
    print(f"| throughput | {n / elapsed:,.1f} grades/s | |")
    print(f"| latency p50 | {p50:.1f} ms | |")
    print(f"| latency p95 | {p95:.1f} ms | {'PASS' if speed_ok else 'FAIL'} (<= {TARGET_P95_MS:g} ms) |")
    print(f"| latency p99 | {p99:.1f} ms | |")
    print(f"| latency max | {top:.1f} ms | |")
    print(f"| failed requests | {errors} | |")
    if tally.page_errors:
        print(f"| failed page loads | {', '.join(f'{c} x {s}' for s, c in tally.page_errors.most_common())} | |")
    print(f"| lost / wrong grade / doubled | {check['lost']} / {check['wrong_grade']} / {check['doubled']} | "
          f"{'PASS' if data_ok else 'FAIL'} (0 / 0 / 0) |")
    print(f"| stored without acknowledgement | {check['unacknowledged']} (requests without an answer: {failed}) | |")
    print(f"| pairs with n_judged != judgments / judged beyond need | {check['n_judged_off']} / "
          f"{check['over_judged']} | |")
    print(f"| round totals kept (RoundTotals) differ from the sums over its pairs | "
          f"{'yes' if check['totals_off'] else 'no'} | |")
    print(f"| raters' kept totals (RaterTotals) / pairs' spreads differ from the judgments | "
          f"{'yes' if check['rater_totals_off'] else 'no'} / {check['spreads_off']} pairs | |")
    per_request = 1000 / max(n + failed + tally.page_loads, 1)
    print(f"| server CPU per request: gunicorn / PostgreSQL | {cpu['gunicorn'] * per_request:.1f} ms / "
          f"{cpu['postgres'] * per_request:.1f} ms | |")
    print(f"| machine CPU busy ({os.cpu_count()} cores) / of it this client | {cpu['busy']:.0%} / "
          f"{cpu['client'] / elapsed / os.cpu_count():.0%} | |")
    if cpu["busy_before"] > 0.1:
        print(f"\nThe machine was not idle before the run (CPU {cpu['busy_before']:.0%} busy): "
              "the latencies are pessimistic; the CPU per request is hardly affected.")
    if check["served_twice"]:
        print(f"\nA pair was served again to a rater who had judged it: {check['served_twice']} times.")
    if tally.ran_out:
        print(f"\n{tally.ran_out} rater(s) ran out of pairs before the end: use a bigger --queries.")
    for status, body in tally.first_error.items():
        print(f"\nfirst answer with status {status}:\n{body}")
    ok = speed_ok and data_ok
    print(f"\n{'PASS' if ok else 'FAIL'}: p95 {p95:.1f} ms (target <= {TARGET_P95_MS:g} ms), "
          f"{check['acknowledged']:,} acknowledged grades, {check['lost']} lost, {check['doubled']} doubled")
    return ok


def think_range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    low, high = float(low), float(high or low)
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError("think time is LOW-HIGH seconds, e.g. 0.5-1.5, or 0")
    return low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="how long the raters grade (default 60)")
    parser.add_argument("--raters", type=int, default=50, help="concurrent raters (default 50)")
    parser.add_argument("--think", type=think_range, default=(0.5, 1.5),
                        help="seconds a rater looks at a pair, LOW-HIGH uniform (default 0.5-1.5); 0 for none")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--queries", type=int, default=400, help="queries in the pool, 25 documents each (default 400)")
    parser.add_argument("--runs", type=int, default=1, help="runs pooled, each ranking every document (default 1)")
    parser.add_argument("--judging-order", default="pool", choices=["pool", "random", "mtf", "mmns"],
                        help="the round's judging order within a query (default pool)")
    args = parser.parse_args()
    # Sessions made here are signed, and their auth hash salted, with the key the server will use.
    os.environ["SECRET_KEY"] = secrets.token_urlsafe(50)
    setup_django()
    DATA.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    round, raters = fresh_round(args.queries, 25, args.raters, n_runs=args.runs, judging_order=args.judging_order)
    raters = raters[:args.raters]
    sessions = [session_cookie(rater) for rater in raters]
    print(f"set up {round.items.count():,} pairs from {args.runs} run(s), judging order {args.judging_order}, {args.raters} raters "
          f"in {time.perf_counter() - started:.1f} s")

    from django.db import connection

    connection.close()  # the server needs the connections more than this idle process does
    port = free_port()
    server = start_server(port, args.workers, args.threads, DATA / "grading-gunicorn.log", args.seconds)
    grade_url = f"/p/{SLUG}/rounds/{round.uuid}/grade/"
    tally = Tally()
    # Short GIL turns, so a rater thread whose answer has arrived takes its timestamp promptly.
    sys.setswitchinterval(0.0005)
    try:
        busy0, total0 = cpu_ticks()
        time.sleep(2)
        busy1, total1 = cpu_ticks()
        busy_before = (busy1 - busy0) / max(total1 - total0, 1)
        workers, backends = server_processes(server)
        server0 = cpu_of(workers + backends)
        busy0, total0 = cpu_ticks()
        client0 = time.process_time()
        begin = time.monotonic()
        stop_at = begin + args.seconds
        threads = [threading.Thread(target=rate, args=(port, grade_url, rater.pk, key, args.think, stop_at, i, tally))
                   for i, (rater, key) in enumerate(zip(raters, sessions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - begin
        client = time.process_time() - client0
        busy1, total1 = cpu_ticks()
        workers, backends = server_processes(server)
        used = {pid: seconds - server0.get(pid, 0) for pid, seconds in cpu_of(workers + backends).items()}
    finally:
        stop_server(server)
    cpu = {"gunicorn": sum(used.get(pid, 0) for pid in workers), "postgres": sum(used.get(pid, 0) for pid in backends),
           "client": client, "busy": (busy1 - busy0) / max(total1 - total0, 1), "busy_before": busy_before}
    check = check_database(round, tally)
    ok = report(args, tally, elapsed, check, cpu)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
