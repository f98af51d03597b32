"""A newcomer's first run: `git clone` of this checkout's HEAD into a temporary folder, `make run` in it with a free
PORT, and the time until the login page answers 200 over HTTP, with the steps `make run` printed on the way. The figure
is reported in pytest's terminal summary (tests/deploy/conftest.py), not asserted: the issue's target is 60 s on the
2-core machine with a warm package cache, which this test makes true first (an install of requirements.txt into a
throwaway virtualenv by the same installer).

Then, under that server: DEBUG is off (an unknown URL and a rater opening another rater's pair get the app's own 404,
not Django's debug page with the URL list), the secret key was generated into the data folder, readable by its owner
only, and a restart reuses it (a session from the first run still holds); Ctrl-C stops everything."""

import http.client
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.deploy.client import SiteClient
from tests.deploy.test_make_run import alive, answers, descendants, free_port

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "/accounts/login/"
UP_WITHIN = 600.0  # seconds: a cold cache with pip as the installer takes minutes
STOP_WITHIN = 15.0
# "==> Migrating the database... 5 s... done in 8.1 s"
STEP = re.compile(r"^==> (?P<label>.+?)\.\.\.(?: \d+ s\.\.\.)* (?:done(?: in (?P<seconds>[\d.]+) s)?)$")
SHORT = {"Creating the environment": "venv", "Installing": "install", "Migrating": "migrate", "Loading the demo": "demo",
         "Collecting static files": "static", "Starting the web server": "servers", "Starting the worker": "servers"}
# What a settings-dependent environment of this process would change in the clone's run.
UNSET = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "VERDICT_VAR_DIR", "STATIC_ROOT", "MEDIA_ROOT",
         "CELERY_BROKER_URL", "CACHE_URL", "HOST", "PORT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIRTUAL_ENV",
         "DJANGO_SETTINGS_MODULE", "SECURE_COOKIES", "PROJECT_CREATION"}


class Make:
    """`make ARGS` in the clone in a session of its own, its output read line by line with the time each line ended."""

    def __init__(self, clone: Path, env: dict[str, str], *args: str):
        self.started = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(["make", "--no-print-directory", *args, "run"], cwd=clone, env=env,
                                        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def wait_for_login_page(self, port: int) -> float:
        """Seconds from the start of make until the login page answered 200."""
        deadline = self.started + UP_WITHIN
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"make run ended on its own:\n{self.output}"
            if answers(port):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    connection.request("GET", LOGIN)
                    if connection.getresponse().status == 200:
                        return time.monotonic() - self.started
                except OSError:
                    pass
                finally:
                    connection.close()
            time.sleep(0.1)
        pytest.fail(f"make run did not serve {LOGIN} within {UP_WITHIN} s:\n{self.output}")

    def interrupt(self) -> None:
        """Ctrl-C, as a terminal sends it to make's process group; everything make started ends within STOP_WITHIN."""
        started = descendants(self.process.pid) | {self.process.pid}
        os.killpg(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_WITHIN
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = alive(started)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_WITHIN)
        self.reader.join(timeout=STOP_WITHIN)
        assert not left, f"still running {STOP_WITHIN} s after Ctrl-C: {sorted(left)}\n{self.output}"
        assert "Stopping the web server" in self.output, self.output

    def kill(self) -> None:
        for pid in alive(descendants(self.process.pid) | {self.process.pid}):
            os.kill(pid, signal.SIGKILL)
        self.process.wait()


def fresh_environment(port: int) -> dict[str, str]:
    """This process's environment as a newcomer's shell would have it: no settings, no virtualenv of this checkout's
    on PATH (so that the clone finds its Python, and uv, as a fresh machine would)."""
    ours = {Path(sys.prefix).resolve(), ROOT.resolve()}
    path = [entry for entry in os.environ["PATH"].split(os.pathsep)
            if not any(Path(entry).resolve().is_relative_to(folder) for folder in ours)]
    env = {key: value for key, value in os.environ.items() if key not in UNSET}
    return {**env, "PATH": os.pathsep.join(path), "PORT": str(port), "PYTHONUNBUFFERED": "1"}


def steps(make: Make) -> dict[str, float]:
    """The seconds each step took, as printed ("done" alone: under a second), the installs added up; "servers" is from
    the moment the servers' step began until the login page answered."""
    found: dict[str, float] = {}
    for _, line in make.lines:
        if match := STEP.match(line):
            short = next(name for prefix, name in SHORT.items() if match["label"].startswith(prefix))
            found[short] = found.get(short, 0.0) + float(match["seconds"] or 0)
    return found


def servers_began(make: Make) -> float:
    """When the line before the servers' step ended: the servers' step began then."""
    before = 0.0
    for at, line in make.lines:
        if line.startswith("==> Starting the web server"):
            return before
        before = at
    return before


def installer(make: Make) -> str:
    match = re.search(r"^==> Installing \d+ packages from requirements\.txt with (.+?)\.\.\.", make.output, re.MULTILINE)
    assert match, make.output
    return match[1]


def another_raters_pair(database: Path) -> str:
    """The grading address of a pair rater1 judged and rater2 neither judged nor holds, in a round of both."""
    with sqlite3.connect(database) as connection:
        slug, round_uuid, item_uuid = connection.execute("""
            SELECT p.slug, r.uuid, i.uuid FROM judgments_judgment j
            JOIN auth_user u ON u.id = j.rater_id JOIN judgments_rounditem i ON i.id = j.item_id
            JOIN judgments_round r ON r.id = i.round_id JOIN judgments_project p ON p.id = r.project_id
            JOIN judgments_round_raters rr ON rr.round_id = r.id JOIN auth_user u2 ON u2.id = rr.user_id
            WHERE u.username = 'rater1' AND u2.username = 'rater2'
              AND NOT EXISTS (SELECT 1 FROM judgments_judgment o WHERE o.item_id = i.id AND o.rater_id = u2.id)
              AND NOT EXISTS (SELECT 1 FROM judgments_claim c WHERE c.item_id = i.id AND c.rater_id = u2.id)
            ORDER BY j.id LIMIT 1""").fetchone()
    return f"/p/{slug}/rounds/{uuid.UUID(round_uuid)}/grade/{uuid.UUID(item_uuid)}/"


def assert_the_apps_own_404(reply) -> None:
    assert reply.status == 404, reply.text[:500]
    assert "· Verdict</title>" in reply.text, reply.text[:500]
    assert "URLconf" not in reply.text and "DEBUG = True" not in reply.text, reply.text[:500]


def test_a_fresh_clone_serves_the_login_page_and_says_how_long_it_took(tmp_path, first_run_figure):
    clone = tmp_path / "verdict"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    port = free_port()
    env = fresh_environment(port)
    python = subprocess.run(["scripts/find-python"], cwd=clone, env=env, capture_output=True, text=True, check=True)
    # A warm package cache, made so by the same installer.
    warm = tmp_path / "warm"
    subprocess.run([python.stdout.strip(), "-m", "venv", str(warm)], check=True, timeout=120)
    warming = subprocess.run(["scripts/install", str(warm), "-r", "requirements.txt"], check=False, cwd=clone, env=env,
                             capture_output=True, text=True, timeout=UP_WITHIN)
    assert warming.returncode == 0, warming.stdout + warming.stderr

    load = os.getloadavg()[0]
    make = Make(clone, env)
    try:
        took = make.wait_for_login_page(port)
        while "Press Ctrl-C to stop" not in make.output and make.process.poll() is None:
            time.sleep(0.05)  # the URL is printed right after the port answers
        printed = steps(make)
        printed["servers"] = took - servers_began(make)
        assert list(printed) == ["venv", "install", "migrate", "demo", "static", "servers"], make.output
        assert f"Verdict is running at http://127.0.0.1:{port}/" in make.output, make.output
        assert "PORT=8001 make run" in make.output, make.output
        figures = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in printed.items())
        first_run_figure.append(
            f"First run: fresh clone to http://127.0.0.1:{port}/ in {took:.1f} s ({installer(make)}, warm package cache; "
            f"{figures}; load {load:.1f} on {os.cpu_count()} cores)")

        site = SiteClient(f"127.0.0.1:{port}", lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=30),
                          scheme="http")
        assert_the_apps_own_404(site.get("/no-such-page/"))
        site.log_in("rater2", "verdict-demo")
        assert_the_apps_own_404(site.get(another_raters_pair(clone / "var" / "verdict.sqlite3")))

        key = clone / "var" / "secret_key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        secret = key.read_text()
        assert len(secret) >= 32
        make.interrupt()
    finally:
        make.kill()

    # Restarted (the demo already loaded), the same key: rater2's session from the first run still holds.
    again = Make(clone, env, "-o", "demo")
    try:
        again.wait_for_login_page(port)
        assert key.read_text() == secret
        assert site.get("/").status == 200
        again.interrupt()
    finally:
        again.kill()
    assert not answers(port)
