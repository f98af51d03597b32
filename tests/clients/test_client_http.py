"""The client's HTTP layer against a scripted server on a loopback port: multipart bodies streamed from the file,
the API's JSON errors, retries on 429 after Retry-After, timeouts, ETag downloads. No Django here."""

import email.parser
import email.policy
import hashlib
import json
import threading
import time
import tracemalloc
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.etree import ElementTree

import pytest

from clients import verdict
from clients.verdict import ApiError, Client, MultipartBody, VerdictError, main

TOKEN = "vrd_test"


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, headers, body, delay); records what it received."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.replies: deque = deque()
        self.received: list[dict] = []
        self.keep_bodies = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reply(self, status=200, body: dict | bytes | None = None, headers: dict | None = None, delay: float = 0.0):
        raw = body if isinstance(body, bytes) else json.dumps(body if body is not None else {}).encode()
        self.replies.append((status, headers or {}, raw, delay))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        digest, kept, left = hashlib.sha256(), [], length
        while left:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                break
            digest.update(chunk)
            if self.server.keep_bodies:
                kept.append(chunk)
            left -= len(chunk)
        self.server.received.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                                     "body": b"".join(kept), "length": length, "sha256": digest.hexdigest()})
        status, headers, body, delay = self.server.replies.popleft() if self.server.replies else (200, {}, b"{}", 0.0)
        time.sleep(delay)
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up waiting (the timeout test)
            pass

    do_GET = do_POST = _answer


@pytest.fixture
def server():
    scripted = Scripted()
    thread = threading.Thread(target=scripted.serve_forever, daemon=True)
    thread.start()
    yield scripted
    scripted.shutdown()
    scripted.server_close()


def parse_multipart(headers: dict, body: bytes) -> dict:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode() + body)
    return {part.get_param("name", header="content-disposition"): (part.get_filename(), part.get_payload(decode=True))
            for part in message.iter_parts()}


def test_an_upload_is_a_multipart_body_with_the_fields_and_the_file(server, tmp_path):
    run = tmp_path / 'odd "name".trec'
    run.write_bytes(b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\n")
    server.reply(201, {"uuid": "u", "name": "bm25"})

    answer = Client(server.url, TOKEN).upload_run("shop", run, name="bm25", format="trec")

    assert answer == {"uuid": "u", "name": "bm25"}
    request = server.received[0]
    assert (request["method"], request["path"]) == ("POST", "/api/v1/projects/shop/runs")
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["length"] == len(request["body"])
    parts = parse_multipart(request["headers"], request["body"])
    assert parts["name"] == (None, b"bm25")
    assert parts["format"] == (None, b"trec")
    assert parts["file"] == ("odd %22name%22.trec", run.read_bytes())


def test_a_large_upload_is_streamed_from_the_file_not_read_whole(server, tmp_path, monkeypatch):
    big = tmp_path / "big.trec"
    with big.open("wb") as handle:
        for i in range(64):
            handle.write(bytes([i]) * (1 << 20))
    fixed = uuid.UUID(int=7)
    monkeypatch.setattr(verdict.uuid, "uuid4", lambda: fixed)
    expected = hashlib.sha256()
    for part in MultipartBody({"name": "big"}, "file", big):
        expected.update(part)
    server.keep_bodies = False
    server.reply(201, {"uuid": "u"})

    tracemalloc.start()
    Client(server.url, TOKEN).upload_run("shop", big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert server.received[0]["sha256"] == expected.hexdigest()
    assert peak < 8 << 20, f"the upload held {peak / 2**20:.0f} MB in memory"


def test_a_refusal_carries_the_servers_detail_and_code(server):
    server.reply(400, {"detail": "run.trec:3: expected 6 columns, found 4", "code": "bad_request"})

    with pytest.raises(ApiError) as refused:
        Client(server.url, TOKEN).get("projects/shop/runs")

    assert (refused.value.status, refused.value.code) == (400, "bad_request")
    assert refused.value.detail == "run.trec:3: expected 6 columns, found 4"
    assert str(refused.value) == "GET /api/v1/projects/shop/runs: 400 bad_request: run.trec:3: expected 6 columns, found 4"


def test_a_refusal_that_is_not_json_is_reported_as_text(server):
    server.reply(502, b"<html>Bad gateway</html>", headers={"Content-Type": "text/html"})

    with pytest.raises(ApiError, match="502 error: <html>Bad gateway</html>"):
        Client(server.url, TOKEN).get("projects")


def test_a_429_is_retried_after_its_retry_after_and_the_upload_is_sent_again_whole(server, tmp_path):
    run = tmp_path / "a.trec"
    run.write_bytes(b"q1 Q0 d1 1 2.0 sys\n")
    server.reply(429, {"detail": "More than 600 requests in a minute", "code": "rate_limited"}, headers={"Retry-After": "7"})
    server.reply(201, {"uuid": "u"})
    waits = []

    Client(server.url, TOKEN, sleep=waits.append).upload_run("shop", run)

    assert waits == [7.0]
    first, second = server.received
    assert first["length"] == second["length"] == len(second["body"])
    assert parse_multipart(second["headers"], second["body"])["file"][1] == run.read_bytes()


def test_it_gives_up_after_its_retries_with_the_rate_limit_message(server):
    for _ in range(3):
        server.reply(429, {"detail": "More than 600 requests in a minute", "code": "rate_limited"}, headers={"Retry-After": "500"})
    waits = []

    with pytest.raises(ApiError, match="429 rate_limited: More than 600"):
        Client(server.url, TOKEN, retries=2, max_retry_wait=30, sleep=waits.append).get("projects")

    assert waits == [30, 30]
    assert len(server.received) == 3


def test_a_server_that_does_not_answer_in_time_is_an_error(server):
    server.reply(200, {}, delay=2)

    started = time.monotonic()
    with pytest.raises(VerdictError, match="could not reach the server"):
        Client(server.url, TOKEN, timeout=0.3).get("projects")
    assert time.monotonic() - started < 1.5


def test_a_closed_port_is_an_error_naming_the_address():
    with pytest.raises(VerdictError, match=r"GET http://127.0.0.1:9/api/v1/projects: could not reach the server"):
        Client("http://127.0.0.1:9", TOKEN).get("projects")


def test_download_qrels_keeps_the_file_when_the_etag_still_matches(server, tmp_path):
    round = {"uuid": "0b7e5f7e-6d3c-4a56-9d7f-1f2a3b4c5d6e", "name": "R1"}
    output = tmp_path / "qrels.txt"
    server.reply(200, {"items": [round], "next": None})
    server.reply(200, b"q1 0 d1 2\n", headers={"ETag": '"abc"', "Content-Type": "text/plain"})
    server.reply(200, {"items": [round], "next": None})
    server.reply(304, b"", headers={"ETag": '"abc"'})

    assert main(["download-qrels", "--url", server.url, "--token", TOKEN, "--project", "shop", "--round", "R1", "-o", str(output)]) == 0
    assert output.read_bytes() == b"q1 0 d1 2\n"
    assert (tmp_path / "qrels.txt.etag").read_text() == '"abc"\n'
    output.write_bytes(b"kept")
    assert main(["download-qrels", "--url", server.url, "--token", TOKEN, "--project", "shop", "--round", "R1", "-o", str(output),
                 "--if-none-match"]) == 0

    assert output.read_bytes() == b"kept"
    assert server.received[1]["path"] == f"/api/v1/projects/shop/rounds/{round['uuid']}/judgments.qrels"
    assert "If-None-Match" not in server.received[1]["headers"]
    assert server.received[3]["headers"]["If-None-Match"] == '"abc"'
    assert server.received[2]["path"] == "/api/v1/projects/shop/rounds?name=R1"


def test_the_token_comes_from_the_environment(server, monkeypatch, capsys):
    monkeypatch.setenv("VERDICT_TOKEN", "vrd_from_env")
    server.reply(400, {"detail": "No such thing", "code": "bad_request"})

    code = main(["compare", "--url", server.url, "--project", "shop", "--evaluation", "0b7e5f7e-6d3c-4a56-9d7f-1f2a3b4c5d6e"])

    assert code == 2
    assert server.received[0]["headers"]["Authorization"] == "Bearer vrd_from_env"
    assert "verdict: error: GET /api/v1/projects/shop/evaluations/0b7e5f7e-6d3c-4a56-9d7f-1f2a3b4c5d6e/comparison: 400 bad_request: " \
           "No such thing" in capsys.readouterr().err


def test_a_command_without_a_token_says_so(monkeypatch, capsys):
    monkeypatch.delenv("VERDICT_TOKEN", raising=False)

    assert main(["compare", "--url", "http://127.0.0.1:9", "--project", "shop", "--evaluation", "x"]) == 2
    assert "Give an API token (--token or VERDICT_TOKEN)" in capsys.readouterr().err


def test_a_server_of_another_major_minor_release_is_warned_about_once_never_an_error(server, capsys):
    server.reply(200, {"items": [], "next": None}, headers={"X-Verdict-Version": "99.1.0"})
    server.reply(404, {"detail": "No such run", "code": "not_found"}, headers={"X-Verdict-Version": "99.1.0"})
    client = Client(server.url, TOKEN)

    assert client.get("projects/shop/runs") == {"items": [], "next": None}
    with pytest.raises(ApiError):
        client.get("projects/shop/runs/x")

    err = capsys.readouterr().err
    assert err.count("verdict: warning: the server runs Verdict 99.1.0 and this client is ") == 1, err
    assert f"this client is {verdict.__version__}:" in err


def test_a_server_of_the_same_major_minor_release_or_one_that_does_not_say_is_no_warning(server, capsys):
    major, minor, _ = verdict.__version__.split(".")
    server.reply(200, {}, headers={"X-Verdict-Version": f"{major}.{minor}.99"})
    server.reply(200, {})
    Client(server.url, TOKEN).get("projects")
    Client(server.url, TOKEN).get("projects")
    assert capsys.readouterr().err == ""


def test_the_gate_uploads_its_run_as_a_gate_run_and_writes_every_output_when_the_server_refuses(server, tmp_path, capsys):
    """A refusal after the upload (here the round is gone when the evaluation starts): exit 2, and the Markdown, JSON
    and JUnit files say why, so that a pull request's comment shows what went wrong."""
    run = tmp_path / "candidate.trec"
    run.write_bytes(b"q1 Q0 d1 1 2.0 sys\n")
    round_uuid, base_uuid, run_uuid = (str(uuid.uuid4()) for _ in range(3))
    server.reply(200, {"items": [{"uuid": round_uuid, "name": "R", "pool_depth": 10}], "next": None})
    server.reply(200, {"items": [{"uuid": base_uuid, "name": "base"}], "next": None})
    server.reply(200, {"measures": ["nDCG@10"]})
    server.reply(201, {"uuid": run_uuid, "name": "cand", "n_queries": 1})
    server.reply(404, {"detail": "No such round", "code": "not_found"})
    outputs = {kind: tmp_path / f"gate.{kind}" for kind in ("markdown", "json", "junit")}

    code = main(["gate", "--url", server.url, "--token", TOKEN, "--project", "shop", "--round", "R", "--baseline", "base",
                 "--run", str(run), "--name", "cand", "--measure", "nDCG@10", *(f"--{kind}={path}" for kind, path in outputs.items())])

    assert code == 2
    parts = parse_multipart(server.received[3]["headers"], server.received[3]["body"])
    assert parts["origin"] == (None, b"gate") and parts["name"] == (None, b"cand")
    reason = f"No round with the id {round_uuid} in project shop."
    assert f"verdict: error: {reason}" in capsys.readouterr().err
    assert outputs["markdown"].read_text() == f"### ❌ Verdict gate could not reach a verdict: cand against base\n\n> {reason}\n"
    report = json.loads(outputs["json"].read_text())
    assert (report["verdict"], report["exit_code"], report["reasons"], report["rows"]) == ("refused", 2, [reason], [])
    suite = ElementTree.parse(outputs["junit"]).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "1", "0")
    assert suite.find("testcase/error").get("message") == reason


def test_the_gate_without_a_token_writes_its_outputs_too(tmp_path, monkeypatch):
    monkeypatch.delenv("VERDICT_TOKEN", raising=False)
    summary = tmp_path / "summary.md"

    code = main(["gate", "--url", "http://127.0.0.1:9", "--project", "shop", "--round", "R", "--baseline", "base",
                 "--run", str(tmp_path / "missing.trec"), "--measure", "AP", "--markdown", str(summary)])

    assert code == 2
    assert "> Give an API token (--token or VERDICT_TOKEN)." in summary.read_text()
