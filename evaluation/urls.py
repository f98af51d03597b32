from django.urls import path

from judgments.views import removal

from . import answer_views, judge_estimate_views, judge_only_views, views

app_name = "evaluation"

urlpatterns = [
    path("p/<slug:slug>/answer-evaluations/", answer_views.answer_evaluations_list, name="answer-evaluations"),
    path("p/<slug:slug>/answer-evaluations/new/", answer_views.answer_evaluation_create, name="answer-evaluation-create"),
    path("p/<slug:slug>/answer-evaluations/leaderboard/", answer_views.answer_leaderboard, name="answer-leaderboard"),
    path("p/<slug:slug>/answer-evaluations/<uuid:answer_evaluation_uuid>/", answer_views.answer_evaluation, name="answer-evaluation"),
    path("p/<slug:slug>/answer-evaluations/<uuid:answer_evaluation_uuid>/compare/", answer_views.answer_comparison,
         name="answer-comparison"),
    path("p/<slug:slug>/answer-evaluations/<uuid:answer_evaluation_uuid>/download/<str:what>.<str:fmt>", answer_views.answer_download,
         name="answer-download"),
    path("p/<slug:slug>/judge-only/", judge_only_views.judge_only_list, name="judge-only-evaluations"),
    path("p/<slug:slug>/judge-only/new/", judge_only_views.judge_only_create, name="judge-only-create"),
    path("p/<slug:slug>/judge-only/<uuid:evaluation_uuid>/", judge_only_views.judge_only_evaluation, name="judge-only-evaluation"),
    path("p/<slug:slug>/judge-only/<uuid:evaluation_uuid>/calibrate/", judge_only_views.judge_only_calibrate, name="judge-only-calibrate"),
    path("p/<slug:slug>/judge-only/<uuid:evaluation_uuid>/download/<str:what>.<str:fmt>", judge_only_views.judge_only_download,
         name="judge-only-download"),
    path("p/<slug:slug>/estimates/", judge_estimate_views.judge_estimate_list, name="judge-estimates"),
    path("p/<slug:slug>/estimates/new/", judge_estimate_views.judge_estimate_create, name="judge-estimate-create"),
    path("p/<slug:slug>/estimates/<uuid:estimate_uuid>/", judge_estimate_views.judge_estimate, name="judge-estimate"),
    path("p/<slug:slug>/estimates/<uuid:estimate_uuid>/download/<str:what>.<str:fmt>", judge_estimate_views.judge_estimate_download,
         name="judge-estimate-download"),
    path("p/<slug:slug>/evaluations/", views.evaluations_list, name="evaluations"),
    path("p/<slug:slug>/evaluations/new/", views.evaluation_create, name="evaluation-create"),
    path("p/<slug:slug>/evaluations/leaderboard/", views.leaderboard, name="leaderboard"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/", views.evaluation, name="evaluation"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/delete/", removal.evaluation_delete, name="evaluation-delete"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/compare/", views.comparison, name="comparison"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/q/<path:query_id>/", views.ranked_list, name="ranked-list"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/queue-unjudged/", views.queue_unjudged, name="queue-unjudged"),
    path("p/<slug:slug>/evaluations/<uuid:evaluation_uuid>/download/<str:what>.<str:fmt>", views.download, name="download"),
]
