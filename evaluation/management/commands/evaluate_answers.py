import json

from evaluation.answer_evaluations import coverage_lines

from ._answers import AnswerCommand
from ._evaluate import number


class Command(AnswerCommand):
    help = ("Score answer runs against a query set's reference answers (acc, em, stringem, coverem, f1, rouge-1/2/l as UltraRAG "
            "computes them), print the means, traffic-weighted means when every query has a weight, and store the evaluation.")

    def handle(self, *args, **options):
        evaluation = self.evaluate(options)
        for line in coverage_lines(evaluation):
            self.stdout.write(line)
        runs = evaluation.results["runs"]
        header = ["measure"] + [name for row in runs for name in ([row["run"]] + ([f"{row['run']} (weighted)"] if row["weighted"] else []))]
        self.table(header, [[m] + [value for row in runs for value in ([number(row["mean"][m])] +
                                                                         ([number(row["weighted"][m])] if row["weighted"] else []))]
                            for m in evaluation.measures])
        self.stdout.write(f"Answer evaluation {evaluation.uuid} ({evaluation.seconds:.2f} s)")
        if options["json"]:
            with open(options["json"], "w", encoding="utf-8") as handle:
                json.dump({"answer_evaluation": str(evaluation.uuid), **evaluation.results}, handle, indent=2)
