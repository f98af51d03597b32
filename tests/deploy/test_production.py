"""The docs' production section (docs/operators/production.md), followed literally as far as no Docker engine
allows, on a fresh install of requirements.txt alone: the image is built and the containers started as docker compose would, then a
lead runs the worker self-check over HTTP through gunicorn, Redis and PostgreSQL.

What differs from the containers, and why: the compose service names `postgres` and `redis` do not resolve
here, so they point at the local servers (a throwaway PostgreSQL database made for this module by conftest.py,
and Redis database TEST_REDIS_URL); container paths (/app, /var/lib/verdict, /tmp) are temporary folders;
gunicorn's port is a free one. Everything else comes from the docs' page, the Dockerfile, docker-compose.yml
and .env.example as they are.
"""

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.config.test_content_security_policy import POLICY

from .client import SiteClient
from .compose import (command_argv, copy_build_context, healthcheck_argv, load_compose, read_dockerfile, read_env_file,
                      service_environment)
from .conftest import REDIS_URL

pytestmark = pytest.mark.production

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_DOCS = ROOT / "docs" / "operators" / "production.md"
APP_SERVICES = ("web", "worker", "beat")
ACCEPTED_DEPLOY_WARNINGS = {"security.W005", "security.W008", "security.W021"}
SUPERUSER = {"DJANGO_SUPERUSER_USERNAME": "admin", "DJANGO_SUPERUSER_EMAIL": "admin@verdict.example.com",
             "DJANGO_SUPERUSER_PASSWORD": "a long production passphrase 1"}
# Every module the web server, the worker and the commands may load; __main__ modules run a program instead.
IMPORT_EVERYTHING = """
import importlib, os, pkgutil, django
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
django.setup()
import kombu.transport.redis
for package in ("config", "judgments", "evaluation"):
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
"""


def readme_steps() -> list[str]:
    """The shell lines of the docs' production section (continuation lines joined)."""
    section = PRODUCTION_DOCS.read_text().split("## Production (docker compose)", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@dataclass
class Site:
    """The image and its running containers, on this machine."""

    app: Path  # the image's WORKDIR, /app
    host: str  # the site's name, from ALLOWED_HOSTS in .env
    port: int
    environments: dict[str, dict[str, str]]
    healthchecks: dict[str, list[str]]
    logs: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def exec(self, service: str, argv: list[str], timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
        """`docker compose exec SERVICE ARGV`."""
        return subprocess.run(argv, cwd=self.app, env={**self.environments[service], **extra}, capture_output=True,
                              text=True, timeout=timeout)

    def start(self, service: str, argv: list[str]) -> None:
        log = (self.logs / f"{service}.log").open("w")
        # A session of its own, so that stopping it reaches gunicorn's and celery's child processes.
        self.processes[service] = subprocess.Popen(argv, cwd=self.app, env=self.environments[service], stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True)

    def wait_healthy(self, service: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            check = self.exec(service, self.healthchecks[service], timeout=60)
            if check.returncode == 0:
                return
            if self.processes[service].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{service} did not become healthy:\n{check.stdout}{check.stderr}\n{self.explain()}")
            time.sleep(1)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def explain(self) -> str:
        """The end of every container's log, for failure messages."""
        return "\n".join(f"--- {path.name} ---\n{path.read_text()[-3000:]}" for path in sorted(self.logs.glob("*.log")))


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def site(database_url, tmp_path_factory):
    base = tmp_path_factory.mktemp("production")
    app, logs, home = base / "app", base / "logs", base / "home"
    # Container paths that the image, .env or the compose file name, and where they are here.
    places = {"/app": app, "/var/lib/verdict": base / "var-lib-verdict", "/tmp": base / "container-tmp"}
    logs.mkdir()
    home.mkdir()
    places["/tmp"].mkdir()

    copy_build_context(ROOT, app)  # the Dockerfile's COPY steps
    *operator_steps, up, create_superuser = readme_steps()
    assert (up, create_superuser) == ("docker compose up -d --build",
                                      "docker compose exec web python manage.py createsuperuser"), \
        "the docs' production steps changed: make this test follow them"
    for step in operator_steps:  # cp .env.example .env; sed ... SECRET_KEY, ALLOWED_HOSTS
        run(["sh", "-c", step], cwd=app, timeout=60)
    dotenv = read_env_file(app / ".env")  # compose interpolates the compose file with the project's .env
    compose = load_compose(app / "docker-compose.yml", dotenv)
    image = read_dockerfile(app / "Dockerfile")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def localise(text: str) -> str:
        text = re.sub(r"postgres://[^@\s]*@postgres:5432/\w+", database_url, text)
        text = re.sub(r"redis://redis:6379/\d+", REDIS_URL, text)
        text = re.sub(r"\b(0\.0\.0\.0|127\.0\.0\.1):8000\b", f"127.0.0.1:{port}", text)
        return re.sub(r"(?<![\w/.-])(/app|/var/lib/verdict|/tmp)(?=/|\b)", lambda m: str(places[m.group(1)]), text)

    # docker build: the base image's Python, then the Dockerfile's RUN steps in order.
    python_home = base / "image-python"
    run([sys.executable, "-m", "venv", str(python_home)], timeout=120)
    build_env = {**{k: localise(v) for k, v in image.env.items()}, "HOME": str(home),
                 "PATH": f"{python_home / 'bin'}:/usr/bin:/bin"}
    for step in image.runs:
        if step.startswith("useradd"):
            continue  # the image's system user: the containers here run as whoever runs the tests
        # --no-cache-dir: Docker's layer cache spares the download there; pip's own cache does here.
        run(["sh", "-c", localise(step.replace(" --no-cache-dir", ""))], cwd=app, env=build_env, timeout=900)

    for service in APP_SERVICES:
        for volume in compose["services"][service].get("volumes", []):
            Path(localise(volume.split(":", 1)[1])).mkdir(parents=True, exist_ok=True)
    environments = {
        service: {**{k: localise(v) for k, v in service_environment(compose, service, image.env, app, dotenv).items()},
                  "PATH": build_env["PATH"], "HOME": str(home), "HOSTNAME": socket.gethostname()}
        for service in APP_SERVICES
    }
    unmapped = [f"{s}: {k}={v}" for s, env in environments.items() for k, v in env.items() if re.search(r"@postgres:|//redis:", v)]
    assert not unmapped, f"service host names left in the environment: {unmapped}"
    site = Site(app=app, host=dotenv["ALLOWED_HOSTS"].split(",")[0], port=port,
                environments=environments, logs=logs,
                healthchecks={s: [localise(a) for a in healthcheck_argv(compose["services"][s]["healthcheck"]["test"])]
                              for s in APP_SERVICES})
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    try:
        for service in APP_SERVICES:  # docker compose up
            site.start(service, [localise(arg) for arg in command_argv(compose["services"][service]["command"])])
        for service in APP_SERVICES:
            site.wait_healthy(service, timeout=300)
        made = site.exec("web", ["python", "manage.py", "createsuperuser", "--no-input"], **SUPERUSER)
        assert made.returncode == 0, made.stderr
        yield site
    finally:
        site.stop()


def proxied(site: Site) -> SiteClient:
    """A client talking to gunicorn as the TLS proxy in front of it does: the site's Host, X-Forwarded-Proto https."""
    return SiteClient(site.host, lambda: http.client.HTTPConnection("127.0.0.1", site.port, timeout=60),
                      lambda: {"X-Forwarded-Proto": "https"})


def path_of(location: str) -> str:
    return urlsplit(location).path


def test_the_install_from_requirements_alone_is_complete_and_consistent(site):
    checked = site.exec("web", ["python", "-m", "pip", "check"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    imported = site.exec("web", ["python", "-c", IMPORT_EVERYTHING])
    assert imported.returncode == 0, imported.stderr[-3000:]


def test_web_worker_and_beat_pass_their_compose_health_checks(site):
    for service in APP_SERVICES:
        check = site.exec(service, site.healthchecks[service], timeout=60)
        assert check.returncode == 0, f"{service}: {check.stdout}{check.stderr}\n{site.explain()}"


def test_pages_link_the_collected_hashed_static_files_and_whitenoise_serves_them(site):
    page = proxied(site).get("/accounts/login/")
    assert page.status == 200, site.explain()
    stylesheet = re.search(r'href="(/static/vendor/pico/pico\.min\.[0-9a-f]{12}\.css)"', page.text)
    assert stylesheet, page.text[:2000]
    served = proxied(site).get(stylesheet.group(1))
    assert served.status == 200
    assert "immutable" in served.headers["Cache-Control"]


def test_answers_carry_the_production_security_headers_and_secure_cookies(site):
    client = proxied(site)
    page = client.get("/accounts/login/")
    assert page.headers["Content-Security-Policy"] == POLICY
    assert page.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert (page.headers["X-Frame-Options"], page.headers["X-Content-Type-Options"]) == ("DENY", "nosniff")
    client.log_in(SUPERUSER["DJANGO_SUPERUSER_USERNAME"], SUPERUSER["DJANGO_SUPERUSER_PASSWORD"])
    assert client.flags["csrftoken"] == {"secure"}
    assert client.flags["sessionid"] == {"secure", "httponly"}
    assert "Forgot your password?" not in page.text  # no EMAIL_URL in .env.example: no password reset
    assert client.get("/accounts/password_reset/").status == 404


def test_check_deploy_reports_only_the_warnings_the_docs_accept(site):
    checked = site.exec("web", ["python", "manage.py", "check", "--deploy"])
    assert checked.returncode == 0, checked.stderr
    reported = set(re.findall(r"\(([a-z_]+\.[EWC]\d+)\)", checked.stdout + checked.stderr))
    assert reported == ACCEPTED_DEPLOY_WARNINGS, checked.stdout + checked.stderr
    section = PRODUCTION_DOCS.read_text().split("## Production (docker compose)", 1)[1]
    assert all(f"`{warning}`" in section for warning in ACCEPTED_DEPLOY_WARNINGS)


def test_a_lead_runs_the_worker_self_check_through_redis_to_the_end(site):
    client = proxied(site)
    client.log_in(SUPERUSER["DJANGO_SUPERUSER_USERNAME"], SUPERUSER["DJANGO_SUPERUSER_PASSWORD"])
    client.get("/projects/new/")
    created = client.post("/projects/new/", {"name": "Production check", "slug": "", "description": ""})
    assert created.status == 302, created.text[-2000:]
    project_page = client.get(path_of(created.headers["Location"]))
    assert "You manage this project" in project_page.text
    forms = re.findall(r'<form method="post" action="([^"]+)">(.*?)</form>', project_page.text, re.DOTALL)
    selfcheck = next(action for action, body in forms if "Run a worker self-check" in body)

    started = client.post(selfcheck, {})
    assert started.status == 302, f"{started.status}\n{started.text[-2000:]}\n{site.explain()}"
    job_page = path_of(started.headers["Location"])
    deadline = time.monotonic() + 120
    while (state := re.search(r'data-state="(\w+)"', client.get(job_page).text).group(1)) not in {"succeeded", "failed"}:
        assert time.monotonic() < deadline, f"the job stayed {state}\n{site.explain()}"
        time.sleep(0.5)
    assert state == "succeeded", client.get(job_page).text[-3000:]
