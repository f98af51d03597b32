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
    default = {name: service for name, service in compose["services"].items() if not service.get("profiles")}
    assert set(default) == {"web", "worker", "beat", "postgres", "redis"}
    for name, service in default.items():
        assert service["healthcheck"]["test"], name


def test_the_web_health_check_asks_healthz_which_checks_the_database_broker_and_storage(compose):
    assert "http://127.0.0.1:8000/healthz" in " ".join(compose["services"]["web"]["healthcheck"]["test"])


def test_the_s3_profile_adds_minio_and_creates_the_bucket_with_the_apps_credentials(compose):
    services = compose["services"]
    assert {name for name, service in services.items() if service.get("profiles") == ["s3"]} == {"minio", "minio-bucket"}
    minio, bucket = services["minio"], services["minio-bucket"]
    assert minio["image"] == bucket["image"] and re.fullmatch(r"quay\.io/minio/minio:RELEASE\.[0-9T-]+Z", minio["image"])
    assert minio["healthcheck"]["test"] == ["CMD", "mc", "ready", "local"]
    assert "ports" not in minio  # only the app's containers reach it
    assert "miniodata:/data" in minio["volumes"] and "miniodata" in compose["volumes"]
    for service in (minio, bucket):
        assert service["environment"]["MINIO_ROOT_USER"] == "${S3_ACCESS_KEY_ID:-}"
        assert service["environment"]["MINIO_ROOT_PASSWORD"] == "${S3_SECRET_ACCESS_KEY:-}"
    assert bucket["depends_on"] == {"minio": {"condition": "service_healthy"}} and bucket["restart"] == "no"
    assert bucket["environment"]["S3_BUCKET"] == "${S3_BUCKET:-verdict}"
    assert 'mc mb --ignore-existing "verdict/$$S3_BUCKET"' in bucket["entrypoint"][-1]


def test_the_s3_settings_compose_shows_are_documented_settings():
    text = (ROOT / "docker-compose.yml").read_text()
    shown = set(re.findall(r"\b(STORAGE_BACKEND|S3_[A-Z_]+)=", text))
    documented = set(re.findall(r"^#? ?([A-Z_0-9]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert {"STORAGE_BACKEND", "S3_ENDPOINT_URL", "S3_BUCKET", "S3_ADDRESSING_STYLE", "S3_ACCESS_KEY_ID"} <= shown
    assert shown <= documented, shown - documented


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
