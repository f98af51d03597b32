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


__all__ = ["PASSWORD", "Role", "add_member", "make_project", "make_user", "run_queued_jobs", "trec_run", "upload"]


def run_queued_jobs() -> list:
    """Stand in for the worker: run every queued job now, in order. Returns the finished jobs."""
    from judgments.jobs import execute_job
    from judgments.models import Job

    return [execute_job(pk) for pk in Job.objects.filter(state=Job.State.QUEUED).order_by("created_at").values_list("pk", flat=True)]


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def trec_run(rows: dict[str, list[str]], tag: str = "sys") -> bytes:
    """A TREC run file: {query_id: [doc ids best first]}, scores falling with the rank."""
    lines = [f"{qid} Q0 {doc} {rank} {100 - rank} {tag}" for qid, docs in rows.items() for rank, doc in enumerate(docs, start=1)]
    return ("\n".join(lines) + "\n").encode()
