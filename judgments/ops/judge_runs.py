"""A judge run over many pairs, spread over every free worker.

The run's job (`run_judge_job`) splits the pairs to grade into chunks of JUDGE_CHUNK_PAIRS (`JobChunk`
rows: disjoint, so no pair is asked twice), queues a task per further chunk (`tasks.run_judge_chunks`) and then
takes chunks itself. Every worker that gets such a task takes chunks too, one at a time, each claimed by a
conditional UPDATE, until none is left; with the embedded broker's single worker, the job's own worker takes them
all, one after another, and the tasks find nothing left. The job then waits for the chunks other workers hold,
showing the pairs finished in all of them, takes back a chunk whose worker went silent for JOB_STALE_AFTER_SECONDS
(its pairs graded so far are kept and skipped), and sums their counts into the run's result
(`automatic.run_result`), with the same keys and outcome as a run in one process.

Every chunk's LLM judge asks through the same limiter (`rate_limits.for_run`): the endpoint's limits, and the
run's token budget counted over all chunks. Cancel is seen by every chunk within a fraction of a second (the
judge's check), which stops its requests in flight; a spent budget lets them finish. Chunks not started then are
marked cancelled.
"""

import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from .. import judges
from ..core import rate_limits
from ..core.queue import task
from ..models import Job, JobChunk, RoundJudge
from . import automatic
from .actions import ActionRefused
from .jobs import Heartbeat, JobCancelled, Progress, cancel_requested, job_kind, running_here

log = logging.getLogger(__name__)
WAIT = 0.5  # seconds between two looks at the other workers' chunks
REPORT_EVERY = 0.5
CANCEL_CHECK = 0.25  # seconds between two looks at the job's Cancel


def _run_key(job: Job) -> str:
    return f"{job.uuid}-{job.attempts}"


def split(job: Job, todo: list[int], size: int) -> list[JobChunk]:
    """The job's chunks, made anew (a job run again after its worker died plans again)."""
    job.chunks.all().delete()
    return JobChunk.objects.bulk_create(JobChunk(job=job, index=n, items=todo[start:start + size])
                                        for n, start in enumerate(range(0, len(todo), size)))


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(job: Job) -> JobChunk | None:
    """The job's next queued chunk, now this worker's; None when none is left."""
    while True:
        candidate = job.chunks.filter(state=JobChunk.State.QUEUED).order_by("index").values_list("pk", flat=True).first()
        if candidate is None:
            return None
        if JobChunk.objects.filter(pk=candidate, state=JobChunk.State.QUEUED).update(
                state=JobChunk.State.RUNNING, worker=_worker(), heartbeat_at=timezone.now(), done=0):
            return JobChunk.objects.get(pk=candidate)


def _stop_queued(job: Job) -> None:
    job.chunks.filter(state=JobChunk.State.QUEUED).update(state=JobChunk.State.CANCELLED)


def run_chunk(job: Job, judge: RoundJudge, grader: judges.Judge, chunk: JobChunk,
              limiter: rate_limits.RunLimiter | None, report: Callable[[], None] = lambda: None) -> None:
    """Grade a claimed chunk's pairs (those not graded since, by a worker that died holding it) and leave its counts;
    `report()` after each progress write."""
    kept = automatic.kept_among(judge, chunk.items, grader.describe())
    todo = [pk for pk in chunk.items if pk not in kept]
    row = JobChunk.objects.filter(pk=chunk.pk, state=JobChunk.State.RUNNING)
    last = 0.0

    def progress(n: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= REPORT_EVERY or n == len(todo):
            last = now
            row.update(done=len(chunk.items) - len(todo) + n, heartbeat_at=timezone.now())
            report()

    checked, cancelled = 0.0, False

    def cancel() -> bool:  # the judge asks after every answer: the database is asked at most every CANCEL_CHECK s
        nonlocal checked, cancelled
        if not cancelled and time.monotonic() - checked >= CANCEL_CHECK:
            checked = time.monotonic()
            cancelled = cancel_requested(job) or not running_here(job).exists()
        return cancelled

    error = ""
    verdicts: list[judges.Verdict] = []
    since = automatic.embed_counts(grader)  # the grader takes chunk after chunk: count this chunk's texts alone
    try:
        # A long wait (a 429's pause) must not look like a dead worker: the chunk's heartbeat is kept fresh apart.
        with Heartbeat(job, settings.JOB_STALE_AFTER_SECONDS / 4, name=f"heartbeat of chunk {chunk.pk}",
                       rows=lambda: JobChunk.objects.filter(pk=chunk.pk, state=JobChunk.State.RUNNING)):
            verdicts = automatic.grade_items(judge, grader, todo, progress=progress, cancel=cancel,
                                             held=lambda: bool(limiter and limiter.budget_reached))
    except ActionRefused as refusal:
        error = str(refusal)
    except JobCancelled:
        raise  # the job was taken away from this run: nothing of it is recorded any more
    except Exception as exc:
        log.exception("job %s: chunk %s failed", job.uuid, chunk.index)
        error = (f"An unexpected error ({type(exc).__name__}) stopped a part of the run on worker {_worker()}. Its log "
                 f"has the details under job {job.uuid}.")
    budget_reached = bool(limiter and limiter.budget_reached)
    if error or budget_reached:
        _stop_queued(job)
    # Pairs a worker that died holding this chunk had graded are kept, and counted apart from this worker's.
    row.update(state=JobChunk.State.DONE, done=len(chunk.items), error=error, heartbeat_at=timezone.now(),
               result={**automatic.tally(verdicts, grader, since), "budget_reached": budget_reached, "recovered": len(kept)})
    report()


def work(job: Job, judge: RoundJudge, grader: judges.Judge, limiter, report: Callable[[], None] = lambda: None) -> int:
    """Take the job's chunks one at a time until none is left, or the job is cancelled or taken away; how many."""
    taken = 0
    while not cancel_requested(job) and running_here(job).exists():
        chunk = claim(job)
        if chunk is None:
            break
        run_chunk(job, judge, grader, chunk, limiter, report)
        taken += 1
    return taken


def work_on(job_id: int) -> int:
    """A worker's share of a running judge run (the task `run_judge_chunks`): chunks taken, 0 when none was left."""
    job = Job.objects.select_related("project").filter(pk=job_id, state=Job.State.RUNNING, kind="run_judge").first()
    if job is None or not job.chunks.filter(state=JobChunk.State.QUEUED).exists():
        return 0
    judge = automatic.job_judge(job)
    try:
        grader = automatic.make_judge(judge)
    except ActionRefused:
        return 0  # the job's own worker made the same judge, and takes the chunks
    limiter = automatic.attach_limiter(judge, grader, _run_key(job), job.params.get("token_budget"))
    return work(job, judge, grader, limiter)


def run_in_chunks(job: Job, judge: RoundJudge, choice: "automatic.PairChoice", progress: Progress, *,
                  token_budget: int | None = None) -> dict:
    """The job's run (see the module docstring): its result as `automatic.run_result` says, and, when the token
    budget stopped it, ``ended`` ("stopped at the token budget: N tokens used")."""
    grader = automatic.make_judge(judge)
    chosen, kept, todo = automatic.pairs_to_grade(judge, choice, grader.describe())
    chunks = split(job, todo, settings.JUDGE_CHUNK_PAIRS)
    progress(0, len(todo), f"{judge.name}: {len(todo):,} pairs to grade in {len(chunks):,} chunks "
                           f"({len(kept):,} graded before)", milestone=True)
    for _ in chunks[1:]:
        task("judgments.tasks.run_judge_chunks").delay_on_commit(job.pk)
    limiter = automatic.attach_limiter(judge, grader, _run_key(job), token_budget)
    last = 0.0

    def report(force: bool = False) -> None:
        nonlocal last
        if force or time.monotonic() - last >= REPORT_EVERY:
            last = time.monotonic()
            done = job.chunks.aggregate(done=Sum("done"))["done"] or 0
            working = job.chunks.filter(state=JobChunk.State.RUNNING).values("worker").distinct().count()
            grading = f" ({working} worker{'s' if working != 1 else ''} grading)" if working else ""
            progress(done, len(todo), f"{judge.name}: {done:,} of {len(todo):,} pairs{grading}" + embedded())

    def embedded() -> str:  # a semantic judge's texts, over the chunks finished so far
        if judge.kind != "semantic":
            return ""
        parts = [result for result in job.chunks.exclude(result=None).values_list("result", flat=True) if result]
        return automatic.texts_said((sum(part.get("texts_embedded", 0) for part in parts),
                                     sum(part.get("texts_from_the_cache", 0) for part in parts)))

    stale_after = timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
    while True:
        work(job, judge, grader, limiter, report)
        if cancel_requested(job):
            _stop_queued(job)
        # A chunk whose worker went silent is queued again, and taken by this worker on the next pass.
        job.chunks.filter(state=JobChunk.State.RUNNING, heartbeat_at__lt=timezone.now() - stale_after).update(
            state=JobChunk.State.QUEUED)
        if not job.chunks.filter(state__in=(JobChunk.State.QUEUED, JobChunk.State.RUNNING)).exists():
            break
        report()
        time.sleep(WAIT)
    report(force=True)
    finished = list(job.chunks.exclude(state=JobChunk.State.CANCELLED))
    errors = [chunk.error for chunk in finished if chunk.error]
    if errors:
        raise ActionRefused(errors[0])
    result = automatic.run_result(judge, choice, len(chosen), len(kept), len(todo),
                                  [chunk.result for chunk in finished if chunk.result])
    if any(chunk.result and chunk.result.get("budget_reached") for chunk in finished):
        result["ended"] = automatic.budget_message(result["prompt_tokens"] + result["completion_tokens"])
        done = job.chunks.aggregate(done=Sum("done"))["done"] or 0
        progress(done, len(todo), result["ended"][:1].upper() + result["ended"][1:], milestone=True)
    if limiter is not None:
        limiter.store.forget(limiter.run_key)
    return result


@job_kind("run_judge", "Run an automatic judge", cancellable=True)
def run_judge_job(job: Job, progress: Progress) -> dict:
    """The run, split into chunks that every free worker takes (`run_in_chunks`)."""
    judge = automatic.job_judge(job)
    result = run_in_chunks(job, judge, automatic.PairChoice.parse(job.params["pairs"], job.params.get("seed", 0), judge=judge),
                           progress, token_budget=job.params.get("token_budget"))
    causes = automatic.describe_failures(result["failures"])
    if result["outcome"] == judges.base.FAILED:  # every pair asked failed: nothing to use, and the job says why
        raise ActionRefused(f"Every one of the {sum(result['failures'].values()):,} pairs it tried failed: {causes}. "
                            f"No pair was judged. {automatic.FAILURE_HELP}")
    problems = ", ".join(f"{n:,} {problem.replace('_', ' ')}" for problem, n in result["could_not_judge"].items())
    return {**{key: value for key, value in result.items() if key != "outcome"}, "could_not_judge": problems or "none",
            "link": judge.get_absolute_url()}
