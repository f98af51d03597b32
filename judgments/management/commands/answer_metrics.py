import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from judgments.lib import metric_agreement
from judgments.ops import answer_metrics

from ._rounds import find_round


def _figure(c: dict) -> str:
    if c["value"] is None:
        return "undefined"
    return f"{c['value']:.3f}" + (f" [{c['low']:.3f}, {c['high']:.3f}]" if c["low"] is not None else "")


class Command(BaseCommand):
    help = ("Which automatic answer metric agrees with the raters in an answer round: Kendall's tau-b and Spearman's rho "
            "per answer and per system, with bootstrap intervals over queries (no bound on the round's size).")

    def add_arguments(self, parser):
        parser.add_argument("round", help="the round's UUID, or its name (with --project when names repeat)")
        parser.add_argument("--project", help="the project's slug, to find the round by name")
        parser.add_argument("--json", type=Path, dest="json_path", metavar="PATH", help="also write the whole report as JSON to PATH")
        parser.add_argument("--resamples", type=int, default=metric_agreement.RESAMPLES)
        parser.add_argument("--seed", type=int, default=metric_agreement.SEED)

    def handle(self, *args, round: str, project: str | None, json_path: Path | None, resamples: int, seed: int, **options):
        found = find_round(round, project)
        if resamples < 1:
            raise CommandError("--resamples must be at least 1")
        try:
            data = answer_metrics.compute(found, resamples=resamples, seed=seed)
        except answer_metrics.NotAnAnswerRound as problem:
            raise CommandError(str(problem)) from None
        answer_metrics.keep(found, data)
        write = self.stdout.write
        write(f"{'metric':<10} {'tau-b per answer':<28} {'rho per answer':<28} {'tau-b per system':<28}")
        system = data["system_level"]["correlations"]
        for metric, c in data["per_answer"].items():
            by_system = _figure(system[metric]["tau"]) if metric in system else "-"
            write(f"{metric:<10} {_figure(c['tau']):<28} {_figure(c['rho']):<28} {by_system:<28}")
        write(answer_metrics.verdict_text(data))
        if not data["system_level"]["enough_systems"]:
            write(f"System level: needs at least {metric_agreement.MIN_SYSTEMS} answer runs with common queries; "
                  f"this round has {data['system_level']['n_systems']}.")
        write(f"{data['n_answers']} answers, {data['n_queries']} queries, {data['n_systems']} systems; "
              f"left out {data['left_out']} of {data['n_in_round']} ({data['no_consensus']} without a human label, "
              f"{data['no_references']} without references).")
        if json_path:
            json_path.write_text(json.dumps({**data, "verdict_text": answer_metrics.verdict_text(data)}, indent=2, ensure_ascii=False),
                                 encoding="utf-8")
            self.stderr.write(f"Wrote {json_path}")
