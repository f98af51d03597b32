"""The judges' tests need no database: they call the package's public API (and a fake endpoint on loopback)."""

import os

import pytest

from judgments.judges import JudgeContext, availability
from judgments.lib.scales import BINARY, GRADED


def context(document: str, *references: str, query: str = "What is RAG?", scale=BINARY, **extra) -> JudgeContext:
    return JudgeContext(query=query, document=document, scale=scale, references=references, **extra)


@pytest.fixture(scope="session")
def semantic_available():
    """The semantic judge's packages (requirements-judges.txt): skipped without them, except under CI."""
    found = availability("semantic")
    if not found.available:
        message = f"{found.reason}: {found.install}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run the semantic judge's tests)")
        pytest.skip(message)


__all__ = ["BINARY", "GRADED", "context"]
