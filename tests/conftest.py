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
