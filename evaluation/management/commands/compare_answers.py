import json

from django.core.management.base import CommandError

from evaluation.answer_evaluations import coverage_lines

from ._answers import AnswerCommand
from ._evaluate import number


class Command(AnswerCommand):
    help = ("Compare answer runs on a query set's reference answers: means, difference, paired permutation and t-test p-values "
            "(Holm-corrected), bootstrap CI and wins/ties/losses per measure, each run against the first (the baseline).")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--resamples", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=42)

    def handle(self, *args, **options):
        if len(options["runs"]) < 2:
            raise CommandError("compare_answers needs two answer runs or more: the first is the baseline")
        evaluation = self.evaluate(options, resamples=options["resamples"], seed=options["seed"])
        baseline = evaluation.results["baseline"]
        for line in coverage_lines(evaluation):
            self.stdout.write(line)
        for name, comparisons in evaluation.results["comparisons"].items():
            self.stdout.write(f"\n{name} (A) vs {baseline} (B), {options['resamples']} resamples, seed {options['seed']}")
            self.table(["measure", "A_mean", "B_mean", "diff", "p_value", "t_p_value", "p_holm", "95% CI", "W/T/L", "significant"],
                       [[c["measure"], number(c["A_mean"]), number(c["B_mean"]), number(c["diff"]), number(c["p_value"]),
                         number(c["t_p_value"]), number(c["p_corrected"]), f"{number(c['ci_low'])}..{number(c['ci_high'])}",
                         f"{c['wins']}/{c['ties']}/{c['losses']}", "yes" if c["significant_corrected"] else "no"] for c in comparisons])
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({"answer_evaluation": str(evaluation.uuid), "queries": evaluation.results["queries"], "baseline": baseline,
                           "comparisons": evaluation.results["comparisons"]}, handle, indent=2)
