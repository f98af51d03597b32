"""The API tokens page: a user's personal access tokens, made and revoked here, the secret shown once."""

from datetime import timedelta
from uuid import UUID

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from .forms import TokenForm
from .models import ApiToken


@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """The list and the form; a valid POST makes a token and shows its secret on this response only."""
    form = TokenForm(request.POST or None, user=request.user)
    secret = None
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["expires_in_days"]
        token, secret = ApiToken.issue(user=request.user, project=form.cleaned_data["project"], name=form.cleaned_data["name"],
                                       scope=form.cleaned_data["scope"], expires_at=timezone.now() + timedelta(days=days) if days else None)
        form = TokenForm(user=request.user)
    context = {"form": form, "secret": secret, "tokens": request.user.api_tokens.select_related("project").order_by("-created_at", "pk")}
    return TemplateResponse(request, "api/tokens.html", context, status=201 if secret else 200)


@require_POST
def token_revoke(request: HttpRequest, token_uuid: UUID) -> HttpResponse:
    token = request.user.api_tokens.filter(uuid=token_uuid).first()
    if token is None:  # another user's token: it does not exist for this one
        raise Http404("No such token")
    token.revoke()
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked: requests made with it are refused from now on.")
    return redirect("tokens:list")
