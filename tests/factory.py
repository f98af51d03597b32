"""Small helpers that build test data through the real actions."""

from django.contrib.auth import get_user_model

from judgments import actions
from judgments.models import Membership, Project, Role

PASSWORD = "correct horse battery staple"


def make_user(username: str, **fields):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, email=f"{username}@example.com", **fields)
    return user


def make_project(lead, name: str = "Shop search") -> Project:
    return actions.create_project(name=name, creator=lead, description="Product search judgments")


def add_member(project: Project, user, role: str) -> Membership:
    return actions.add_member(project, user, role)


__all__ = ["PASSWORD", "Role", "add_member", "make_project", "make_user"]
