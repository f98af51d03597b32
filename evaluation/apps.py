from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        # The evaluation job kind registers itself on import; the worker and the web process both need it.
        from . import answer_evaluations, evaluations, judge_estimates, judge_only_evaluations  # noqa: F401
