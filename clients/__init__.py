"""Clients of Verdict's REST API that ship with the repository (standard library only).

Installed from the wheel this package is `verdict` (``from verdict import Client``; the module is `verdict.verdict`,
here `clients.verdict`), beside the engine `verdict.engine`. The client's module loads on first use, so that
``import verdict.engine`` loads nothing of it.
"""

from importlib import import_module

_EXPORTED = ("ApiError", "Client", "JobFailed", "VerdictError", "gate")

__all__ = list(_EXPORTED)


def __getattr__(name: str):
    if name not in _EXPORTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(".verdict", __name__), name)
