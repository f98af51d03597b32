from django.apps import AppConfig


class JudgmentsConfig(AppConfig):
    name = "judgments"
    verbose_name = "Judgments"

    def ready(self) -> None:
        # Job kinds register themselves on import; the worker and the web process both need them. The tasks register
        # with the Celery app, where the operations below them find them by name (`judgments.core.queue`).
        from . import tasks  # noqa: F401
        from .ops import (answers, automatic, imports, jobs, judge_runs, log_sampling, pools, reports,  # noqa: F401
                          serving_order, versions)
