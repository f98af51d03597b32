import json
from pathlib import Path

from django.core.management.base import BaseCommand

from judgments.ops.automatic import calibrate, store_calibration

from ._rounds import add_round_arguments, find_judge, find_round


def _number(value) -> str:
    return "undefined" if value is None else f"{value:.3f}"


class Command(BaseCommand):
    help = ("Compute and store a judge's calibration report: the judge against the raters and the leaderboards, and "
            "its gate: pass, fail or not enough evidence, with the reasons and the next steps.")

    def add_arguments(self, parser):
        add_round_arguments(parser, judge=True)
        parser.add_argument("--json", type=Path, dest="json_path", help="also write the whole report to this JSON file")

    def handle(self, *args, round: str, project: str | None, judge: str, json_path: Path | None, **options):
        chosen = find_judge(find_round(round, project), judge)
        data = store_calibration(chosen, calibrate(chosen)).data
        if json_path is not None:
            json_path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        pairs, systems, gate = data["pairs"], data["systems"], data["gate"]
        self.stdout.write(f"{judge} against the raters' consensus over {pairs['n_items']:,} pairs: "
                          f"kappa {_number(pairs['kappa']['value'])}, alpha {_number(pairs['alpha']['value'])}, "
                          f"bias {_number(pairs['bias'])}")
        if systems is None:
            self.stdout.write(f"Leaderboards: not computed ({data['systems_reason']})")
        else:
            self.stdout.write(f"Leaderboards of {systems['n_runs']} runs ({data['measure']}, {systems['n_pairs']:,} pairs): "
                              f"Kendall's tau {_number(systems['kendall_tau']['value'])}, "
                              f"Spearman's rho {_number(systems['spearman_rho']['value'])}, {systems['n_flips']} flips")
        kappa_interval = (f" (95% interval {_number(gate['kappa_low'])} to {_number(gate['kappa_high'])})"
                          if gate["kappa_low"] is not None else "")
        self.stdout.write(f"Gate: {gate['label']} (kappa {_number(gate['kappa'])}{kappa_interval} over {gate['n_pairs']:,} pairs, "
                          f"{gate['min_pairs']:,} needed; tau over {gate['n_runs']} runs, {gate['min_runs']} needed)")
        for reason in gate["reasons"]:
            self.stdout.write(f"  - {reason}")
        for step in gate["steps"]:
            self.stdout.write(f"  next: {step}")
