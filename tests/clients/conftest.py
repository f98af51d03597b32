"""A real Verdict server process (gunicorn) on a loopback port, serving the test database, and a lead's write token.

Jobs run eagerly inside the server (CELERY_TASK_ALWAYS_EAGER): the evaluation's job is done by the time its POST is
answered, and the client still polls the job's URL as it would a worker's."""

import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

import pytest

from api.models import ApiToken, Scope
from tests.integration.test_upload_limits_server import free_port, wait_for_port
from tests.integration.test_worker import ROOT, database_url


@dataclass
class Server:
    url: str
    log: object

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:]


def start_server(tmp_path, **environment):
    """gunicorn on a free loopback port; (process, port, log file)."""
    port = free_port()
    log = (tmp_path / "server.log").open("w+")
    env = {**os.environ, "DATABASE_URL": database_url(), "MEDIA_ROOT": str(tmp_path / "media"), "VERDICT_VAR_DIR": str(tmp_path),
           "CELERY_TASK_ALWAYS_EAGER": "true", "API_RATE_LIMIT": "0", **environment}
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                                "--timeout", "120", "--worker-tmp-dir", str(tmp_path)],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    wait_for_port(process, port, lambda: log.seek(0) or log.read())
    return process, port, log


@pytest.fixture
def server(transactional_db, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"  # the server reads the runs this process stores
    process, port, log = start_server(tmp_path)
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(f"{url}/accounts/login/", timeout=60).read()  # the app is loaded before the first API call
    yield Server(url, log)
    process.terminate()
    process.wait(timeout=20)
    log.close()


def write_token(user, project) -> str:
    return ApiToken.issue(user=user, project=project, name="ci", scope=Scope.WRITE)[1]
