"""Personas shared by the view tests: a lead, a rater and a viewer on the lead's project, an outsider."""

from dataclasses import dataclass

import pytest
from django.test import Client

from tests.factory import Role, add_member, make_project, make_user


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
def fast_password_hashing(settings):
    # The real hasher is deliberately slow; the tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def private_media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
