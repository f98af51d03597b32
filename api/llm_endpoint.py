"""The project's LLM endpoint, for leads who configure judges from scripts: validated by the app's own form, so
the API refuses what the page refuses (internal addresses, an API-key variable the operator does not allow)."""

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema

from judgments.core import outbound_policy
from judgments.forms import LLMEndpointForm
from judgments.models import LLMEndpoint
from judgments.ops import endpoints

from .auth import project_access
from .jobs import form_error
from .schemas import ERRORS

router = Router(tags=["llm endpoint"])


class EndpointOut(Schema):
    base_url: str
    model: str
    api_key_env: str = Field(description="The environment variable the workers read the key from; empty: a stored key")
    key_status: str = Field(description="Whether a key is set and where it comes from; the key itself is never shown")
    allowed_key_variables: list[str] = Field(description="Variables the operator allows, besides any VERDICT_KEY_*")
    max_in_flight: int = Field(description="Requests in flight at once, all workers together")
    requests_per_minute: int = Field(description="Requests a minute, all workers together; 0: no limit")
    tokens_per_minute: int = Field(description="Prompt and reply tokens a minute, all workers together; 0: no limit")


class EndpointIn(Schema):
    base_url: str
    model: str
    api_key: str = Field("", description="Stored encrypted; empty keeps the stored key")
    api_key_env: str = Field("", description="Or: a variable the operator allows (see allowed_key_variables)")
    clear_key: bool = Field(False, description="Remove the stored key")
    max_in_flight: int | None = Field(None, description="At least 1; absent: kept (16 for a new endpoint)")
    requests_per_minute: int | None = Field(None, description="0: no limit; absent: kept (1,000 for a new endpoint)")
    tokens_per_minute: int | None = Field(None, description="0: no limit; absent: kept (1,000,000 for a new endpoint)")


LIMITS = ("max_in_flight", "requests_per_minute", "tokens_per_minute")


def _out(endpoint: LLMEndpoint) -> dict:
    return {"base_url": endpoint.base_url, "model": endpoint.model, "api_key_env": endpoint.api_key_env,
            "key_status": endpoint.key_status, "allowed_key_variables": outbound_policy.allowed_key_variables(),
            **{name: getattr(endpoint, name) for name in LIMITS}}


@router.get("/{slug}/llm-endpoint", response={200: EndpointOut, **ERRORS}, summary="The project's LLM endpoint (leads)",
            description="Empty base URL and model while none is set.")
def get_llm_endpoint(request: HttpRequest, slug: str):
    project, _ = project_access(request, slug, "can_manage")
    return _out(LLMEndpoint.objects.filter(project=project).first() or LLMEndpoint(project=project, base_url="", model=""))


@router.put("/{slug}/llm-endpoint", response={200: EndpointOut, **ERRORS}, summary="Set the project's LLM endpoint (leads)",
            description="Validated as the page's form: an http(s) base URL at a public address (or one the operator "
                        "allows), and a key variable among those the operator allows (ENDPOINT_KEY_VARIABLES, "
                        f"{settings.ENDPOINT_KEY_VARIABLE_PREFIX}*); anything else is 400 naming the field.")
def put_llm_endpoint(request: HttpRequest, slug: str, body: EndpointIn):
    project, _ = project_access(request, slug, "can_manage")
    given = {name: value for name, value in body.dict().items() if value is not None}  # a limit absent: kept
    form = LLMEndpointForm({**given, "clear_key": "on" if body.clear_key else ""})
    if not form.is_valid():
        raise form_error(form)
    return _out(endpoints.save_llm_endpoint(project, **form.cleaned_data))
