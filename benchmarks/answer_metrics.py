"""The "which answer metric agrees with the raters" report at the page's bound, against the plain way.

    .venv/bin/python benchmarks/answer_metrics.py [--answers 2000] [--resamples 1000]

Case: an answer round of N graded answers (three answer runs, N/3 queries with two references each,
grades 0-2): the eight metrics per answer with the engine's `score_answer`, then
`judgments.lib.metric_agreement.report` (tau-b and rho per answer and per system, 1,000 query resamples).
Peer: the same per-answer intervals the plain way, scipy's kendalltau and spearmanr on each copied
resample, timed on 20 resamples and scaled to the same number. No database: gathering is two queries.
"""

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.engine.answers import ANSWER_MEASURES, score_answer  # noqa: E402
from judgments.lib import metric_agreement as ma  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(1)
    words = [f"w{i}" for i in range(300)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    n_queries = args.answers // 3
    references = {f"q{q}": [text(5), text(8)] for q in range(n_queries)}
    rows = [(f"q{q}", system, text(25)) for q in range(n_queries) for system in ("a", "b", "c")]
    score_answer("warm up", ["the stemmer"], ANSWER_MEASURES)
    start = time.perf_counter()
    scored = [score_answer(answer, references[q], ANSWER_MEASURES) for q, _system, answer in rows]
    scoring = time.perf_counter() - start
    answers = [ma.Answer(q, system, float(rng.randint(0, 2)), values) for (q, system, _), values in zip(rows, scored)]
    start = time.perf_counter()
    ma.report(answers, ANSWER_MEASURES, resamples=args.resamples)
    statistics = time.perf_counter() - start

    queries = sorted({a.query for a in answers})
    draws = ma.query_draws(len(queries), 20, 0)
    position = {q: i for i, q in enumerate(queries)}
    grades = np.array([a.grade for a in answers])
    start = time.perf_counter()
    for metric in ANSWER_MEASURES:
        values = np.array([a.metrics[metric] for a in answers])
        for counts in draws:
            copies = counts[[position[a.query] for a in answers]].astype(int)
            x, y = np.repeat(values, copies), np.repeat(grades, copies)
            stats.kendalltau(x, y)
            stats.spearmanr(x, y)
    peer = (time.perf_counter() - start) / 20 * args.resamples
    print(f"{len(rows):,} answers, {len(ANSWER_MEASURES)} metrics, {args.resamples:,} resamples")
    print(f"  scoring with the engine          {scoring:6.2f} s")
    print(f"  report (metric_agreement)        {statistics:6.2f} s")
    print(f"  peer: scipy per copied resample  {peer:6.2f} s (per-answer intervals only; 20 resamples, scaled)")


if __name__ == "__main__":
    main()
