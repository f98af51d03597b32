"""A project's own tokens through the API: list, make and revoke (leads). Personal tokens are made on the API
tokens page only."""

from datetime import datetime
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from ninja.responses import Status

from .auth import project_access
from .errors import ApiError
from .forms import ProjectTokenForm
from .jobs import form_error
from .paging import Page, PageParams, page
from .models import ApiToken, Scope
from .schemas import ERRORS

router = Router(tags=["project tokens"])


class ProjectTokenOut(Schema):
    uuid: UUID
    name: str
    scope: Scope
    prefix: str = Field(description="The secret's first characters, to tell tokens apart.")
    created_by: str | None = Field(description="The username of the lead who made it; null when made by a command or the account is gone.")
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="To the minute.")
    state: str = Field(description="active, expired or revoked")


class ProjectTokenCreated(ProjectTokenOut):
    secret: str = Field(description="The token itself, shown in this answer only: Verdict keeps its digest.")


class ProjectTokenIn(Schema):
    name: str
    scope: Scope = Scope.READ
    expires_in_days: int | None = Field(90, description="1 to 366; null for a token that does not expire.")


def token_out(token: ApiToken) -> dict:
    return {"uuid": token.uuid, "name": token.name, "scope": token.scope, "prefix": token.prefix,
            "created_by": token.created_by.username if token.created_by else None, "created_at": token.created_at,
            "expires_at": token.expires_at, "last_used_at": token.last_used_at, "state": token.state}


@router.get("/{slug}/tokens", response={200: Page[ProjectTokenOut], **ERRORS}, summary="The project's own tokens (leads)")
def list_project_tokens(request: HttpRequest, slug: str, params: Query[PageParams]):
    project, _ = project_access(request, slug, "can_manage")
    return page(request, project.api_tokens.of_project(), params, token_out)


@router.post("/{slug}/tokens", response={201: ProjectTokenCreated, **ERRORS}, summary="Make a project token (a lead's personal token)",
             description="The answer holds the secret, once. A project token cannot make another: one that leaked must not be "
                         "able to outlive its own revocation.")
def create_project_token(request: HttpRequest, slug: str, body: ProjectTokenIn):
    project, _ = project_access(request, slug, "can_manage")
    maker, _ = request.auth
    if maker.is_project_token:
        raise ApiError(403, "A project token cannot make tokens: use a lead's personal token or the project tokens page.")
    form = ProjectTokenForm(body.dict())
    if not form.is_valid():
        raise form_error(form)
    token, secret = ApiToken.issue(user=None, created_by=maker.user, project=project, name=form.cleaned_data["name"],
                                   scope=form.cleaned_data["scope"], expires_at=form.expires_at())
    return Status(201, {**token_out(token), "secret": secret})


@router.delete("/{slug}/tokens/{uuid}", response={200: ProjectTokenOut, **ERRORS}, summary="Revoke a project token",
               description="Answers the token, revoked: requests made with it are refused from now on.")
def revoke_project_token(request: HttpRequest, slug: str, uuid: UUID):
    project, _ = project_access(request, slug, "can_manage")
    token = project.api_tokens.of_project().filter(uuid=uuid).first()
    if token is None:
        raise ApiError(404, "No such project token.")
    token.revoke()
    return token_out(token)
