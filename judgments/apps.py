from django.apps import AppConfig


class JudgmentsConfig(AppConfig):
    name = "judgments"
    verbose_name = "Judgments"

    def ready(self) -> None:
        # Job kinds register themselves on import; the worker and the web process both need them.
        from .ops import answers, automatic, imports, jobs, log_sampling, pools, reports, serving_order, versions  # noqa: F401
