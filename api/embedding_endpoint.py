"""The project's embeddings (the default backend of its semantic judges and its /v1/embeddings endpoint), for
leads who configure judges from scripts: validated by the app's own form, so the API refuses what the page
refuses (internal addresses, an API-key variable the operator does not allow, an unknown backend)."""

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema

from judgments.core import outbound_policy
from judgments.forms import EmbeddingEndpointForm
from judgments.models import EmbeddingEndpoint
from judgments.ops import embeddings

from .auth import project_access
from .jobs import form_error
from .schemas import ERRORS

router = Router(tags=["embedding endpoint"])


class BackendOut(Schema):
    backend: str
    default: bool = Field(description="The project's semantic judges use it unless a judge names another")
    problem: str | None = Field(description="Why it cannot embed on this server (NOT USABLE), or null")


class EmbeddingEndpointOut(Schema):
    default_backend: str = Field(description="numpy, sentence-transformers or endpoint")
    base_url: str = Field(description="Empty while no endpoint is set")
    model: str
    max_length: int = Field(description="Word pieces the endpoint's model reads; 0: unknown")
    batch_size: int = Field(description="Texts per request")
    api_key_env: str = Field(description="The environment variable the workers read the key from; empty: a stored key")
    key_status: str = Field(description="Whether a key is set and where it comes from; the key itself is never shown")
    allowed_key_variables: list[str] = Field(description="Variables the operator allows, besides any VERDICT_KEY_*")
    backends: list[BackendOut]


class EmbeddingEndpointIn(Schema):
    default_backend: str = Field("numpy", description="numpy, sentence-transformers or endpoint")
    base_url: str = Field("", description="Up to /v1; empty: no endpoint (the default backend may then not be endpoint)")
    model: str = ""
    max_length: int = Field(0, description="Word pieces the endpoint's model reads; 0: unknown")
    batch_size: int = Field(64, description="Texts per request")
    api_key: str = Field("", description="Stored encrypted; empty keeps the stored key")
    api_key_env: str = Field("", description="Or: a variable the operator allows (see allowed_key_variables)")
    clear_key: bool = Field(False, description="Remove the stored key")


def _out(project, found: EmbeddingEndpoint) -> dict:
    return {"default_backend": found.default_backend, "base_url": found.base_url, "model": found.model,
            "max_length": found.max_length, "batch_size": found.batch_size, "api_key_env": found.api_key_env,
            "key_status": found.key_status, "allowed_key_variables": outbound_policy.allowed_key_variables(),
            "backends": [{"backend": b["backend"], "default": b["default"], "problem": b["problem"]}
                         for b in embeddings.backend_statuses(project)]}


@router.get("/{slug}/embedding-endpoint", response={200: EmbeddingEndpointOut, **ERRORS},
            summary="The project's embeddings: default backend and endpoint (leads)",
            description="Empty base URL and model while no endpoint is set; each backend says whether it can run here.")
def get_embedding_endpoint(request: HttpRequest, slug: str):
    project, _ = project_access(request, slug, "can_manage")
    return _out(project, embeddings.project_embeddings(project) or EmbeddingEndpoint(project=project))


@router.put("/{slug}/embedding-endpoint", response={200: EmbeddingEndpointOut, **ERRORS},
            summary="Set the project's embeddings (leads)",
            description="Validated as the page's form: a known backend, an http(s) base URL at a public address "
                        "(or one the operator allows) with its model, and a key variable among those the operator allows "
                        f"(ENDPOINT_KEY_VARIABLES, {settings.ENDPOINT_KEY_VARIABLE_PREFIX}*); anything else is 400 "
                        "naming the field.")
def put_embedding_endpoint(request: HttpRequest, slug: str, body: EmbeddingEndpointIn):
    project, _ = project_access(request, slug, "can_manage")
    form = EmbeddingEndpointForm({**body.dict(), "clear_key": "on" if body.clear_key else ""})
    if not form.is_valid():
        raise form_error(form)
    return _out(project, embeddings.save_embedding_endpoint(project, **form.cleaned_data))
