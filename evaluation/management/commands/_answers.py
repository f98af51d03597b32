"""What evaluate_answers and compare_answers share: finding the project, query set and answer runs, and
running the answer evaluation in this process (the same function the job calls)."""

from django.core.management.base import CommandError

from evaluation import answer_evaluations
from evaluation.engine.answers import ANSWER_MEASURES
from evaluation.evaluations import EvaluationRefused
from evaluation.models import AnswerEvaluation
from judgments.management.commands.import_references import find_project_query_set_and_runs

from ._evaluate import EvaluationCommand


class AnswerCommand(EvaluationCommand):
    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug")
        parser.add_argument("query_set", help="the query set (name or UUID) whose reference answers score the runs")
        parser.add_argument("runs", nargs="+", help="answer runs by name; the first is the baseline of comparisons")
        parser.add_argument("-m", "--measure", dest="measures", action="append",
                            help=f"a measure (repeat, or comma lists); default all eight: {', '.join(ANSWER_MEASURES)}")
        parser.add_argument("-c", dest="all_queries", action="store_true",
                            help="score every query with references, a query without an answer scoring 0")
        parser.add_argument("--tokenizer", choices=["ultrarag", "unicode"], default="ultrarag")
        parser.add_argument("--json", help="also write the results as JSON to this path")

    def evaluate(self, options, *, resamples: int = 10_000, seed: int = 42) -> AnswerEvaluation:
        _, query_set, runs = find_project_query_set_and_runs(options, "answer_runs", "answer run")
        try:
            evaluation = answer_evaluations.create_answer_evaluation(
                query_set, runs, measures=options["measures"] or ANSWER_MEASURES, all_queries=options["all_queries"],
                tokenizer=options["tokenizer"], resamples=resamples, seed=seed, queue=False)
            return answer_evaluations.run_answer_evaluation(evaluation)
        except (EvaluationRefused, ValueError) as problem:
            raise CommandError(str(problem)) from None
