import json

from evaluation.evaluations import DEFAULT_MEASURES, coverage_lines, depth_label, in_depth_order, measure_strings
from judgments.judges.calibration import gate_line

from ._evaluate import EvaluationCommand, number


class Command(EvaluationCommand):
    help = "Score stored runs against a round's consensus labels; prints the scores, the unjudged shares and the tiers."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES), help="engine measure names (default: MRR, MAP, R/P/nDCG@1..100)")
        parser.add_argument("--ks", nargs="+", type=int, help="cutoffs for measures given without one (e.g. --measures nDCG P --ks 5 10)")

    def handle(self, *args, **options):
        evaluation = self.evaluate(options, measures=measure_strings(options["measures"], options["ks"]))
        runs = evaluation.results["runs"]
        if evaluation.list_version:
            self.stdout.write(f"Labels of the published version v{evaluation.list_version.number} (sha256 {evaluation.list_version.sha256[:12]})")
        self.stdout.write(f"Round {evaluation.round.name!r}, guidelines v{evaluation.guidelines_number}, {evaluation.n_labels} labels "
                          f"({evaluation.consensus_rule}), qrels sha256 {evaluation.labels_sha256[:12]}; job time {evaluation.seconds:.2f} s")
        for line in coverage_lines(evaluation):
            self.stdout.write(line)
        self.stdout.write(f"Labels: {evaluation.label_source.text}")
        if "fill" in evaluation.results:
            fill = evaluation.results["fill"]
            self.stdout.write(f"{fill['labels']} of the labels came from the judge {fill['judge']} ({gate_line(fill['gate'])}); "
                              "judge labels in each run's top k:")
            self.table(["judge labels"] + [row["run"] for row in runs],
                       [[depth_label(k)] + [row["judge_labels"]["total"][k] for row in runs] for k in in_depth_order(runs[0]["unjudged"])])
        weighted = any(row["weighted"] for row in runs)
        header = ["measure"] + [name for row in runs for name in ([row["run"], f"{row['run']} (weighted)"] if weighted else [row["run"]])]
        rows = [[m] + [cell for row in runs for cell in ([number(row["mean"][m]), number((row["weighted"] or {}).get(m))] if weighted
                                                         else [number(row["mean"][m])])] for m in evaluation.measures]
        self.table(header, rows)
        self.stdout.write("")
        self.table(["unjudged share"] + [row["run"] for row in runs],
                   [[depth_label(k)] + [f"{row['unjudged'][k]['share']:.3f}" + {"stale": " STALE", "warn": " warn"}.get(row["unjudged"][k]["level"], "")
                                 for row in runs] for k in in_depth_order(runs[0]["unjudged"])])
        tiers = sorted({tier for row in runs for tier in row["by_tier"]})
        measure = "nDCG@10" if "nDCG@10" in evaluation.measures else evaluation.measures[0]
        if tiers:
            self.stdout.write("")
            self.table([f"{measure} by tier"] + [row["run"] for row in runs],
                       [[tier] + [number(row["by_tier"].get(tier, {}).get("mean", {}).get(measure)) for row in runs] for tier in tiers])
        self.stdout.write(f"\nEvaluation {evaluation.uuid}: {evaluation.get_absolute_url()}")
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({"evaluation": str(evaluation.uuid), **evaluation.label_source.as_dict(), **evaluation.results}, handle,
                          indent=2)
