"""docker-compose.yml is checked by parsing it: no Docker engine runs on the project's machines."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_has_the_five_services_each_with_a_health_check(compose):
    assert set(compose["services"]) == {"web", "worker", "beat", "postgres", "redis"}
    for name, service in compose["services"].items():
        assert service["healthcheck"]["test"], name


def test_the_app_services_run_gunicorn_a_worker_and_beat_from_one_image(compose):
    services = compose["services"]
    assert "gunicorn config.wsgi" in services["web"]["command"]
    assert "manage.py migrate" in services["web"]["command"]
    assert services["worker"]["command"].startswith("celery -A config worker")
    assert services["beat"]["command"].startswith("celery -A config beat")
    assert {services[name]["build"] for name in ("web", "worker", "beat")} == {"."}
    assert (ROOT / "Dockerfile").exists()


def test_the_app_talks_to_postgres_and_redis_and_waits_for_them(compose):
    for name in ("web", "worker", "beat"):
        service = compose["services"][name]
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert env["DEBUG"] == "false"
        assert service["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }


def test_the_database_and_uploads_live_on_named_volumes(compose):
    assert {"pgdata", "media"} <= set(compose["volumes"])
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["postgres"]["volumes"]
    for name in ("web", "worker"):
        assert "media:/var/lib/verdict/media" in compose["services"][name]["volumes"]
        assert compose["services"][name]["environment"]["MEDIA_ROOT"] == "/var/lib/verdict/media"


def test_every_app_variable_is_a_documented_setting(compose):
    documented = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    used = set(compose["services"]["web"]["environment"])
    assert used <= documented, used - documented


def test_secrets_are_required_from_the_environment_not_written_in_the_file(compose):
    env = compose["services"]["web"]["environment"]
    assert env["SECRET_KEY"].startswith("${SECRET_KEY:?")
    assert env["ALLOWED_HOSTS"].startswith("${ALLOWED_HOSTS:?")
