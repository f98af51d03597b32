from django.urls import path

from .views import corpus, guidelines, pools, projects, queries, runs

app_name = "judgments"

urlpatterns = [
    path("", projects.projects, name="projects"),
    path("queue/", projects.my_queue, name="my-queue"),
    path("reports/", projects.reports, name="reports"),
    path("projects/new/", projects.project_create, name="project-create"),
    path("p/<slug:slug>/", projects.project, name="project"),
    path("p/<slug:slug>/settings/", projects.project_settings, name="project-settings"),
    path("p/<slug:slug>/members/", projects.members, name="members"),
    path("p/<slug:slug>/members/add/", projects.member_add, name="member-add"),
    path("p/<slug:slug>/members/<uuid:member>/role/", projects.member_role, name="member-role"),
    path("p/<slug:slug>/members/<uuid:member>/remove/", projects.member_remove, name="member-remove"),
    path("p/<slug:slug>/jobs/", projects.project_jobs, name="jobs"),
    path("p/<slug:slug>/jobs/selfcheck/", projects.selfcheck, name="selfcheck"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/", projects.job, name="job"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/status/", projects.job_status, name="job-status"),
    path("p/<slug:slug>/jobs/<uuid:job_uuid>/retry/", projects.job_retry, name="job-retry"),
    path("p/<slug:slug>/guidelines/", guidelines.guidelines, name="guidelines"),
    path("p/<slug:slug>/guidelines/edit/", guidelines.guidelines_edit, name="guidelines-edit"),
    path("p/<slug:slug>/guidelines/v<int:number>/", guidelines.guidelines_version, name="guidelines-version"),
    path("p/<slug:slug>/queries/", queries.query_sets, name="query-sets"),
    path("p/<slug:slug>/queries/import/", queries.query_set_import, name="query-set-import"),
    path("p/<slug:slug>/queries/new/", queries.query_set_create, name="query-set-create"),
    path("p/<slug:slug>/queries/<uuid:set_uuid>/", queries.query_set, name="query-set"),
    path("p/<slug:slug>/queries/<uuid:set_uuid>/add/", queries.query_edit, name="query-add"),
    path("p/<slug:slug>/queries/<uuid:set_uuid>/q/<path:query_id>/", queries.query_edit, name="query-edit"),
    path("p/<slug:slug>/corpus/", corpus.corpus, name="corpus"),
    path("p/<slug:slug>/corpus/import/", corpus.corpus_import, name="corpus-import"),
    path("p/<slug:slug>/corpus/template/", corpus.display_template, name="display-template"),
    path("p/<slug:slug>/corpus/d/<path:doc_id>/", corpus.document, name="document"),
    path("p/<slug:slug>/runs/", runs.runs, name="runs"),
    path("p/<slug:slug>/runs/upload/", runs.run_upload, name="run-upload"),
    path("p/<slug:slug>/runs/<uuid:run_uuid>/", runs.run, name="run"),
    path("p/<slug:slug>/pools/", pools.pools, name="pools"),
    path("p/<slug:slug>/pools/new/", pools.pool_create, name="pool-create"),
    path("p/<slug:slug>/pools/<uuid:pool_uuid>/", pools.pool, name="pool"),
    path("p/<slug:slug>/pools/<uuid:pool_uuid>/add-runs/", pools.pool_add_runs, name="pool-add-runs"),
]
