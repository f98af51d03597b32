from django.core.management.base import CommandError

from evaluation.evaluations import DEFAULT_MEASURES, coverage_lines, measure_strings

from ._evaluate import EvaluationCommand


class Command(EvaluationCommand):
    help = ("Compare stored runs on a round: means, difference, paired permutation and t-test p-values (Holm-corrected), "
            "bootstrap CI and wins/ties/losses per measure, each run against the first.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES))
        parser.add_argument("--resamples", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=42)

    def handle(self, *args, **options):
        if len(options["runs"]) < 2:
            raise CommandError("compare needs two runs or more: the first is the baseline")
        evaluation = self.evaluate(options, measures=measure_strings(options["measures"]), resamples=options["resamples"], seed=options["seed"])
        source = evaluation.label_source
        self.print_comparisons(evaluation, options, kind="evaluation", coverage=[*coverage_lines(evaluation), f"Labels: {source.text}"],
                               fields=source.as_dict())
