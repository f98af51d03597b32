import json

from django.core.management.base import BaseCommand, CommandError

from evaluation import judge_estimates
from evaluation.comparisons import SIGNIFICANCE_WORDS
from evaluation.evaluations import EvaluationRefused
from judgments.management.commands._rounds import add_round_arguments, find_judge, find_round, find_runs

from ._evaluate import number, p_text


class Command(BaseCommand):
    help = ("Estimate with a judge: prediction-powered estimates of stored runs from the raters' labels on a round's random sample "
            "of queries and an automatic judge's labels on every query; print them beside the raters-only estimates and the "
            "judge's own means, and the comparisons' verdicts, and store the estimate (the job estimate_with_judge does the same).")

    def add_arguments(self, parser):
        add_round_arguments(parser, judge=True)
        parser.add_argument("--runs", nargs="+", required=True, help="stored runs by name; each pair is compared, the first minus the later")
        parser.add_argument("--measures", nargs="+", default=list(judge_estimates.DEFAULT_MEASURES), help="engine measure names")
        parser.add_argument("--alpha", type=float, default=0.05, help="intervals at level 1 - alpha (default 0.05)")
        parser.add_argument("--json", help="also write the results as JSON to this path")

    def handle(self, *args, **options):
        round = find_round(options["round"], options["project"])
        judge = find_judge(round, options["judge"])
        runs = find_runs(round, options["runs"])
        try:
            found = judge_estimates.create_judge_estimate(round, judge, runs, measures=options["measures"], alpha=options["alpha"], queue=False)
            found = judge_estimates.run_judge_estimate(found)
        except (EvaluationRefused, ValueError) as problem:
            raise CommandError(str(problem)) from None
        self.report(found)
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({"judge_estimate": str(found.uuid), **found.results}, handle, indent=2)

    def report(self, found) -> None:
        results, inputs, level = found.results, found.results["inputs"], judge_estimates.level(found)
        sample = inputs["sample"]
        self.stdout.write(f"Raters labelled {results['labelled']} of the {inputs['in_set']} queries (a random sample of {sample['sampled']}, "
                          f"seed {sample['seed']}{', within tiers' if sample['by_tier'] else ''}); the judge {inputs['judge']['name']!r} "
                          f"labelled the other {results['unlabelled']}. {len(inputs['still_grading'])} sampled queries are still being "
                          f"graded; {inputs['judge']['could_not_judge']} pairs could not be judged.")
        for table in judge_estimates.measure_tables(found):
            self.stdout.write(f"\n{table['measure']} ({level} intervals; judge mean = the judge's labels alone)")
            for row in table["rows"]:
                ppi, human = row["ppi"], row["human"]
                worth = "-" if row["effective_labelled"] is None else f"{row['effective_labelled']:.1f}"
                self.stdout.write(f"  {row['run']}: with the judge {number(ppi['mean'])} [{number(ppi['low'])}, {number(ppi['high'])}]  "
                                  f"raters only {number(human['mean'])} [{number(human['low'])}, {number(human['high'])}]  "
                                  f"judge mean {number(row['judge_mean'])} (judge)  worth {worth} labelled queries")
            for c in table["comparisons"]:
                self.stdout.write(f"  {c['a']} - {c['b']}: {number(c['ppi']['mean'])} [{number(c['ppi']['low'])}, {number(c['ppi']['high'])}]  "
                                  f"p (Holm) {p_text(c['p_adjusted'])}  {SIGNIFICANCE_WORDS[c['verdict']['state']]}; to make it significant: {c['more']}")
        self.stdout.write(f"\nEstimate with a judge {found.uuid} ({found.seconds:.2f} s)")
