from django.urls import path

from . import views

app_name = "tokens"

urlpatterns = [
    path("settings/tokens/", views.tokens, name="list"),
    path("settings/tokens/<uuid:token_uuid>/revoke/", views.token_revoke, name="revoke"),
    path("p/<slug:slug>/tokens/", views.project_tokens, name="project-tokens"),
    path("p/<slug:slug>/tokens/<uuid:token_uuid>/revoke/", views.project_token_revoke, name="project-revoke"),
]
