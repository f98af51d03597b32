from django.core.management.base import CommandError

from evaluation.answer_evaluations import coverage_lines

from ._answers import AnswerCommand


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
        self.print_comparisons(evaluation, options, kind="answer_evaluation", coverage=coverage_lines(evaluation))
