"""The project's LLM endpoint, saved from a form's checked values. What a lead may point Verdict at (the operator's
outbound policy and the allowed API key variables) is `judgments.core.outbound_policy`, below the models that check it.
"""

from django.utils import timezone

from ..models import LLMEndpoint, Project


def save_llm_endpoint(project: Project, *, base_url: str, model: str, api_key: str = "", api_key_env: str = "",
                      clear_key: bool = False, max_in_flight: int | None = None, requests_per_minute: int | None = None,
                      tokens_per_minute: int | None = None) -> LLMEndpoint:
    """Set the project's LLM endpoint from checked values (`LLMEndpointForm`): a new key replaces the stored one,
    `clear_key` removes it, neither keeps it; a limit left None keeps its value (`judgments.core.rate_limits`)."""
    endpoint = LLMEndpoint.objects.filter(project=project).first() or LLMEndpoint(project=project)
    endpoint.base_url, endpoint.model, endpoint.api_key_env = base_url, model, api_key_env
    for name, value in (("max_in_flight", max_in_flight), ("requests_per_minute", requests_per_minute),
                        ("tokens_per_minute", tokens_per_minute)):
        if value is not None:
            setattr(endpoint, name, value)
    endpoint.updated_at = timezone.now()
    endpoint.replace_api_key(api_key, clear_key)
    endpoint.save()
    return endpoint
