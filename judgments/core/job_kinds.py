"""The registry of job kinds: a kind is a plain function `fn(job, progress) -> dict` registered with `@job_kind`
under a name and the label a page shows (`Job.label`). The lifecycle every job goes through is
`judgments.ops.jobs`; the registry sits below the models so that a job row can name its kind's label.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

JobFunction = Callable[[Any, Any], dict | None]  # (Job, Progress) -> result


@dataclass(frozen=True)
class JobKind:
    name: str
    label: str
    function: JobFunction
    cancellable: bool = False  # the function checks `cancel_requested` and stops early, keeping its work


JOB_KINDS: dict[str, JobKind] = {}


def job_kind(name: str, label: str, *, cancellable: bool = False) -> Callable[[JobFunction], JobFunction]:
    """Register `fn(job, progress) -> result dict` as the job kind `name`."""

    def register(function: JobFunction) -> JobFunction:
        JOB_KINDS[name] = JobKind(name, label, function, cancellable)
        return function

    return register


