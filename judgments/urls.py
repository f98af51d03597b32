from django.urls import path

from . import views

app_name = "judgments"

urlpatterns = [
    path("", views.projects, name="projects"),
    path("queue/", views.my_queue, name="my-queue"),
    path("reports/", views.reports, name="reports"),
    path("projects/new/", views.project_create, name="project-create"),
    path("p/<slug:slug>/", views.project, name="project"),
    path("p/<slug:slug>/settings/", views.project_settings, name="project-settings"),
    path("p/<slug:slug>/members/", views.members, name="members"),
    path("p/<slug:slug>/members/add/", views.member_add, name="member-add"),
    path("p/<slug:slug>/members/<uuid:member>/role/", views.member_role, name="member-role"),
    path("p/<slug:slug>/members/<uuid:member>/remove/", views.member_remove, name="member-remove"),
    path("p/<slug:slug>/jobs/", views.project_jobs, name="jobs"),
    path("p/<slug:slug>/jobs/selfcheck/", views.selfcheck, name="selfcheck"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/", views.job, name="job"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/status/", views.job_status, name="job-status"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/retry/", views.job_retry, name="job-retry"),
]
