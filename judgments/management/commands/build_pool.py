from django.core.management.base import CommandError
from django.db import transaction

from judgments.models import Pool
from judgments.ops.pools import PoolRefused, add_runs_to_pool, create_answer_pool, create_pool

from ._base import ProjectCommand


class Command(ProjectCommand):
    help = ("Pool the top K of several stored runs over a query set (adds runs to the pool if it exists), "
            "or, with --answers, pool the answers of answer runs for an answer round.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--query-set", required=True, help="the query set's name")
        chosen = parser.add_mutually_exclusive_group(required=True)
        chosen.add_argument("--runs", nargs="+", help="the stored runs' names")
        chosen.add_argument("--answers", nargs="+", metavar="ANSWER_RUN", help="the answer runs' names: a pool of answers")
        parser.add_argument("--depth", type=int, default=10)
        parser.add_argument("--strategy", choices=[s.value for s in Pool.Strategy], default=Pool.Strategy.BEST_RANK)
        parser.add_argument("--name", help="the pool's name (default: the query set's name and the depth)")

    def handle(self, *args, project: str, query_set: str, runs: list[str] | None, answers: list[str] | None, depth: int,
               strategy: str, name: str | None, **options):
        target = self.project(project)
        collection = target.query_sets.filter(name=query_set).first()
        if collection is None:
            raise CommandError(f"no query set named {query_set!r} in {target.slug}")
        if answers:
            return self.answer_pool(target, collection, answers, name or f"{query_set} answers")
        stored = {run.name: run for run in target.runs.filter(name__in=runs)}
        unknown = [name for name in runs if name not in stored]
        if unknown:
            raise CommandError(f"no stored run named {', '.join(map(repr, unknown))} in {target.slug}")
        name = name or f"{query_set} depth {depth}"
        try:
            with transaction.atomic():  # a refused pool is not left behind empty
                pool = target.pools.filter(name=name).first() or create_pool(
                    target, name=name, query_set=collection, depth=depth, strategy=strategy
                )
                if pool.depth != depth:
                    raise PoolRefused(f"pool {name!r} exists with depth {pool.depth}, not {depth}")
                report = add_runs_to_pool(pool, [stored[name] for name in runs])
        except PoolRefused as refusal:
            raise CommandError(str(refusal)) from None
        self.stdout.write(
            f"Pool {pool.name!r}: {report['total_pairs']} pairs over {len(report['pairs_per_query'])} queries "
            f"from {pool.runs.count()} runs; {report['missing_from_corpus']} pairs name documents missing from the corpus."
        )
        for system, count in report.get("unique_by_system", {}).items():
            self.stdout.write(f"  {system}: {count} pairs only this system found")

    def answer_pool(self, target, collection, names: list[str], name: str) -> None:
        stored = {run.name: run for run in target.answer_runs.filter(name__in=names)}
        unknown = [name for name in names if name not in stored]
        if unknown:
            raise CommandError(f"no answer run named {', '.join(map(repr, unknown))} in {target.slug}")
        try:
            pool = create_answer_pool(target, name=name, query_set=collection, answer_runs=[stored[n] for n in names])
        except PoolRefused as refusal:
            raise CommandError(str(refusal)) from None
        self.stdout.write(f"Pool of answers {pool.name!r}: {pool.report['total_pairs']} answers over "
                          f"{len(pool.report['pairs_per_query'])} queries from {len(names)} answer runs.")
        for run_name, count in pool.report["answers_by_run"].items():
            self.stdout.write(f"  {run_name}: {count} answers")
