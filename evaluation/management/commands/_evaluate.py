"""What the evaluate and compare commands share: finding the round and runs, running the evaluation
in this process (the same function the job calls), and printing tables."""

import json

from django.core.management.base import BaseCommand, CommandError

from evaluation import evaluations
from evaluation.comparisons import SIGNIFICANCE_WORDS, covered, with_verdicts
from evaluation.models import Evaluation
from judgments.management.commands._rounds import add_round_arguments, find_judge, find_round, find_runs
from judgments.ops.versions import of_lineage


class EvaluationCommand(BaseCommand):
    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version N names a judgment-list version: it replaces Django's --version (which prints Django's).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        add_round_arguments(parser)
        parser.add_argument("--version", type=int, dest="list_version", metavar="N",
                            help="score against the published judgment-list version vN of the round's list, not its live labels")
        parser.add_argument("--runs", nargs="+", required=True, help="stored runs by name; the first is the baseline")
        parser.add_argument("--json", help="also write the results as JSON to this path")
        parser.add_argument("--fill-judge", help="label the pairs no rater graded with this automatic judge of the round "
                                                 "(its calibration must pass its gate)")

    def evaluate(self, options, *, measures: list[str], resamples: int = 10_000, seed: int = 42) -> Evaluation:
        round = find_round(options["round"], options["project"])
        runs = find_runs(round, options["runs"])
        judge = find_judge(round, options["fill_judge"]) if options["fill_judge"] else None
        version = None
        if options["list_version"] is not None:
            version = of_lineage(round).filter(number=options["list_version"]).first()
            if version is None:
                raise CommandError(f"round {round.name!r} has no published version v{options['list_version']}")
        try:
            evaluation = evaluations.create_evaluation(round, runs, measures=measures, resamples=resamples, seed=seed, queue=False,
                                                       fill_judge=judge, list_version=version)
            return evaluations.run_evaluation(evaluation)
        except (evaluations.EvaluationRefused, ValueError) as problem:
            raise CommandError(str(problem)) from None

    def table(self, header: list[str], rows: list[list]) -> None:
        cells = [[str(value) for value in row] for row in [header, *rows]]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        for row in cells:
            self.stdout.write("  ".join(value.ljust(width) if i == 0 else value.rjust(width) for i, (value, width) in enumerate(zip(row, widths))))


    def print_comparisons(self, evaluation, options, *, kind: str, coverage: list[str], fields: dict | None = None) -> None:
        """The coverage lines and comparison tables of an evaluation (kind "evaluation") or answer evaluation
        (kind "answer_evaluation"), each run against the baseline, and the --json file (with `fields`) when asked for."""
        baseline = evaluation.results["baseline"]
        for line in coverage:
            self.stdout.write(line)
        compared = with_verdicts(evaluation.results["comparisons"], resamples=evaluation.resamples)
        for name, comparisons in compared.items():
            self.stdout.write(f"\n{name} (A) vs {baseline} (B), {options['resamples']} resamples, seed {options['seed']}")
            self.table(["measure", "A_mean", "B_mean", "diff", "p_value", "t_p_value", "p_holm", "95% CI", "W/T/L", "significant"],
                       [[c["measure"], number(c["A_mean"]), number(c["B_mean"]), number(c["diff"]), p_text(c["p_value"]),
                         p_text(c["t_p_value"]), p_text(c["p_corrected"]), f"{number(c['ci_low'])}..{number(c['ci_high'])}",
                         f"{c['wins']}/{c['ties']}/{c['losses']}", SIGNIFICANCE_WORDS[c["verdict"]["state"]]] for c in comparisons])
            for group in covered(comparisons)["unproven"]:
                self.stdout.write(f"Not enough evidence on {', '.join(group['measures'])}: {'; '.join(group['reasons'])}.")
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({kind: str(evaluation.uuid), **(fields or {}), "queries": evaluation.results["queries"],
                           "baseline": baseline, "comparisons": compared}, handle, indent=2)


def number(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def p_text(value) -> str:
    return "-" if value is None else "<0.0001" if value < 0.00005 else f"{value:.4f}"
