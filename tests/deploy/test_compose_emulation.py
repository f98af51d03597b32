"""The stand-in for docker compose and docker build (tests/deploy/compose.py) does what they do, checked against
the examples of the Compose specification's interpolation and env-file sections."""

from pathlib import Path

import pytest

from .compose import (ComposeError, command_argv, copy_build_context, healthcheck_argv, interpolate, load_compose,
                      read_dockerfile, read_env_file, service_environment)

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = {"SET": "value", "EMPTY": ""}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("plain text", "plain text"),
        ("$SET and ${SET}", "value and value"),
        ("${UNSET}$UNSET|$EMPTY", "|"),
        ("$$HOSTNAME costs $$5", "$HOSTNAME costs $5"),
        ("${EMPTY:-default} ${UNSET:-default} ${SET:-default}", "default default value"),
        ("[${EMPTY-default}] ${UNSET-default}", "[] default"),
        ("${SET:+other} [${EMPTY:+other}] ${EMPTY+other} [${UNSET+other}]", "other [] other []"),
        ("${EMPTY?unused}|${SET:?unused}", "|value"),
        ("${UNSET:-${SET}-x}", "value-x"),
        ("${UNSET:-${ALSO_UNSET:-deep}}", "deep"),
        ("postgres://verdict:${PASSWORD:-verdict}@postgres:5432/verdict", "postgres://verdict:verdict@postgres:5432/verdict"),
    ],
)
def test_interpolation_follows_the_compose_rules(text, expected):
    assert interpolate(text, VARIABLES) == expected


@pytest.mark.parametrize(
    "text,message",
    [
        ("${UNSET:?set UNSET in .env}", "required variable UNSET is missing a value: set UNSET in .env"),
        ("${EMPTY:?no ${SET}}", "required variable EMPTY is missing a value: no value"),
        ("${UNSET?err}", "required variable UNSET is missing a value: err"),
        ("costs $ 5", "a lone '$'"),
        ("${SET", "never closed"),
        ("${1BAD}", "invalid interpolation format"),
    ],
)
def test_what_compose_refuses_is_refused(text, message):
    with pytest.raises(ComposeError, match=message.replace("$", r"\$").replace("{", r"\{")):
        interpolate(text, VARIABLES)


def test_an_env_file_reads_like_compose_reads_it(tmp_path):
    env = tmp_path / ".env"
    env.write_text(
        "# a comment line\n"
        "\n"
        "PLAIN=value\n"
        "SPACED = padded value   \n"
        "COMMENTED=kept # dropped\n"
        "HASH=a#b\n"
        "EMPTY=\n"
        "export EXPORTED=yes\n"
        "SINGLE='literal $PLAIN \\n'\n"
        'DOUBLE="line\\nnext \\"quoted\\" ${PLAIN}" # dropped\n'
        "REFERS=${PLAIN}-${OUTSIDE:-none}-${GIVEN}\n"
    )
    assert read_env_file(env, {"GIVEN": "given"}) == {
        "PLAIN": "value", "SPACED": "padded value", "COMMENTED": "kept", "HASH": "a#b", "EMPTY": "", "EXPORTED": "yes",
        "SINGLE": "literal $PLAIN \\n", "DOUBLE": 'line\nnext "quoted" value', "REFERS": "value-none-given",
    }


@pytest.mark.parametrize("line", ["NOT A LINE", "QUOTE='open", 'QUOTE="a" trailing'])
def test_a_bad_env_file_line_is_named_with_its_file_and_line(tmp_path, line):
    env = tmp_path / ".env"
    env.write_text(f"GOOD=1\n{line}\n")
    with pytest.raises(ComposeError, match=rf"{env}:2: "):
        read_env_file(env)


def test_without_secret_key_compose_refuses_the_file_with_its_message():
    with pytest.raises(ComposeError, match="required variable SECRET_KEY is missing a value: set SECRET_KEY in .env"):
        load_compose(ROOT / "docker-compose.yml", read_env_file(ROOT / ".env.example"))


def test_a_service_environment_is_the_image_env_then_the_env_file_then_environment(tmp_path):
    (tmp_path / ".env").write_text("SECRET_KEY=from-env-file\nALLOWED_HOSTS=verdict.example.com\nLOG_LEVEL=WARNING\n"
                                   "DEBUG=true\nVERDICT_VAR_DIR=./var\n")
    dotenv = read_env_file(tmp_path / ".env")
    compose = load_compose(ROOT / "docker-compose.yml", dotenv)
    env = service_environment(compose, "web", {"VERDICT_VAR_DIR": "/var/lib/verdict", "LOG_LEVEL": "INFO"}, tmp_path, dotenv)
    assert env["LOG_LEVEL"] == "WARNING"  # the env file beats the image
    assert env["VERDICT_VAR_DIR"] == "./var"  # which is how the old .env.example broke the image's static files
    assert env["DEBUG"] == "false"  # environment: beats the env file
    assert env["SECRET_KEY"] == "from-env-file"
    assert env["ALLOWED_HOSTS"] == "verdict.example.com,127.0.0.1"
    assert env["DATABASE_URL"] == "postgres://verdict:verdict@postgres:5432/verdict"
    assert command_argv(compose["services"]["worker"]["command"])[:4] == ["celery", "-A", "config", "worker"]
    assert healthcheck_argv(compose["services"]["worker"]["healthcheck"]["test"])[:2] == ["sh", "-c"]
    assert "celery@$HOSTNAME" in compose["services"]["worker"]["healthcheck"]["test"][1]


def test_the_dockerfile_is_read_for_its_env_steps_and_command():
    image = read_dockerfile(ROOT / "Dockerfile")
    assert image.base.startswith("python:3.12")
    assert image.env["VERDICT_VAR_DIR"] == "/var/lib/verdict"
    assert image.workdir == "/app"
    assert image.runs[0] == "pip install --no-cache-dir -r requirements.txt"
    assert any("collectstatic --no-input" in step and step.startswith("DEBUG=false ") for step in image.runs)
    assert image.cmd[0] == "gunicorn"


def test_the_build_context_leaves_out_what_dockerignore_names(tmp_path):
    source = tmp_path / "source"
    for name in ("manage.py", ".env", ".env.example", "var/verdict.sqlite3", "judgments/__pycache__/x.pyc",
                 "judgments/models.py", "judgments/var/kept.txt"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("x")
    (source / ".dockerignore").write_text("# comment\nvar\n.env\n**/__pycache__\n")
    copy_build_context(source, tmp_path / "image")
    copied = {path.relative_to(tmp_path / "image").as_posix() for path in (tmp_path / "image").rglob("*") if path.is_file()}
    assert copied == {"manage.py", ".env.example", ".dockerignore", "judgments/models.py", "judgments/var/kept.txt"}
