"""Uploading a 7-million-line TREC run through the REST API and evaluating it, on PostgreSQL.

    .venv/bin/python benchmarks/api_upload.py [--queries 6980] [--depth 1000]

Case (targets from the API issue, on the 2-core machine): POST /api/v1/projects/{slug}/runs with a TREC run of
6,980 queries x 1,000 results (7.0 million lines, 226 MB) through Django's test client (multipart, spooled to a
temporary file as a server would), then POST .../evaluations (the default 20 measures against a round with
10,000 labels), the job run by a worker process, and the job polled until done     -> at most 30 s end to end,
the API process under 300 MB peak RSS.

The API process (upload and start) and the worker (the evaluation job) run in separate child processes, each
measuring its own peak RSS. The project and its round come from benchmarks/evaluate.py's cached build.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from bench_django import DATA, ROOT, setup_django

TARGET_SECONDS = 30.0
TARGET_API_MB = 300.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def api_file(n_queries: int, depth: int):
    """evaluate.py's run with another tag, so that its bytes are new to the project (not recognised as stored)."""
    import evaluate

    path = DATA / f"api_run_q{n_queries}_d{depth}.txt"
    if not path.exists():
        source = evaluate.run_file(n_queries, depth)
        with source.open("rb") as read, path.open("wb") as write:
            while block := read.read(16 << 20):
                write.write(block.replace(b" bench\n", b" api\n"))
    return path


def prepare(n_queries: int, depth: int) -> dict:
    """The project and round (built once), a lead's token, and no run or evaluation left from a previous go."""
    setup_django()
    import evaluate
    from api.models import ApiToken
    from evaluation.models import Evaluation
    from judgments.models import Job

    round, _run = evaluate.build(n_queries, depth)
    project = round.project
    Evaluation.objects.filter(project=project).delete()
    Job.objects.filter(project=project).delete()
    project.runs.filter(name="api run").delete()
    lead = project.memberships.filter(role="lead").first()
    if lead is None:
        from django.contrib.auth import get_user_model

        from judgments.models import Membership
        user = get_user_model().objects.get_or_create(username="bench-api-lead")[0]
        lead = Membership.objects.create(project=project, user=user, role="lead")
    _token, secret = ApiToken.issue(user=lead.user, project=project, name="bench", scope="write")
    api_file(n_queries, depth)
    return {"slug": project.slug, "round": str(round.uuid), "secret": secret}


def api_process(n_queries: int, depth: int, world: dict) -> dict:
    """Upload the run and start the evaluation, as a client would, in this process (the web process)."""
    setup_django()
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world['secret']}")
    base = f"/api/v1/projects/{world['slug']}"
    started = time.perf_counter()
    with api_file(n_queries, depth).open("rb") as handle:
        uploaded = client.post(f"{base}/runs", {"file": handle, "name": "api run"})
    upload_seconds = time.perf_counter() - started
    assert uploaded.status_code == 201, uploaded.content[:500]
    body = {"round": world["round"], "runs": [uploaded.json()["uuid"]]}
    evaluation = client.post(f"{base}/evaluations", json.dumps(body), content_type="application/json")
    assert evaluation.status_code == 202, evaluation.content[:500]
    return {"upload_seconds": upload_seconds, "start_seconds": time.perf_counter() - started - upload_seconds, "peak_mb": peak_mb(),
            "lines": uploaded.json()["n_lines"], "job": evaluation.json()["job"]["url"], "evaluation": evaluation.json()["url"]}


def worker_process() -> dict:
    """What the Celery worker does with the queued job (judgments.jobs.execute_job)."""
    setup_django()
    from judgments.jobs import execute_job
    from judgments.models import Job

    started = time.perf_counter()
    job = Job.objects.filter(state=Job.State.QUEUED, kind="evaluate_runs").order_by("created_at").last()
    finished = execute_job(job.pk)
    assert finished.state == Job.State.SUCCEEDED, finished.error
    return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb()}


def poll(world: dict, job_url: str, evaluation_url: str) -> dict:
    setup_django()
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world['secret']}")
    job = client.get(job_url).json()
    results = client.get(evaluation_url).json()["results"]["runs"][0]
    return {"state": job["state"], "ndcg10": results["mean"]["nDCG@10"], "queries": results["queries"]}


def in_child(*args: str) -> dict:
    result = subprocess.run([sys.executable, __file__, *args], cwd=ROOT / "benchmarks", capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{args[0]} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=6980)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--case", choices=("prepare", "api", "worker", "poll"), help=argparse.SUPPRESS)
    parser.add_argument("--world", help=argparse.SUPPRESS)
    options = parser.parse_args()
    sizes = ["--queries", str(options.queries), "--depth", str(options.depth)]
    if options.case:
        world = json.loads(options.world) if options.world else {}
        outcome = {"prepare": lambda: prepare(options.queries, options.depth), "api": lambda: api_process(options.queries, options.depth, world),
                   "worker": worker_process, "poll": lambda: poll(world, *world["urls"])}[options.case]()
        print(json.dumps(outcome))
        return
    world = in_child("--case", "prepare", *sizes)
    api = in_child("--case", "api", "--world", json.dumps(world), *sizes)
    worker = in_child("--case", "worker", *sizes)
    polled = in_child("--case", "poll", "--world", json.dumps(world | {"urls": [api["job"], api["evaluation"]]}), *sizes)
    total = api["upload_seconds"] + api["start_seconds"] + worker["seconds"]
    ok = total <= TARGET_SECONDS and api["peak_mb"] <= TARGET_API_MB and polled["state"] == "done"
    print(f"\n| {api['lines']:,}-line TREC run through the API | seconds | peak RSS | target |")
    print("|---|---:|---:|---|")
    print(f"| POST .../runs (multipart upload, validated, stored as Parquet) | {api['upload_seconds']:.1f} | {api['peak_mb']:,.0f} MB (API process) | < 300 MB |")
    print(f"| POST .../evaluations (202 with the job) | {api['start_seconds']:.2f} | | |")
    print(f"| the evaluation job in a worker process (20 measures, 10,000 labels) | {worker['seconds']:.1f} | {worker['peak_mb']:,.0f} MB (worker) | |")
    print(f"| **end to end** | **{total:.1f}** | | {'PASS' if ok else 'FAIL'} (<= 30 s) |")
    print(f"\njob {polled['state']}, nDCG@10 {polled['ndcg10']:.6f} over {polled['queries']:,} queries; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
