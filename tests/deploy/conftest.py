"""The servers the deploy tests run the app against: PostgreSQL (a throwaway database per module) and Redis."""

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import pytest

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def servers_problem() -> str | None:
    import psycopg
    import redis

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable ({exc})"
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return f"Redis at {REDIS_URL} is not reachable ({exc})"
    return None


@pytest.fixture(scope="module")
def database_url(request):
    """A throwaway PostgreSQL database for the module's servers, dropped afterwards. Without PostgreSQL or Redis the
    module is skipped, and fails under CI."""
    problem = servers_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"{problem}; CI must run {request.module.__name__}")
        pytest.skip(problem)
    import psycopg

    name = f"verdict_{request.module.__name__.rsplit('_', 1)[-1]}_{secrets.token_hex(4)}"
    server = urlsplit(POSTGRES_URL)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# The first-run figure (tests/deploy/test_first_run.py), shown in pytest's terminal summary and kept in the data folder,
# where scripts/test-all prints it again at the end of `make test`.
FIRST_RUN = pytest.StashKey[list[str]]()


@pytest.fixture
def first_run_figure(request) -> list[str]:
    return request.config.stash.setdefault(FIRST_RUN, [])


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(FIRST_RUN, [])
    if lines:
        terminalreporter.section("first run")
        for line in lines:
            terminalreporter.write_line(line)
        var = Path(os.environ.get("VERDICT_VAR_DIR") or Path(__file__).resolve().parents[2] / "var")
        var.mkdir(parents=True, exist_ok=True)
        (var / "first-run.txt").write_text("\n".join(lines) + "\n")
