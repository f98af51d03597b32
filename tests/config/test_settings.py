"""Settings come from the environment and a bad value stops start-up naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD_SECRET = "x" * 50


def load_settings(**env: str | None) -> subprocess.CompletedProcess:
    """The settings loaded in a fresh process with `env`: DEBUG on unless given (None leaves it unset)."""
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    merged = {key: value for key, value in {**clean, "DEBUG": "true", **env}.items() if value is not None}
    script = "import config.settings as s; print(s.DATABASES['default']['ENGINE'], s.DEBUG, s.CELERY_BROKER_URL)"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=merged, capture_output=True, text=True, timeout=60)


def test_debug_is_off_by_default_so_an_unconfigured_server_refuses_to_start_with_the_placeholder_key():
    result = load_settings(DEBUG=None)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr and "set DEBUG=true as `make run` does" in result.stderr


def test_with_debug_on_the_defaults_are_the_embedded_setup():
    result = load_settings()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "True", "filesystem://"]


def test_the_test_suite_loads_the_development_settings_and_serves_requests_with_debug_off(settings):
    assert os.environ["DEBUG"] == "true"  # set by tests/environment.py before the settings loaded
    assert settings.SECRET_KEY  # the placeholder, accepted because DEBUG was on when the settings loaded
    assert settings.DEBUG is False  # pytest-django: requests are served as in production


def test_the_serve_script_runs_gunicorn_with_debug_off_and_runserver_with_debug_on(tmp_path):
    """scripts/serve with stand-ins for gunicorn and python that write down the DEBUG they were started with."""
    for name in ("python", "gunicorn"):
        stub = tmp_path / name
        stub.write_text(f'#!/bin/sh\necho "$DEBUG" > "{tmp_path}/{name}.debug"\n')
        stub.chmod(0o755)
    for debug, server in (("false", "gunicorn"), ("true", "python")):
        env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PORT": "0", "DEBUG": debug,
               "VERDICT_VAR_DIR": str(tmp_path / "var")}
        result = subprocess.run([str(ROOT / "scripts" / "serve")], check=False, cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=60)
        assert "A process exited" in result.stdout, result.stdout + result.stderr
        assert (tmp_path / f"{server}.debug").read_text().strip() == debug


def make_environment(target: str, tmp_path: Path, **env: str) -> dict[str, str]:
    """The settings' variables `make TARGET` gives its recipes (the demo and static files taken as done)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "ALLOWED_HOSTS", "MAKEFLAGS", "MFLAGS")}
    names = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_COOKIES")
    recipe = f"{target}:\n\t@printf '%s\\n' " + " ".join(f'"$${name}"' for name in names) + "\n"
    result = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "-o", "demo", "-o",
                             f"{tmp_path}/static/staticfiles.json", target], check=False, cwd=ROOT, input=recipe, text=True,
                            capture_output=True, timeout=60, env={**clean, "VERDICT_VAR_DIR": str(tmp_path), **env})
    assert result.returncode == 0, result.stderr
    return dict(zip(names, result.stdout.split("\n")))


def test_make_run_turns_debug_off_with_a_secret_key_generated_once_into_the_data_folder(tmp_path):
    first = make_environment("run", tmp_path, DEBUG="true")  # as this suite's environment has it
    key = tmp_path / "secret_key"
    assert first == {"DEBUG": "false", "SECRET_KEY": key.read_text(), "ALLOWED_HOSTS": "localhost,127.0.0.1,[::1]",
                     "SECURE_COOKIES": "false"}
    assert len(first["SECRET_KEY"]) >= 32 and key.stat().st_mode & 0o777 == 0o600
    assert make_environment("run", tmp_path)["SECRET_KEY"] == first["SECRET_KEY"]
    assert make_environment("run", tmp_path, HOST="0.0.0.0")["ALLOWED_HOSTS"] == "*"
    assert make_environment("run", tmp_path, HOST="10.1.2.3")["ALLOWED_HOSTS"] == "localhost,127.0.0.1,[::1],10.1.2.3"


def test_make_dev_turns_debug_on_whatever_the_environment_says(tmp_path):
    assert make_environment("dev", tmp_path, DEBUG="false")["DEBUG"] == "true"


def test_the_makefile_turns_debug_on_for_its_targets_unless_set():
    for env, expected in (({}, "true"), ({"DEBUG": "false"}, "false")):
        clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "MAKEFLAGS", "MFLAGS")}
        result = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "show-debug"], cwd=ROOT,
                                env={**clean, **env}, input="show-debug:\n\t@echo \"$$DEBUG\"\n", capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected


def test_database_and_broker_urls_select_postgresql_and_redis():
    result = load_settings(DATABASE_URL="postgres://u@db:5432/verdict", CELERY_BROKER_URL="redis://cache:6379/0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.postgresql", "True", "redis://cache:6379/0"]


def test_postgresql_uses_prepared_statements_unless_switched_off_and_never_jit():
    script = "import config.settings as s; print(s.DATABASES['default'].get('OPTIONS'))"
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    for value, expected in ((None, "{'options': '-c jit=off', 'server_side_binding': True, 'prepare_threshold': 2}"),
                            ("false", "{'options': '-c jit=off'}")):
        env = {**base, "DATABASE_URL": "postgres://u@db:5432/verdict", **({"DATABASE_PREPARED_STATEMENTS": value} if value else {})}
        result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected


def test_a_redis_cache_url_shares_one_cache_between_processes():
    script = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup(); "
              "from django.core.cache import cache; import sys; "
              "cache.set('shared-check', sys.argv[1]) if sys.argv[1] != 'read' else print(cache.get('shared-check'))")
    env = {**os.environ, "CACHE_URL": "redis://127.0.0.1:6379/15"}
    for argument in ("written-by-one-process", "read"):
        result = subprocess.run([sys.executable, "-c", script, argument], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "written-by-one-process"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"SECURE_HSTS_SECONDS": "a year"}, "SECURE_HSTS_SECONDS='a year' is not a whole number"),
        ({"SECURE_HSTS_SECONDS": "-5"}, "SECURE_HSTS_SECONDS=-5 must be at least 0"),
        ({"JOB_STALE_AFTER_SECONDS": "5"}, "JOB_STALE_AFTER_SECONDS=5 must be at least 30"),
        ({"JOB_MAX_ATTEMPTS": "0"}, "JOB_MAX_ATTEMPTS=0 must be at least 1"),
        ({"DATABASE_URL": "mysql://root@localhost/verdict"}, "DATABASE_URL='mysql://root@localhost/verdict': only sqlite"),
        ({"DATABASE_URL": "not a url"}, "DATABASE_URL='not a url'"),
        ({"CELERY_BROKER_URL": "carrier-pigeon://"}, "CELERY_BROKER_URL='carrier-pigeon://'"),
        ({"CACHE_URL": "memcached://127.0.0.1:11211"}, "CACHE_URL='memcached://127.0.0.1:11211'"),
        ({"CSRF_TRUSTED_ORIGINS": "verdict.example.com"}, "CSRF_TRUSTED_ORIGINS entry 'verdict.example.com'"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD'"),
        ({"LOGIN_FAILURE_LIMIT": "0"}, "LOGIN_FAILURE_LIMIT=0 must be at least 1"),
        ({"TRUSTED_PROXY_COUNT": "one"}, "TRUSTED_PROXY_COUNT='one' is not a whole number"),
        ({"PROJECT_CREATION": "everyone"}, "PROJECT_CREATION='everyone': use staff or anyone"),
        ({"SEMANTIC_DEVICE": "gpu"}, "SEMANTIC_DEVICE='gpu': use auto, cpu or cuda"),
        ({"DEBUG": "0", "ALLOWED_HOSTS": "verdict.example.com"}, "SECRET_KEY must be set"),
        ({"DEBUG": "0", "SECRET_KEY": "short", "ALLOWED_HOSTS": "v.example"}, "SECRET_KEY must be set"),
        ({"DEBUG": "0", "SECRET_KEY": GOOD_SECRET}, "ALLOWED_HOSTS must list"),
    ],
)
def test_a_bad_value_stops_start_up_with_a_message_naming_the_variable(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_production_settings_start_with_a_real_secret_and_hosts():
    result = load_settings(DEBUG="false", SECRET_KEY=GOOD_SECRET, ALLOWED_HOSTS="verdict.example.com")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[1] == "False"


def test_every_variable_the_settings_read_is_documented_in_env_example():
    source = (ROOT / "config" / "settings.py").read_text()
    documented = (ROOT / ".env.example").read_text()
    import re

    read = set(re.findall(r'env_(?:str|bool|int|list|path)\("([A-Z_]+)"', source))
    assert read, "no variables found"
    missing = sorted(name for name in read if f"{name}=" not in documented)
    assert not missing, f"undocumented in .env.example: {missing}"


def email_settings(**env: str) -> subprocess.CompletedProcess:
    script = ("import config.settings as s; m = s.MAILERS['default']; o = m.get('OPTIONS', {}); "
              "print(s.EMAIL_ENABLED, m['BACKEND'].rsplit('.', 2)[-2], "
              "*(o.get(key) or '-' for key in ('host', 'port', 'use_tls', 'use_ssl', 'password')))")
    clean = {k: v for k, v in os.environ.items() if k != "EMAIL_URL"}
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(
    "url,expected",
    [
        (None, "False dummy - - - - -"),
        ("smtp://mailer:p%40ss@mail.example.com:587", "True smtp mail.example.com 587 True - p@ss"),
        ("smtps://mail.example.com", "True smtp mail.example.com 465 - True -"),
        ("smtp://relay.internal:25", "True smtp relay.internal 25 - - -"),
        ("console://", "True console - - - - -"),
    ],
)
def test_mail_is_off_unless_email_url_names_a_way_to_send_it(url, expected):
    result = email_settings(**({"EMAIL_URL": url} if url else {}))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize("url", ["pigeon://coop", "smtp://", "smtp://host:port"])
def test_a_bad_email_url_stops_start_up(url):
    result = email_settings(EMAIL_URL=url)
    assert result.returncode != 0
    assert f"EMAIL_URL={url!r}" in result.stderr


def hsts_seconds(**env: str) -> str:
    script = "import config.settings as s; print(s.SECURE_HSTS_SECONDS)"
    names = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_COOKIES", "SECURE_SSL_REDIRECT", "TRUST_X_FORWARDED_PROTO",
             "SECURE_HSTS_SECONDS"}
    clean = {k: v for k, v in os.environ.items() if k not in names}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


PRODUCTION = {"DEBUG": "false", "SECRET_KEY": GOOD_SECRET, "ALLOWED_HOSTS": "verdict.example.com"}
HTTPS_OFF = {"SECURE_COOKIES": "false", "SECURE_SSL_REDIRECT": "false", "TRUST_X_FORWARDED_PROTO": "false"}


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"DEBUG": "true"}, "0"),  # development: no HTTPS
        ({"DEBUG": "true", "SECURE_COOKIES": "true", "TRUST_X_FORWARDED_PROTO": "true"}, "0"),  # DEBUG on: never
        (PRODUCTION, "31536000"),  # secure cookies are on by default with DEBUG off
        ({**PRODUCTION, **HTTPS_OFF}, "0"),
        ({**PRODUCTION, **HTTPS_OFF, "SECURE_SSL_REDIRECT": "true"}, "31536000"),
        ({**PRODUCTION, **HTTPS_OFF, "TRUST_X_FORWARDED_PROTO": "true"}, "31536000"),
        ({**PRODUCTION, "SECURE_HSTS_SECONDS": "3600"}, "3600"),
        ({**PRODUCTION, "SECURE_HSTS_SECONDS": "0"}, "0"),
        ({**PRODUCTION, **HTTPS_OFF, "SECURE_HSTS_SECONDS": "600"}, "600"),
    ],
)
def test_hsts_lasts_a_year_when_https_is_on_unless_set(env, expected):
    assert hsts_seconds(**env) == expected


@pytest.mark.parametrize("env,message", [
    ({"INPUT_LINE_MAX_BYTES": "100"}, "INPUT_LINE_MAX_BYTES=100 must be at least 1024"),
    ({"INPUT_ID_MAX_BYTES": "600"}, "INPUT_ID_MAX_BYTES=600 must be at most 512: the database columns hold 512"),
    ({"CORPUS_FIELD_MAX_BYTES": "1 MB"}, "CORPUS_FIELD_MAX_BYTES='1 MB' is not a whole number"),
    ({"DECOMPRESSED_MAX_BYTES": "1000"}, "DECOMPRESSED_MAX_BYTES=1000 must be at least 1048576"),
])
def test_the_input_limits_are_read_strictly_and_ids_cannot_outgrow_their_columns(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("stale_after,every", [(None, 40.0), ("30", 10.0), ("600", 60.0)])
def test_stale_jobs_are_looked_for_three_times_per_stale_limit_at_most_every_minute(stale_after, every):
    env = {key: value for key, value in os.environ.items() if key != "JOB_STALE_AFTER_SECONDS"}
    if stale_after:
        env["JOB_STALE_AFTER_SECONDS"] = stale_after
    script = "import config.settings as s; print(s.CELERY_BEAT_SCHEDULE['recover-stale-jobs']['schedule'])"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**env, "DEBUG": "true"}, capture_output=True,
                            text=True, timeout=60)
    assert float(result.stdout) == every, result.stderr
