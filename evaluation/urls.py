from django.urls import path

from . import views

app_name = "evaluation"

urlpatterns = [
    path("p/<slug:slug>/evaluations/", views.evaluations_list, name="evaluations"),
    path("p/<slug:slug>/evaluations/new/", views.evaluation_create, name="evaluation-create"),
    path("p/<slug:slug>/evaluations/leaderboard/", views.leaderboard, name="leaderboard"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/", views.evaluation, name="evaluation"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/compare/", views.comparison, name="comparison"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/q/<path:query_id>/", views.ranked_list, name="ranked-list"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/queue-unjudged/", views.queue_unjudged, name="queue-unjudged"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/download/<str:what>.<str:fmt>", views.download, name="download"),
]
