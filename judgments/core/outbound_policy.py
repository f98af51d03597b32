"""What a lead may point Verdict at, as the operator allows it: the project's LLM and embeddings endpoints and the
health webhook are called at public addresses only (`judgments.lib.outbound`, OUTBOUND_ALLOWED_HOSTS and _NETWORKS),
and an API key is read from the workers' environment only under a name the operator allows (ENDPOINT_KEY_VARIABLES
and any VERDICT_KEY_* variable): a lead is not the server's administrator, and SECRET_KEY is not an API key.
"""

import os

from django.conf import settings

from ..lib import outbound


def policy() -> outbound.Policy:
    return settings.OUTBOUND_POLICY


def url_problem(url: str) -> str | None:
    """Why Verdict may not call `url` (a sentence for a form), or None."""
    try:
        outbound.check_url(url, policy())
    except outbound.Refused as refused:
        return str(refused)[:1].upper() + str(refused)[1:] + "."
    return None


def key_variable_allowed(name: str) -> bool:
    return name in settings.ENDPOINT_KEY_VARIABLES or (
        name.startswith(settings.ENDPOINT_KEY_VARIABLE_PREFIX) and len(name) > len(settings.ENDPOINT_KEY_VARIABLE_PREFIX))


def allowed_key_variables() -> list[str]:
    """The names a lead may choose: the operator's list and the VERDICT_KEY_* variables this process has (the
    workers' environment is where the value is read; it usually matches the web server's)."""
    found = set(settings.ENDPOINT_KEY_VARIABLES) | {name for name in os.environ if key_variable_allowed(name)}
    return sorted(found)


def key_variable_problem(name: str) -> str | None:
    if key_variable_allowed(name):
        return None
    listed = ", ".join(allowed_key_variables()) or "none yet"
    return (f"{name} is not a variable the operator allows for API keys. Allowed: {listed}; and any variable named "
            f"{settings.ENDPOINT_KEY_VARIABLE_PREFIX}<something> that the workers have.")
