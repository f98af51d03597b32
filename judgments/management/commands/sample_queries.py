from pathlib import Path

from django.core.management.base import CommandError

from judgments.lib.sampling import DEFAULT_QUOTAS, METHODS, Boundaries, Quota
from judgments.models import QueryLog
from judgments.ops.log_sampling import SamplingSettings, draw, query_set_csv, save_sample, tier_table

from ._base import ProjectCommand


class Command(ProjectCommand):
    help = "Draw a seeded head/torso/tail sample from a query log and save it as a query set; prints the tier table."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--log", help="the query log's name (default: the newest log of the project)")
        for tier, default in DEFAULT_QUOTAS.items():
            parser.add_argument(f"--{tier}", type=int, default=default.n, help=f"queries to draw from the {tier} (default {default.n})")
            parser.add_argument(f"--{tier}-method", choices=METHODS, default=default.method,
                                help=f"draw the {tier} uniformly or proportionally to traffic (default {default.method})")
        parser.add_argument("--seed", type=int, help="the same log, settings and seed give the same sample (default: random, printed)")
        parser.add_argument("--window-days", type=int, default=90, help="days counted, ending at --end (default 90; 0 = the whole log)")
        parser.add_argument("--end", help="the window's last day, YYYY-MM-DD (default: the newest day in the log)")
        parser.add_argument("--boundaries", default="rank:500,5000", help="rank:500,5000 (default) or share:0.8,0.95")
        parser.add_argument("--stratify", help="a segment column: each of its values gets its own tiers and quotas")
        parser.add_argument("--include-earlier", action="store_true", help="do not leave out queries already in the project's query sets")
        parser.add_argument("--name", help="the query set's name (default: '<log> sample <seed>')")
        parser.add_argument("--csv", type=Path, help="also write the sample as CSV to this path")
        parser.add_argument("--dry-run", action="store_true", help="print the tier table without saving anything")

    def handle(self, *args, project: str, log: str | None, seed: int | None, window_days: int, end: str | None,
               boundaries: str, stratify: str | None, include_earlier: bool, name: str | None, csv: Path | None,
               dry_run: bool, **options):
        from datetime import date

        target = self.project(project)
        logs = QueryLog.objects.filter(project=target)
        found = (logs.filter(name=log) if log else logs.order_by("-created_at")).first()
        if found is None:
            raise CommandError(f"no query log named {log!r} in {target.slug}" if log else f"{target.slug} has no query log yet")
        try:
            settings = SamplingSettings(
                window_days=window_days or None, end=date.fromisoformat(end) if end else None, boundaries=Boundaries.parse(boundaries),
                quotas={tier: Quota(options[tier], options[f"{tier}_method"]) for tier in ("head", "torso", "tail")},
                seed=seed, stratify_by=stratify, exclude_earlier=not include_earlier)
            drawn = draw(found, settings)
            for line in tier_table(drawn):
                self.stdout.write(line)
            if dry_run:
                return
            collection = save_sample(drawn, name=name or f"{found.name} sample {drawn.seed}")
        except ValueError as problem:
            raise CommandError(str(problem)) from None
        self.stdout.write(f"Saved {collection.queries.count()} queries as query set {collection.name!r} (seed {drawn.seed}).")
        if csv:
            with csv.open("w", encoding="utf-8", newline="") as handle:
                handle.writelines(query_set_csv(collection))
            self.stdout.write(f"Wrote {csv}.")
