"""Personas shared by the view tests: a lead, a rater and a viewer on the lead's project, an outsider."""

from dataclasses import dataclass

import pytest
from django.test import Client


@dataclass
class Personas:
    project: object
    lead: object
    rater: object
    viewer: object
    outsider: object

    def client(self, who: str) -> Client:
        client = Client()
        client.force_login(getattr(self, who))
        return client


@pytest.fixture
def people(db) -> Personas:
    from tests.factory import Role, add_member, make_project, make_user

    lead = make_user("lena")
    project = make_project(lead)
    rater = make_user("ravi")
    viewer = make_user("vera")
    add_member(project, rater, Role.RATER)
    add_member(project, viewer, Role.VIEWER)
    outsider = make_user("otto")
    make_project(outsider, name="Otto's other project")
    return Personas(project=project, lead=lead, rater=rater, viewer=viewer, outsider=outsider)


@pytest.fixture(autouse=True)
def test_settings(request, tmp_path):
    """Fast password hashing (the real hasher is slow on purpose), a private media folder, and an empty
    cache (rolled-back tests reuse primary keys, which some cache keys hold)."""
    if not request.config.pluginmanager.hasplugin("django"):
        return  # the engine's tests also run without pytest-django
    from django.core.cache import cache

    cache.clear()
    settings = request.getfixturevalue("settings")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture(scope="session")
def parquet_bomb(tmp_path_factory):
    """The 10 KB Parquet run whose one doc id is 300 MB (`tests.hostile`), written once for the run."""
    from tests.hostile import write_parquet_bomb

    return write_parquet_bomb(tmp_path_factory.mktemp("bomb") / "bomb.parquet")


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3-compatible server (moto's server mode) on a loopback port, for the whole run."""
    from tests.s3 import start_server

    server, endpoint = start_server()
    yield endpoint
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint, settings, monkeypatch):
    """A new bucket, and the app's default storage in it under the prefix `verdict/`, configured as
    STORAGE_BACKEND=s3 and the S3_* variables configure it."""
    from tests.s3 import make_bucket, s3_settings

    bucket = make_bucket(s3_endpoint)
    settings.STORAGES = {**settings.STORAGES, "default": s3_settings(monkeypatch, s3_endpoint, bucket.name, S3_PREFIX="verdict")}
    return bucket


@pytest.fixture
def outbound_loopback(settings):
    """The fake LLM servers and webhook receivers listen on loopback, which Verdict refuses to call by default
    (a lead is not the server's administrator); these tests allow it as an operator would allow a network."""
    from judgments.lib.outbound import Policy

    settings.OUTBOUND_POLICY = Policy.of(networks=["127.0.0.0/8"])
