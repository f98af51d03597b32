"""The token pages: a user's personal access tokens, and a project's own tokens (its leads'); each made and
revoked here, the secret shown once."""

from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods, require_POST

from judgments import access

from .forms import ProjectTokenForm, TokenForm
from .models import ApiToken


@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """The list and the form; a valid POST makes a token and shows its secret on this response only."""
    form = TokenForm(request.POST or None, user=request.user)
    secret = None
    if request.method == "POST" and form.is_valid():
        _token, secret = ApiToken.issue(user=request.user, project=form.cleaned_data["project"], name=form.cleaned_data["name"],
                                        scope=form.cleaned_data["scope"], expires_at=form.expires_at())
        form = TokenForm(user=request.user)
    context = {"form": form, "secret": secret, "tokens": request.user.api_tokens.select_related("project").order_by("-created_at", "pk")}
    return TemplateResponse(request, "api/tokens.html", context, status=201 if secret else 200)


@require_POST
def token_revoke(request: HttpRequest, token_uuid: UUID) -> HttpResponse:
    token = request.user.api_tokens.filter(uuid=token_uuid).first()
    if token is None:  # another user's token: it does not exist for this one
        raise Http404("No such token")
    _revoke(request, token)
    return redirect("tokens:list")


@require_http_methods(["GET", "POST"])
def project_tokens(request: HttpRequest, slug: str) -> HttpResponse:
    """A project's own tokens, for its leads: the list and the form; the secret is shown on the creating response only."""
    project, membership = access.project_for_user(request.user, slug, "can_manage")
    form = ProjectTokenForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        _token, secret = ApiToken.issue(user=None, created_by=request.user, project=project, name=form.cleaned_data["name"],
                                        scope=form.cleaned_data["scope"], expires_at=form.expires_at())
        form = ProjectTokenForm()
    context = {"project": project, "membership": membership, "form": form, "secret": secret, "tokens": project.api_tokens.of_project()}
    return TemplateResponse(request, "api/project_tokens.html", context, status=201 if secret else 200)


@require_POST
def project_token_revoke(request: HttpRequest, slug: str, token_uuid: UUID) -> HttpResponse:
    project, _ = access.project_for_user(request.user, slug, "can_manage")
    token = project.api_tokens.of_project().filter(uuid=token_uuid).first()
    if token is None:
        raise Http404("No such token")
    _revoke(request, token)
    return redirect("tokens:project-tokens", project.slug)


def _revoke(request: HttpRequest, token: ApiToken) -> None:
    token.revoke()
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked: requests made with it are refused from now on.")
