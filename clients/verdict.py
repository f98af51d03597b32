"""A client of Verdict's REST API (/api/v1/) with nothing beyond Python's standard library, and the CI gate.

As a module::

    from clients.verdict import Client
    client = Client("https://verdict.example.com", token)
    run = client.upload_run("shop-search", "runs/bm25.trec", name="bm25 2026-11-24")
    evaluation = client.evaluate("shop-search", "Launch round 1", ["baseline", run["uuid"]], ["nDCG@10"])
    client.download_qrels("shop-search", "Launch round 1", "qrels.txt")

As a command: ``python -m clients.verdict {upload-run,evaluate,compare,download-qrels,gate} --help``, or ``verdict``
installed from the wheel (``make wheel``; the module is then `verdict.verdict`). The token comes from ``--token`` or
the environment variable VERDICT_TOKEN, the server from ``--url`` or VERDICT_URL. Every command exits 2 when it cannot
do what it was asked (the server's refusal is printed); the gate exits 1 when a measure drops significantly, 3 when
none does but a measure has not enough evidence (too few queries differ for the tests to find a regression there;
``--allow-insufficient`` makes that 0), 0 otherwise, and writes its verdict as Markdown, JSON and JUnit XML on request,
a refusal's reason too. A server of another major.minor release than this client is warned about once.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


def _own_version() -> str | None:
    """This client's release: the engine's version, its one source. None for a copy of this file alone, which
    imports nothing of the repository it was copied into."""
    try:
        if __package__ == "verdict":  # installed from the wheel, beside verdict.engine
            from .engine import __version__
        elif __package__ == "clients":  # in a checkout of Verdict
            from evaluation.engine import __version__
        else:
            return None
    except ImportError:
        return None
    return __version__


__version__ = _own_version()
VERSION_HEADER = "X-Verdict-Version"
CHUNK_BYTES = 1 << 20
RETRY_STATUSES = (429, 503)
UNJUDGED_WARNING = 0.20  # the share of the candidate's top k without a label above which the list is stale for it
UUID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
WHOLE_RANKING_KEY = "all"


class VerdictError(Exception):
    """Anything that stops a request or a command; the message says what and why."""


class ApiError(VerdictError):
    """The server refused a request: its status, machine code and sentence (`{"detail", "code"}`)."""

    def __init__(self, method: str, url: str, status: int, code: str, detail: str):
        super().__init__(f"{method} {urllib.parse.urlsplit(url).path}: {status} {code}: {detail}")
        self.status, self.code, self.detail = status, code, detail


class JobFailed(VerdictError):
    """A job the server ran for us ended without a result."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Download:
    """What download_qrels did: `modified` False when the server answered 304 and the file was left as it was."""

    path: Path
    etag: str | None
    modified: bool


class MultipartBody:
    """A multipart/form-data body of text fields and one file, sent from the file in chunks (never read whole).
    It can be iterated more than once, so a retried request sends it again."""

    def __init__(self, fields: dict[str, str], file_field: str, path: str | os.PathLike, chunk_bytes: int = CHUNK_BYTES):
        self.path, self.chunk_bytes = Path(path), chunk_bytes
        self.boundary = uuid.uuid4().hex
        parts = [self._part_head(name, None) + str(value).encode() + b"\r\n" for name, value in fields.items() if value is not None]
        self.head = b"".join(parts) + self._part_head(file_field, self.path.name, "application/octet-stream")
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()
        self.size = len(self.head) + self.path.stat().st_size + len(self.tail)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def _part_head(self, name: str, filename: str | None, content_type: str | None = None) -> bytes:
        disposition = f'form-data; name="{_quoted(name)}"' + (f'; filename="{_quoted(filename)}"' if filename is not None else "")
        lines = [f"--{self.boundary}", f"Content-Disposition: {disposition}"] + ([f"Content-Type: {content_type}"] if content_type else [])
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        with self.path.open("rb") as handle:
            while chunk := handle.read(self.chunk_bytes):
                yield chunk
        yield self.tail


def _quoted(text: str) -> str:
    """A name inside a quoted header parameter: quotes and line breaks percent-encoded, as browsers send them."""
    return text.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def is_uuid(text: str) -> bool:
    return bool(UUID_PATTERN.match(text))


class Client:
    """Verdict's API at `url` with a personal access token. Requests time out after `timeout` seconds without a
    byte; a 429 or 503 is retried up to `retries` times after the Retry-After the server sends (at most
    `max_retry_wait` seconds each)."""

    def __init__(self, url: str, token: str, *, timeout: float = 300, retries: int = 5, max_retry_wait: float = 120,
                 sleep=time.sleep):
        if not url:
            raise VerdictError("Give the server's address (--url or VERDICT_URL).")
        if not token:
            raise VerdictError("Give an API token (--token or VERDICT_TOKEN).")
        self.base = url.rstrip("/") + "/"
        self.token, self.timeout, self.retries, self.max_retry_wait, self.sleep = token, timeout, retries, max_retry_wait, sleep
        self.server_version: str | None = None

    # ------------------------------------------------------------------------------------------ HTTP

    def url(self, path: str, query: dict | None = None) -> str:
        """An absolute URL: `path` under /api/v1/ unless it is already a path from the server (/api/...) or a URL."""
        if not path.startswith(("/", "http://", "https://")):
            path = "api/v1/" + path
        url = urllib.parse.urljoin(self.base, path)
        wanted = {key: value for key, value in (query or {}).items() if value is not None}
        return url + ("&" if "?" in url else "?") + urllib.parse.urlencode(wanted, doseq=True) if wanted else url

    def open(self, method: str, path: str, *, query: dict | None = None, body=None, headers: dict | None = None):
        """Send a request, retrying on 429/503; the open response (the caller reads and closes it)."""
        url = self.url(path, query)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=body, headers=headers, method=method)
            try:
                response = urllib.request.urlopen(request, timeout=self.timeout)
                self._note_server_version(response.headers)
                return response
            except urllib.error.HTTPError as error:
                self._note_server_version(error.headers)
                if error.code in RETRY_STATUSES and attempt < self.retries:
                    error.read()
                    error.close()
                    self.sleep(self._retry_wait(error.headers.get("Retry-After"), attempt))
                    continue
                if error.code == 304:
                    return error
                raise self._api_error(method, url, error) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                reason = getattr(error, "reason", error)
                raise VerdictError(f"{method} {url}: could not reach the server ({reason})") from None
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, **options) -> Response:
        with self.open(method, path, **options) as response:
            return Response(response.status, dict(response.headers.items()), response.read())

    def get(self, path: str, **query):
        return self.request("GET", path, query=query).json()

    def post_json(self, path: str, data: dict):
        return self.request("POST", path, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"}).json()

    def post_file(self, path: str, file: str | os.PathLike, fields: dict[str, str | None]):
        body = MultipartBody(fields, "file", file)
        headers = {"Content-Type": body.content_type, "Content-Length": str(body.size)}
        return self.request("POST", path, body=body, headers=headers).json()

    def items(self, path: str, **query) -> Iterator[dict]:
        """Every item of a list, following its `next` links."""
        page = self.get(path, **query)
        while True:
            yield from page["items"]
            if not page.get("next"):
                return
            page = self.get(page["next"])

    def _note_server_version(self, headers) -> None:
        """Warn once, on stderr, when the server's release differs from this client's in major.minor (fields may
        have come or gone between them); a different patch release, or a server that does not say, is fine."""
        server = headers.get(VERSION_HEADER)
        if not server or self.server_version is not None:
            return
        self.server_version = server
        if __version__ and _major_minor(server) != _major_minor(__version__):
            print(f"verdict: warning: the server runs Verdict {server} and this client is {__version__}: if a command "
                  f"fails on the server's answer, install the client of the server's release", file=sys.stderr)

    def _retry_wait(self, retry_after: str | None, attempt: int) -> float:
        try:
            seconds = float(retry_after)
        except (TypeError, ValueError):  # absent, or an HTTP date: back off instead
            seconds = 2.0 ** attempt
        return min(max(seconds, 0.0), self.max_retry_wait)

    @staticmethod
    def _api_error(method: str, url: str, error: urllib.error.HTTPError) -> ApiError:
        raw = error.read()
        error.close()
        try:
            answer = json.loads(raw)
            detail, code = str(answer["detail"]), str(answer.get("code") or "error")
        except (ValueError, KeyError, TypeError):
            detail, code = raw.decode("utf-8", "replace").strip()[:300] or error.reason, "error"
        return ApiError(method, url, error.code, code, detail)

    # --------------------------------------------------------------------------------------- objects

    def _by_name_or_uuid(self, project: str, kind: str, ref: str) -> dict:
        """A run or round of the project named `ref`, or with `ref` as its UUID."""
        label = kind.rstrip("s")
        if is_uuid(ref):
            try:
                return self.get(f"projects/{project}/{kind}/{ref}")
            except ApiError as error:
                if error.status != 404:
                    raise
                raise VerdictError(f"No {label} with the id {ref} in project {project}.") from None
        found = next(iter(self.get(f"projects/{project}/{kind}", name=ref)["items"]), None)
        if found is None:
            raise VerdictError(f"No {label} named {ref!r} in project {project}.")
        return found

    def run(self, project: str, ref: str) -> dict:
        """A stored run by name or UUID."""
        return self._by_name_or_uuid(project, "runs", ref)

    def round(self, project: str, ref: str) -> dict:
        """A round by name or UUID."""
        return self._by_name_or_uuid(project, "rounds", ref)

    def check_measures(self, project: str, measures: Iterable[str]) -> list[str]:
        """The measures' canonical names, read as an evaluation reads them; ApiError (400) naming an unknown one."""
        return self.get(f"projects/{project}/measures", name=list(measures))["measures"]

    def version(self, project: str, round_ref: str, number: int) -> dict:
        """Published version `number` of a round's judgment list."""
        round = self.round(project, round_ref)
        found = next((v for v in self.items(f"projects/{project}/versions", round=round["uuid"]) if v["number"] == number), None)
        if found is None:
            raise VerdictError(f"Round {round['name']!r} has no published version {number}.")
        return found

    def upload_run(self, project: str, path: str | os.PathLike, *, name: str | None = None, format: str | None = None,
                   origin: str | None = None) -> dict:
        """Store a run file (TREC, JSON or Parquet; streamed from disk). The server refuses a bad file naming its line.
        `origin` "gate" marks a CI gate's upload, which the project's retention setting removes after its days."""
        path = Path(path)
        if not path.is_file():
            raise VerdictError(f"{path}: no such file")
        return self.post_file(f"projects/{project}/runs", path, {"name": name or path.stem, "format": format, "origin": origin})

    def start_evaluation(self, project: str, round: str, runs: Iterable[str], measures: Iterable[str], *,
                         version: int | None = None, **options) -> dict:
        """Queue an evaluation of stored runs (names or UUIDs; the first is the baseline) on a round (name or
        UUID), or on its published list `version`. `options`: relevance_level, all_queries, judged_only,
        resamples, seed. Returns the server's answer: the evaluation's uuid and its job."""
        body = {"round": self.round(project, round)["uuid"], "version": version,
                "runs": [self.run(project, ref)["uuid"] for ref in runs], "measures": list(measures), **options}
        return self.post_json(f"projects/{project}/evaluations", body)

    def wait_for_job(self, project: str, job: dict, *, timeout: float = 3600, poll: float = 0.5, max_poll: float = 5.0) -> dict:
        """Poll a job until it ends, every `poll` seconds growing to `max_poll`; JobFailed when it fails or is
        cancelled, VerdictError after `timeout` s. A job that finished with failures has ended: its answer (with
        ``failures``, cause -> count) is returned."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.get(job.get("url") or f"projects/{project}/jobs/{job['uuid']}")
            if state["state"] in ("done", "succeeded", "finished_with_failures"):
                return state
            if state["state"] in ("failed", "cancelled"):
                raise JobFailed(f"The server's {state.get('kind') or 'job'} {state['state']}: {state.get('message') or 'no reason given'}")
            if time.monotonic() > deadline:
                raise VerdictError(f"The job {job['uuid']} has not ended after {timeout:.0f} s (it is {state['state']}).")
            self.sleep(poll)
            poll = min(poll * 1.5, max_poll)

    def evaluation(self, project: str, evaluation: str) -> dict:
        return self.get(f"projects/{project}/evaluations/{evaluation}")

    def evaluate(self, project: str, round: str, runs: Iterable[str], measures: Iterable[str], *, version: int | None = None,
                 timeout: float = 3600, **options) -> dict:
        """Evaluate runs on a round (see start_evaluation), wait for the job and return the evaluation with its results."""
        started = self.start_evaluation(project, round, runs, measures, version=version, **options)
        self.wait_for_job(project, started["job"], timeout=timeout)
        return self.evaluation(project, started["uuid"])

    def compare(self, project: str, evaluation: str, *, baseline: str | None = None) -> dict:
        """An evaluation's comparison of every run with `baseline` (a run's name or UUID; the first run by default):
        the engine's paired tests with Holm's correction."""
        run_uuid = self.run(project, baseline)["uuid"] if baseline else None
        return self.get(f"projects/{project}/evaluations/{evaluation}/comparison", baseline=run_uuid)

    def download_qrels(self, project: str, round: str, path: str | os.PathLike, *, version: int | None = None,
                       format: str = "qrels", if_none_match: str | None = None) -> Download:
        """Write a round's judgment list (or its published `version`) to `path`, streamed. With `if_none_match`
        (the ETag of the copy at `path`), a list that has not changed is not downloaded again."""
        if version is None:
            source = f"projects/{project}/rounds/{self.round(project, round)['uuid']}/judgments.{format}"
        else:
            source = f"projects/{project}/versions/{self.version(project, round, version)['uuid']}/labels.{format}"
        path = Path(path)
        headers = {"If-None-Match": if_none_match} if if_none_match and path.exists() else {}
        with self.open("GET", source, headers={**headers, "Accept": "*/*"}) as response:
            etag = response.headers.get("ETag")
            if response.status == 304:
                return Download(path, etag or if_none_match, modified=False)
            partial = path.with_name(path.name + ".part")
            with partial.open("wb") as out:
                while chunk := response.read(CHUNK_BYTES):
                    out.write(chunk)
            partial.replace(path)
        return Download(path, etag, modified=True)


# ------------------------------------------------------------------------------------------------ gate


@dataclass
class GateRow:
    """One measure of the gate: the engine's comparison of the candidate (A) with the baseline (B), and the candidate's
    unjudged share at `depth` (an unjudged-share key: a cutoff, or the whole ranking)."""

    measure: str
    baseline: float | None
    candidate: float | None
    diff: float
    ci_low: float | None
    ci_high: float | None
    p_corrected: float
    unjudged: float | None
    verdict: str
    depth: str = WHOLE_RANKING_KEY
    reasons: list[str] = field(default_factory=list)  # the server's, when the verdict is not enough evidence


REGRESSION, IMPROVEMENT, SMALL_DROP, NO_CHANGE = "regression", "improvement", "drop within --max-drop", "no significant change"
NOT_ENOUGH = "not enough evidence"
# The gate's verdicts and the exit status of each (docs/engineers/ci-gate.md, "Exit codes"); REFUSED: it could not reach a verdict.
PASSED, FAILED, INSUFFICIENT, REFUSED = "pass", "fail", "insufficient", "refused"
EXIT_CODES = {PASSED: 0, FAILED: 1, REFUSED: 2, INSUFFICIENT: 3}


def verdict_of(comparison: dict, *, max_drop: float, alpha: float) -> str:
    """What one comparison says: a regression drops by more than `max_drop` with a Holm-corrected p below `alpha`.
    When the server's verdict (the comparison endpoint's `verdict`) is "insufficient", so few queries differ that
    the test could not have found a difference at 0.05 after Holm's correction: not enough evidence, not "no change"."""
    diff, p = comparison["diff"], comparison["p_corrected"]
    if (comparison.get("verdict") or {}).get("state") == "insufficient":
        return NOT_ENOUGH
    if p is None or not p < alpha or diff == 0:
        return NO_CHANGE
    if diff > 0:
        return IMPROVEMENT
    return REGRESSION if -diff > max_drop else SMALL_DROP


def unjudged_key(measure: str, *, pool_depth: int | None = None, reported: Iterable[str] = ()) -> str:
    """The depth at which the candidate's unjudged share speaks for a measure: its cutoff (nDCG@10 -> "10"). A measure
    without one (AP, RR, R-prec) reads the whole ranking, but below the pool's depth every run's documents are unjudged
    by design, so that share only says the run is deeper than the pool: it is read at the pool's depth instead (the
    deepest reported cutoff within it). The whole ranking only when the server does not say the pool's depth."""
    found = re.search(r"@(\d+)$", measure)
    if found:
        return found.group(1)
    within = [int(key) for key in reported if key.isdigit() and pool_depth and int(key) <= pool_depth]
    return str(max(within)) if within else WHOLE_RANKING_KEY


def gate_rows(evaluation: dict, candidate: str, *, max_drop: float, alpha: float, verdicts: dict[str, dict] | None = None,
              pool_depth: int | None = None) -> list[GateRow]:
    """The gate's rows from an evaluation of [baseline, candidate]: its stored comparisons (with `verdicts`, the
    comparison endpoint's verdict of each measure), and the candidate's unjudged share at each measure's depth."""
    results = evaluation["results"]
    comparisons = results.get("comparisons", {}).get(candidate)
    if comparisons is None:
        raise VerdictError(f"The evaluation has no comparison of {candidate!r} with its baseline.")
    verdicts = verdicts or {}
    unjudged = next(row for row in results["runs"] if row["run"] == candidate).get("unjudged") or {}
    rows = []
    for c in comparisons:
        server = verdicts.get(c["measure"])
        depth = unjudged_key(c["measure"], pool_depth=pool_depth, reported=unjudged)
        share = (unjudged.get(depth) or {}).get("share")
        rows.append(GateRow(c["measure"], c["B_mean"], c["A_mean"], c["diff"], c.get("ci_low"), c.get("ci_high"), c["p_corrected"],
                            share, verdict_of(c | ({"verdict": server} if server else {}), max_drop=max_drop, alpha=alpha), depth,
                            list((server or {}).get("reasons") or [])))
    return rows


def labels_line(evaluation: dict) -> str:
    """Where the labels the gate judged on came from, from the evaluation's `labels_source`, `judge`,
    `judge_labels`, `labels` and `judge_label_share`: the raters' alone, or filled by an automatic judge."""
    source = evaluation.get("labels_source")
    if source == "human":
        labels = evaluation.get("labels")
        return "Labels: raters' labels only" + (f" ({labels:,} labels)." if labels is not None else ".")
    if source == "judge_filled":
        judge, share = evaluation.get("judge") or "an automatic judge", evaluation.get("judge_label_share")
        if share is None:
            return (f"Labels: judge-filled by {judge} (share not recorded): the scores rest partly on an automatic "
                    f"judge's labels.")
        counts = f" ({evaluation['judge_labels']:,} of {evaluation['labels']:,})" if evaluation.get("labels") else ""
        percent = "under 1%" if 0 < share < 0.005 else "over 99%" if 0.995 <= share < 1 else f"{share:.0%}"
        return (f"Labels: judge-filled: {percent} of labels{counts} from {judge}: the scores rest partly on an automatic "
                f"judge's labels.")
    return "Labels: the server did not say where they came from (a server older than labels_source)."


LABEL_FIELDS = ("labels_source", "judge", "labels", "judge_labels", "judge_label_share")


def unjudged_warnings(rows: list[GateRow], candidate: str) -> list[str]:
    return [f"{row.unjudged:.0%} of {candidate}'s documents in {_depth(row)} have no label (over "
            f"{UNJUDGED_WARNING:.0%}): {row.measure} is judged against a stale list; judge them before trusting it."
            for row in rows if row.unjudged is not None and row.unjudged > UNJUDGED_WARNING]


def _depth(row: GateRow) -> str:
    if row.depth == WHOLE_RANKING_KEY:
        return "the whole ranking"
    return f"the top {row.depth}" + ("" if row.measure.endswith(f"@{row.depth}") else " (the pool's depth)")


def _number(value: float | None, digits: int = 4, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}" if value >= 0.0001 else f"{value:.1e}"


TABLE_HEADER = ("measure", "baseline", "candidate", "diff", "95% CI of diff", "p (Holm)", "unjudged", "verdict")


def table_cells(row: GateRow) -> tuple[str, ...]:
    ci = f"[{_number(row.ci_low, signed=True)}, {_number(row.ci_high, signed=True)}]"
    unjudged = "–" if row.unjudged is None else f"{row.unjudged:.1%}"
    return (row.measure, _number(row.baseline), _number(row.candidate), _number(row.diff, signed=True), ci, _p(row.p_corrected),
            unjudged, row.verdict)


def text_table(rows: list[GateRow]) -> str:
    lines = [TABLE_HEADER, *map(table_cells, rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(TABLE_HEADER))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines)


@dataclass
class GateReport:
    """What the gate found, for each of its outputs (text, Markdown, JSON, JUnit): the verdict (PASSED, FAILED,
    INSUFFICIENT, or REFUSED when it could not reach one), its reasons, and the rows it decided on."""

    verdict: str
    reasons: list[str]
    baseline: str
    candidate: str
    list_name: str = ""
    max_drop: float = 0.01
    alpha: float = 0.05
    rows: list[GateRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    labels: str = ""
    label_fields: dict = field(default_factory=dict)  # the evaluation's LABEL_FIELDS
    allow_insufficient: bool = False

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == INSUFFICIENT and self.allow_insufficient else EXIT_CODES[self.verdict]


def decide(rows: list[GateRow], **report) -> GateReport:
    """The gate's verdict on its rows: a regression fails it; else a measure without enough evidence leaves it
    insufficient; else it passes."""
    regressions = [row for row in rows if row.verdict == REGRESSION]
    unproven = [row for row in rows if row.verdict == NOT_ENOUGH]
    if regressions:
        verdict, reasons = FAILED, [f"{row.measure}: significant regression of {_number(row.diff, signed=True)} (Holm-corrected "
                                    f"p {_p(row.p_corrected)}), more than --max-drop" for row in regressions]
    elif unproven:
        verdict, reasons = INSUFFICIENT, [f"{row.measure}: not enough evidence: {'; '.join(row.reasons) or 'too few queries differ'}"
                                          for row in unproven]
    else:
        verdict, reasons = PASSED, ["no significant regression"]
    return GateReport(verdict, reasons, rows=rows, **report)


def markdown_summary(report: GateReport) -> str:
    if report.verdict == REFUSED:
        return (f"### ❌ Verdict gate could not reach a verdict: {report.candidate} against {report.baseline}\n\n"
                + "".join(f"> {reason}\n" for reason in report.reasons))
    unproven = [row.measure for row in report.rows if row.verdict == NOT_ENOUGH]
    head = {FAILED: "❌ Verdict gate failed", INSUFFICIENT: f"⚠️ Verdict gate: not enough evidence on {', '.join(unproven)}",
            PASSED: "✅ Verdict gate passed"}[report.verdict]
    if not report.rows:  # the candidate had the baseline's bytes
        return f"### {head}: {report.reasons[0]}\n"
    marked = ("🤖 " if "judge-filled" in report.labels else "") + report.labels
    lines = [f"### {head}: {report.candidate} against {report.baseline}", "", *([marked, ""] if report.labels else []),
             (f"Judged on {report.list_name}; a regression is a drop of more than {report.max_drop:g} with a Holm-corrected p "
              f"below {report.alpha:g} (paired permutation test per measure; the unjudged column is the candidate's share of "
              f"documents without a label at the measure's cutoff, or within the pool's depth for a measure without one)."), "",
             "| " + " | ".join(TABLE_HEADER) + " |", "|---|" + "---:|" * 6 + "---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in table_cells(row)) + " |" for row in report.rows]
    lines += [""] + [f"> ⚠️ {warning}" for warning in report.warnings]
    return "\n".join(lines).rstrip() + "\n"


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def json_report(report: GateReport) -> str:
    """The gate's outcome for machines: `verdict` (pass, fail, insufficient, refused), `exit_code`, `reasons`, the
    measures' `rows`, the `labels` the verdict rests on and the unjudged-share `warnings`."""
    rows = [{"measure": row.measure, "baseline": _finite(row.baseline), "candidate": _finite(row.candidate), "diff": _finite(row.diff),
             "ci_low": _finite(row.ci_low), "ci_high": _finite(row.ci_high), "p_corrected": _finite(row.p_corrected),
             "unjudged": _finite(row.unjudged), "unjudged_depth": row.depth, "verdict": row.verdict, "reasons": row.reasons}
            for row in report.rows]
    document = {"verdict": report.verdict, "exit_code": report.exit_code, "reasons": report.reasons, "baseline": report.baseline,
                "candidate": report.candidate, "list": report.list_name, "max_drop": report.max_drop, "alpha": report.alpha,
                "labels": {"summary": report.labels, **report.label_fields}, "rows": rows, "warnings": report.warnings,
                "client_version": __version__}
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def junit_report(report: GateReport) -> str:
    """JUnit XML for CI test reports: one test case per measure, failed on a regression, skipped on not enough
    evidence; when the gate could not reach a verdict, one test case "gate" in error with the reason."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name=f"verdict gate: {report.candidate} against {report.baseline}")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("list", report.list_name), ("labels", report.labels), ("max_drop", f"{report.max_drop:g}"),
                        ("alpha", f"{report.alpha:g}")):
        ET.SubElement(properties, "property", name=name, value=value)
    if report.verdict == REFUSED:
        case = ET.SubElement(suite, "testcase", classname="verdict.gate", name="gate")
        ET.SubElement(case, "error", message=report.reasons[0], type=REFUSED).text = "\n".join(report.reasons)
    for row in report.rows:
        case = ET.SubElement(suite, "testcase", classname="verdict.gate", name=row.measure)
        detail = "  ".join(f"{name}: {cell}" for name, cell in zip(TABLE_HEADER[1:], table_cells(row)[1:]))
        if row.verdict == REGRESSION:
            ET.SubElement(case, "failure", message=f"{row.measure}: {row.verdict}", type=REGRESSION).text = detail
        elif row.verdict == NOT_ENOUGH:
            ET.SubElement(case, "skipped", message=f"{row.measure}: {NOT_ENOUGH}: {'; '.join(row.reasons)}")
        else:
            ET.SubElement(case, "system-out").text = detail
    cases = suite.findall("testcase")
    counts = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
              "errors": sum(c.find("error") is not None for c in cases), "skipped": sum(c.find("skipped") is not None for c in cases)}
    suite.attrib.update({key: str(value) for key, value in counts.items()})
    if report.warnings:
        ET.SubElement(suite, "system-err").text = "\n".join(f"warning: {warning}" for warning in report.warnings)
    root = ET.Element("testsuites", name="verdict gate", **{key: str(value) for key, value in counts.items()})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@dataclass
class GateOutputs:
    """The files the gate writes besides its text: each given path gets its format, on a refusal too."""

    markdown: str | None = None
    json: str | None = None
    junit: str | None = None

    def write(self, report: GateReport) -> None:
        for path, render in ((self.markdown, markdown_summary), (self.json, json_report), (self.junit, junit_report)):
            if path:
                Path(path).write_text(render(report), encoding="utf-8")

    @contextmanager
    def on_refusal(self, baseline: str, candidate: str, **report):
        """Write the refusal (the error's sentence as the reason) to every output before the error goes on."""
        try:
            yield
        except VerdictError as error:
            self.write(GateReport(REFUSED, [str(error)], baseline, candidate, **report))
            raise


def gate(client: Client, *, project: str, round: str, baseline: str, run_file: str, measures: list[str], name: str | None = None,
         version: int | None = None, max_drop: float = 0.01, alpha: float = 0.05, outputs: GateOutputs | None = None,
         timeout: float = 3600, allow_insufficient: bool = False, out=sys.stdout, err=sys.stderr) -> int:
    """Upload the candidate run (as a gate upload: the project's retention applies), evaluate it with the baseline,
    compare, report; exit status 1 on a regression, 3 when no measure regresses but one has not enough evidence (0 with
    `allow_insufficient`), 0 otherwise. Each of `outputs` is written, on a refusal too (then VerdictError goes on)."""
    outputs = outputs or GateOutputs()
    settings = {"max_drop": max_drop, "alpha": alpha, "allow_insufficient": allow_insufficient}
    with outputs.on_refusal(baseline, name or run_file, **settings):
        report = _gate_report(client, project=project, round=round, baseline=baseline, run_file=run_file, measures=measures,
                              name=name, version=version, timeout=timeout, err=err, **settings)
    if report.rows:
        print(f"{report.candidate} against {report.baseline} on {report.list_name}\n{report.labels}\n\n{text_table(report.rows)}\n",
              file=out)
    for warning in report.warnings:
        print(f"warning: {warning}", file=err)
    outputs.write(report)
    print(_last_line(report), file=out)
    return report.exit_code


def _gate_report(client: Client, *, project: str, round: str, baseline: str, run_file: str, measures: list[str], name: str | None,
                 version: int | None, timeout: float, err, **settings) -> GateReport:
    if not 0 < settings["alpha"] < 1:
        raise VerdictError(f"--alpha {settings['alpha']:g}: give a level between 0 and 1.")
    if settings["max_drop"] < 0:
        raise VerdictError(f"--max-drop {settings['max_drop']:g}: give a drop of 0 or more.")
    if not Path(run_file).is_file():
        raise VerdictError(f"--run {run_file}: no such file.")
    target = client.round(project, round)
    list_name = f"round {target['name']!r}" + (f", version {version}" if version is not None else "")
    if version is not None:
        client.version(project, target["uuid"], version)
    base = client.run(project, baseline)
    client.check_measures(project, measures)  # before the upload: a misspelt measure leaves nothing stored
    candidate = client.upload_run(project, run_file, name=name or default_run_name(run_file), origin="gate")
    print(f"Uploaded {run_file} as run {candidate['name']!r} ({candidate.get('n_queries', '?')} queries).", file=err)
    names = {"baseline": base["name"], "candidate": candidate["name"], "list_name": list_name, **settings}
    if candidate["uuid"] == base["uuid"]:  # the server keeps one copy of the same bytes, under the first name
        return GateReport(PASSED, [f"{run_file} has the bytes of the baseline {base['name']!r}: nothing changed"], **names)
    evaluation = client.evaluate(project, target["uuid"], [base["uuid"], candidate["uuid"]], measures, version=version, timeout=timeout)
    compared = client.compare(project, evaluation["uuid"])["rows"]
    verdicts = {row["measure"]: row["verdict"] for row in compared if row["candidate"] == candidate["name"] and "verdict" in row}
    rows = gate_rows(evaluation, candidate["name"], max_drop=settings["max_drop"], alpha=settings["alpha"], verdicts=verdicts,
                     pool_depth=target.get("pool_depth"))
    warnings = unjudged_warnings(rows, candidate["name"]) + [f"{row.measure}: {NOT_ENOUGH}: {'; '.join(row.reasons)}"
                                                             for row in rows if row.verdict == NOT_ENOUGH]
    return decide(rows, warnings=warnings, labels=labels_line(evaluation),
                  label_fields={key: evaluation.get(key) for key in LABEL_FIELDS}, **names)


def _last_line(report: GateReport) -> str:
    if report.verdict == FAILED:
        return f"FAIL: significant regression on {', '.join(row.measure for row in report.rows if row.verdict == REGRESSION)}"
    if report.verdict == INSUFFICIENT:
        unproven = ", ".join(row.measure for row in report.rows if row.verdict == NOT_ENOUGH)
        return (f"NOT ENOUGH EVIDENCE on {unproven}: too few queries differ for the tests to find a regression there "
                f"({'allowed by --allow-insufficient' if report.allow_insufficient else 'exit 3'}); no significant regression "
                f"elsewhere")
    return f"PASS: {report.reasons[0]}"


def default_run_name(run_file: str) -> str:
    """A run name for a CI upload: the file's stem, the commit when CI says which, and the time (run names are unique)."""
    commit = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA") or ""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return " ".join(part for part in (Path(run_file).stem, commit[:8], stamp) if part)


# -------------------------------------------------------------------------------------------- commands


def _client(options) -> Client:
    return Client(options.url, options.token, timeout=options.timeout)


def cmd_upload_run(options) -> int:
    print(json.dumps(_client(options).upload_run(options.project, options.file, name=options.name, format=options.format), indent=2))
    return 0


def cmd_evaluate(options) -> int:
    evaluation = _client(options).evaluate(options.project, options.round, options.runs, options.measures, version=options.version,
                                           timeout=options.wait)
    print(json.dumps(evaluation, indent=2))
    return 0


def cmd_compare(options) -> int:
    print(json.dumps(_client(options).compare(options.project, options.evaluation, baseline=options.baseline), indent=2))
    return 0


def cmd_download_qrels(options) -> int:
    output = Path(options.output)
    etag_file = output.with_name(output.name + ".etag")
    etag = options.if_none_match
    if etag == "stored":
        etag = etag_file.read_text().strip() if etag_file.exists() else None
    download = _client(options).download_qrels(options.project, options.round, output, version=options.version,
                                               format=options.format, if_none_match=etag)
    if download.etag:
        etag_file.write_text(download.etag + "\n")
    print(f"{output}: {'downloaded' if download.modified else 'not modified'} (ETag {download.etag or 'none'})")
    return 0


def cmd_gate(options) -> int:
    outputs = GateOutputs(options.markdown, options.json, options.junit)
    with outputs.on_refusal(options.baseline, options.name or options.run, max_drop=options.max_drop, alpha=options.alpha):
        client = _client(options)  # no URL or token: a refusal the pull request's comment should show too
    return gate(client, project=options.project, round=options.round, baseline=options.baseline, run_file=options.run,
                measures=options.measures, name=options.name, version=options.version, max_drop=options.max_drop,
                alpha=options.alpha, outputs=outputs, timeout=options.wait, allow_insufficient=options.allow_insufficient)


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("VERDICT_URL"), help="the server, e.g. https://verdict.example.com (VERDICT_URL)")
    common.add_argument("--token", default=os.environ.get("VERDICT_TOKEN"), help="a personal access token (VERDICT_TOKEN)")
    common.add_argument("--project", required=True, help="the project's slug")
    common.add_argument("--timeout", type=float, default=300, help="seconds without an answer before a request fails (300: the server imports an upload before it answers)")
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait", type=float, default=3600, help="seconds to wait for the evaluation job (3600)")
    main = argparse.ArgumentParser(description="Verdict's API from the command line.")
    main.add_argument("--version", action="version", version=f"verdict {__version__ or 'unknown (a copy of clients/verdict.py)'}")
    commands = main.add_subparsers(dest="command", required=True)

    upload = commands.add_parser("upload-run", parents=[common], help="store a run file (TREC, JSON or Parquet)")
    upload.add_argument("file")
    upload.add_argument("--name", help="the run's name (the file's stem)")
    upload.add_argument("--format", choices=("trec", "json", "parquet"), help="the file's format (guessed by the server)")
    upload.set_defaults(handle=cmd_upload_run)

    evaluate = commands.add_parser("evaluate", parents=[common, waiting], help="evaluate stored runs on a round; print the results")
    evaluate.add_argument("--round", required=True, help="the round's name or UUID")
    evaluate.add_argument("--version", type=int, help="a published version of the round's list (the round's labels now)")
    evaluate.add_argument("--run", dest="runs", action="append", required=True, help="a run's name or UUID (the first is the baseline)")
    evaluate.add_argument("--measure", dest="measures", action="append", required=True, help="e.g. nDCG@10, AP, P@5")
    evaluate.set_defaults(handle=cmd_evaluate)

    compare = commands.add_parser("compare", parents=[common], help="an evaluation's runs against a baseline (paired tests, Holm)")
    compare.add_argument("--evaluation", required=True, help="the evaluation's UUID")
    compare.add_argument("--baseline", help="a run's name or UUID (the evaluation's first run)")
    compare.set_defaults(handle=cmd_compare)

    download = commands.add_parser("download-qrels", parents=[common], help="download a round's judgment list")
    download.add_argument("--round", required=True, help="the round's name or UUID")
    download.add_argument("--version", type=int, help="a published version of the list (the round's labels now)")
    download.add_argument("--format", choices=("qrels", "json", "csv"), default="qrels")
    download.add_argument("--output", "-o", required=True, help="where to write it (its ETag goes to OUTPUT.etag)")
    download.add_argument("--if-none-match", nargs="?", const="stored", metavar="ETAG",
                          help="skip the download when the list still has this ETag (alone: the one in OUTPUT.etag)")
    download.set_defaults(handle=cmd_download_qrels)

    gate_ = commands.add_parser("gate", parents=[common, waiting],
                                help="CI gate: upload a run, compare it with a baseline, exit 1 on a significant regression, "
                                     "3 on not enough evidence")
    gate_.add_argument("--round", required=True, help="the round's name or UUID")
    gate_.add_argument("--version", type=int, help="pin a published version of the round's list")
    gate_.add_argument("--baseline", required=True, help="the stored baseline run's name or UUID")
    gate_.add_argument("--run", required=True, help="the candidate's run file")
    gate_.add_argument("--name", help="the candidate's run name (file stem, commit and time)")
    gate_.add_argument("--measure", dest="measures", action="append", required=True, help="e.g. nDCG@10; repeat for more")
    gate_.add_argument("--max-drop", type=float, default=0.01, help="the largest drop tolerated (0.01)")
    gate_.add_argument("--alpha", type=float, default=0.05, help="significance level of the Holm-corrected p (0.05)")
    gate_.add_argument("--markdown", help="write a Markdown summary here (for a pull-request comment)")
    gate_.add_argument("--json", help="write the verdict, its reasons, the rows and the labels' source here as JSON")
    gate_.add_argument("--junit", help="write JUnit XML here: a test case per measure (failed: regression; skipped: not "
                                       "enough evidence)")
    gate_.add_argument("--allow-insufficient", action="store_true",
                       help="exit 0, not 3, when no measure regresses but one has not enough evidence")
    gate_.set_defaults(handle=cmd_gate)
    return main


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    try:
        return options.handle(options)
    except VerdictError as error:
        print(f"verdict: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
