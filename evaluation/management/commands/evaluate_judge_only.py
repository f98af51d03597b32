import json

from django.core.management.base import BaseCommand, CommandError

from evaluation import judge_only_evaluations
from evaluation.engine.judge_only import COULD_NOT_JUDGE_RULE, UNCALIBRATED
from evaluation.evaluations import EvaluationRefused
from judgments.management.commands.import_references import find_project_query_set_and_runs
from judgments.ops.actions import ActionRefused

from ._evaluate import number


class Command(BaseCommand):
    help = ("Judge-only evaluation (uncalibrated), Evret's way: score stored runs with no relevance labels, an automatic judge "
            "matching each run's top documents to a query set's reference answers; print the means and store the evaluation "
            "(the job evaluate_judge_only does the same).")

    def add_arguments(self, parser):
        parser.add_argument("project", help="the project's slug")
        parser.add_argument("query_set", help="the query set (name or UUID) whose reference answers the judge matches")
        parser.add_argument("runs", nargs="+", help="stored runs by name")
        parser.add_argument("--judge", choices=["token_overlap", "semantic", "llm"], default="token_overlap",
                            help="token_overlap (default, Evret's), semantic, or llm (the project's LLM endpoint)")
        parser.add_argument("--judge-settings", default="{}", help="the judge's settings as a JSON object")
        parser.add_argument("--k", default="1,3,5,10", help="cutoffs, comma-separated (default 1,3,5,10)")
        parser.add_argument("--json", help="also write the results as JSON to this path")

    def handle(self, *args, **options):
        _, query_set, runs = find_project_query_set_and_runs(options, "runs")
        try:
            ks = [int(part) for part in options["k"].split(",") if part.strip()]
            settings = json.loads(options["judge_settings"])
        except ValueError as problem:
            raise CommandError(f"--k must be whole numbers separated by commas and --judge-settings a JSON object: {problem}") from None
        if not isinstance(settings, dict):
            raise CommandError("--judge-settings must be a JSON object")
        try:
            evaluation = judge_only_evaluations.create_judge_only_evaluation(
                query_set, runs, judge_kind=options["judge"], judge_settings=settings, ks=ks, queue=False)
            evaluation = judge_only_evaluations.run_judge_only_evaluation(evaluation)
        except (EvaluationRefused, ActionRefused, ValueError) as problem:
            raise CommandError(str(problem)) from None
        results = evaluation.results
        questions = results["questions"]
        self.stdout.write(UNCALIBRATED)
        self.stdout.write(f"{evaluation.n_queries} queries with reference answers scored, of {results['queries']['in_set']} in the set; "
                          f"{questions['asked']} questions asked, {questions['matched']} matched, {questions['could_not_judge']} could not "
                          f"be judged ({COULD_NOT_JUDGE_RULE})")
        rows = judge_only_evaluations.score_table(evaluation)
        names = results["runs_order"]
        widths = [max(len(row["measure"]) for row in rows)] + [max(len(name), 6) for name in names]
        self.stdout.write("  ".join(["measure".ljust(widths[0])] + [name.rjust(w) for name, w in zip(names, widths[1:])]))
        for row in rows:
            self.stdout.write("  ".join([row["measure"].ljust(widths[0])] + [number(v).rjust(w) for v, w in zip(row["cells"], widths[1:])]))
        self.stdout.write(f"Judge-only evaluation {evaluation.uuid} ({evaluation.seconds:.2f} s)")
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({"judge_only_evaluation": str(evaluation.uuid), **results}, handle, indent=2)
