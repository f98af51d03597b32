from django.core.management.base import BaseCommand, CommandError

from judgments.ops.actions import ActionRefused
from judgments.ops.automatic import PairChoice, embedded_words, run_judge

from ._rounds import add_round_arguments, find_judge, find_round


class Command(BaseCommand):
    help = "Grade a round's pairs with one of its automatic judges (what the Run judge job does)."

    def add_arguments(self, parser):
        add_round_arguments(parser, judge=True)
        parser.add_argument("--pairs", default="all",
                            help="all, unjudged (pairs without a human grade), sample:N (a seeded sample of N pairs) or "
                                 "calibrate[:N] (a seeded sample of N pairs with a human label, stratified by it; "
                                 "N: the judge's minimum of shared pairs)")
        parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
        parser.add_argument("--token-budget", type=int, default=None,
                            help="an LLM judge asks nothing more once its requests cost this many tokens")

    def handle(self, *args, round: str, project: str | None, judge: str, pairs: str, seed: int,
               token_budget: int | None, **options):
        chosen = find_judge(find_round(round, project), judge)
        if token_budget is not None and token_budget < 1:
            raise CommandError("--token-budget must be at least 1")
        try:
            choice = PairChoice.parse(pairs, seed, judge=chosen)
            result = run_judge(chosen, choice, progress=self._progress, token_budget=token_budget)
        except (ValueError, ActionRefused) as problem:
            raise CommandError(str(problem)) from None
        self.stderr.write("")
        problems = ", ".join(f"{n:,} {problem.replace('_', ' ')}" for problem, n in result["could_not_judge"].items())
        self.stdout.write(
            f"{judge}: {result['judged']:,} pairs judged of {result['chosen']:,} chosen ({choice.describe()}), "
            f"{result['skipped']:,} skipped (graded before), could not judge: {problems or 'none'}; "
            f"{result['requests']:,} requests, {result['cached']:,} cached replies, "
            f"{result['prompt_tokens'] + result['completion_tokens']:,} tokens "
            f"({result['prompt_tokens']:,} prompt, {result['completion_tokens']:,} completion)"
            + (f"; {embedded_words(result['texts_embedded'], result['texts_from_the_cache'])}" if "texts_embedded" in result else "")
            + (f"; {result['ended']}" if "ended" in result else ""))
        if result["failures"]:
            causes = ", ".join(f"{n:,} {cause}" for cause, n in result["failures"].items())
            if result["outcome"] == "failed":
                raise CommandError(f"every pair it tried failed: {causes}")
            self.stdout.write(f"finished with {sum(result['failures'].values()):,} failures: {causes}")

    def _progress(self, done: int, total: int | None = None, message: str = "") -> None:
        self.stderr.write(f"\r{message}", ending="")
