"""Against a real gunicorn: a 300 MB upload is answered from its headers, quickly, with nothing spooled to
disk, whether the sender is anonymous or a lead whose file is over UPLOAD_MAX_BYTES. The body is valid
multipart, so that a server reading it would write it to a temporary file (TMPDIR, which the test watches)."""

import os
import select
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.factory import make_project, make_user
from tests.integration.test_worker import ROOT, database_url

MB = 1 << 20
SIZE = 300 * MB
BOUNDARY = "VerdictBoundary"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(process: subprocess.Popen, port: int, output, timeout: float = 60) -> None:
    """Wait until gunicorn (`process`) listens on `port`; if it exits first or `timeout` passes, kill it and fail the
    test with the end of its `output()`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("gunicorn did not start: " + output()[-2000:])
            time.sleep(0.2)


@pytest.fixture
def server(transactional_db, tmp_path):
    """gunicorn serving the test database, its temporary files in a folder of their own."""
    spool = tmp_path / "spool"
    spool.mkdir()
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "TMPDIR": str(spool), "MEDIA_ROOT": str(tmp_path / "media"),
           "UPLOAD_MAX_BYTES": str(100 * MB), "VERDICT_VAR_DIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--worker-tmp-dir", str(tmp_path)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_port(process, port, lambda: process.stderr.read().decode())
    urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=60).read()  # load the app before timing
    yield port, spool
    process.terminate()
    process.wait(timeout=20)


def spooled(folder: Path) -> int:
    """Bytes in the largest file under `folder` now."""
    sizes = [0]
    for path in folder.rglob("*"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            pass
    return max(sizes)


def post_big_upload(port: int, spool: Path, path: str, cookies: str) -> dict:
    """POST a 300 MB file the way a script would, sending until the server answers. Returns the status line,
    the Location header, the seconds to the answer, the bytes sent by then and the largest spooled file."""
    head = (b'--' + BOUNDARY.encode() + b'\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n")
    tail = b"\r\n--" + BOUNDARY.encode() + b"--\r\n"
    length = len(head) + SIZE + len(tail)
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookies}\r\nContent-Length: {length}\r\n"
               f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n\r\n").encode() + head
    body = bytes(MB)
    sock = socket.create_connection(("127.0.0.1", port))
    started, sent, answer, largest = time.monotonic(), 0, b"", 0
    sock.sendall(request)
    sock.setblocking(False)
    try:
        while time.monotonic() - started < 120 and b"\r\n\r\n" not in answer:
            largest = max(largest, spooled(spool))
            readable, writable, _ = select.select([sock], [sock] if sent < SIZE else [], [], 0.5)
            if readable:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
            elif writable:
                sent += sock.send(body[:SIZE - sent] if SIZE - sent < MB else body)
                if sent >= SIZE:
                    sock.setblocking(True)
                    sock.sendall(tail)
                    sock.setblocking(False)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        seconds = time.monotonic() - started
        sock.close()
    lines = answer.split(b"\r\n")
    location = next((line.split(b":", 1)[1].strip().decode() for line in lines if line.lower().startswith(b"location:")), "")
    return {"status": lines[0].decode(), "location": location, "seconds": seconds, "sent": sent,
            "spooled": max(largest, spooled(spool))}


def test_an_anonymous_300_mb_upload_is_answered_at_once_and_never_spooled(server):
    port, spool = server
    lead = make_user("lena")
    project = make_project(lead)
    url = reverse("judgments:corpus-import", args=[project.slug])

    result = post_big_upload(port, spool, url, "csrftoken=" + "a" * 32)

    assert result["status"] == "HTTP/1.1 302 Found", result
    assert result["location"].startswith(reverse("login")), result
    assert result["seconds"] < 2, result
    assert result["sent"] < 100 * MB, result  # what the socket buffers took before the answer came
    assert result["spooled"] == 0, result


def test_a_lead_upload_over_the_limit_is_answered_413_at_once_and_never_spooled(server):
    port, spool = server
    lead = make_user("lena")
    project = make_project(lead)
    browser = Client()
    browser.force_login(lead)
    url = reverse("judgments:corpus-import", args=[project.slug])

    result = post_big_upload(port, spool, url, f"csrftoken={'a' * 32}; sessionid={browser.cookies['sessionid'].value}")

    assert result["status"] == "HTTP/1.1 413 Request Entity Too Large", result
    assert result["seconds"] < 2, result
    assert result["sent"] < 100 * MB, result
    assert result["spooled"] == 0, result
