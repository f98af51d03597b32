"""Fewer human judgments for the same confidence (issue #30), on real graded qrels: prediction-powered estimates
(PPI++) against raters alone with a simulated LLM judge, then the judging orders a round offers (relevant documents
found against judgments spent; ``benchmarks/fewer_judgments_order.py``).

    make bench-fewer-judgments   (or: .venv/bin/python benchmarks/fewer_judgments.py [--seeds 1000]
                                  [--judge-draws 100] [--order-seeds 10] [--json PATH])

Data: the DBpedia-Entity v2 test qrels (400 queries, grades 0-2; benchmarks/reference/README.md) are the raters'
labels, and 8 runs of graded quality are simulated from them (``benchmarks/fewer_judgments_data.py`` says how).
Measures nDCG@10, AP and P@10 (binary ones at relevance level 1), per query, by the engine (``evaluate``).

The judge: an LLM assessor errs like UMBRELA against NIST assessors (/work/shared/reference/judges.md: moderate
agreement per label, Cohen's kappa roughly 0.3-0.5; the model is more lenient than the humans). On the 0-2 scale its
labels follow a confusion matrix P[h, j] = P(judge says j | raters said h):

    P = (1 - e) I + e L,   L = [[0,    0.75, 0.25],     a 0 is over-graded, mostly to 1;
                                [0.35, 0,    0.65],     a 1 goes up to 2 more often than down to 0;
                                [0.2,  0.8,  0   ]]     a 2 can only go down.

With the qrels' grade shares (0: 65%, 1: 20%, 2: 15%) about four errors in five over-grade. The error rate e is
set so that the expected Cohen's kappa is 0.2, 0.35, 0.5, 0.65 or 0.8; the kappa measured on each draw
(scikit-learn's cohen_kappa_score against the qrels) is reported. The judge labels the same pooled documents
the raters did (the unjudged filler documents of the runs count as not relevant for both).

Per kappa and seed: the judge's labels are drawn (``--judge-draws`` draws per kappa, each shared by
seeds / judge-draws seeds: the per-query values are computed once per draw and sliced per seed), then n queries
are drawn at random from the 400 (n = 25, 50, 100; nested); for every run and measure the PPI++ estimate
(``evaluation.engine.ppi.ppi_mean``: raters on the n, judge on the other 400 - n) and the human-only one over the
same n are compared with the truth, the raters' mean over all 400 queries; the same for the paired difference of
the best two runs (run8 - run7). Intervals are the engine's default (unbiased spreads, Student's t with n - 1
degrees of freedom); the coverage of ppi-python's normal interval on the same draws is shown beside. Targets (#30):
  * coverage of the nominal 95% PPI intervals over 1,000 seeds, per measure and budget   -> at least 94%
  * interval width PPI / human-only at n = 25, 50, 100   -> at least 20% narrower when kappa >= 0.5,
                                                            never more than 2% wider at any kappa
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from sklearn.metrics import cohen_kappa_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fewer_judgments_data import load_qrels, simulated_runs  # noqa: E402
from benchmarks.fewer_judgments_order import ordering_report, print_report  # noqa: E402
from evaluation.engine import evaluate, read_qrels, read_run  # noqa: E402
from evaluation.engine.ppi import classical_mean, ppi_mean  # noqa: E402

KAPPAS = (0.2, 0.35, 0.5, 0.65, 0.8)
BUDGETS = (25, 50, 100)
MEASURES = ("nDCG@10", "AP", "P@10")
LENIENT_ERRORS = np.array([[0.0, 0.75, 0.25], [0.35, 0.0, 0.65], [0.2, 0.8, 0.0]])
PAIR = ("run8", "run7")  # the best two runs: the difference run8 - run7
COVERAGE_TARGET, NARROWER_TARGET, WIDER_LIMIT = 0.94, 0.80, 1.02


def confusion(error_rate: float) -> np.ndarray:
    return (1.0 - error_rate) * np.eye(3) + error_rate * LENIENT_ERRORS


def expected_kappa(matrix: np.ndarray, prior: np.ndarray) -> float:
    """Cohen's kappa of judge against raters when the raters' grades have shares ``prior``."""
    observed = float(prior @ np.diag(matrix))
    chance = float(prior @ (prior @ matrix))
    return (observed - chance) / (1.0 - chance)


def error_rate_for(kappa: float, prior: np.ndarray) -> float:
    """The e whose confusion matrix has the expected kappa (kappa falls as e grows: bisection)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if expected_kappa(confusion(middle), prior) > kappa else (low, middle)
    return (low + high) / 2


class Collection:
    """The qrels as columns, the runs read once, and the per-query values of any labelling of the same pairs."""

    def __init__(self, qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, list[str]]]):
        self.queries = sorted(qrels)
        pairs = [(q, d, g) for q in self.queries for d, g in sorted(qrels[q].items())]
        self.query_column = pa.array([q for q, _, _ in pairs])
        self.doc_column = pa.array([d for _, d, _ in pairs])
        self.grades = np.array([g for _, _, g in pairs], dtype=np.int64)
        self.run_names = list(runs)
        self.runs = [read_run({q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()})
                     for run in runs.values()]

    def values(self, grades: np.ndarray) -> np.ndarray:
        """[run, measure, query] per-query values under these grades of the qrels' pairs."""
        table = pa.table({"query_id": self.query_column, "doc_id": self.doc_column, "relevance": pa.array(grades)})
        labels = read_qrels(table)
        out = np.empty((len(self.runs), len(MEASURES), len(self.queries)))
        for r, run in enumerate(self.runs):
            result = evaluate(labels, run, list(MEASURES), all_queries=True, relevance_level=1)
            order = [result.query_ids.index(q) for q in self.queries] if result.query_ids != self.queries else None
            for m, measure in enumerate(result.measures):
                out[r, m] = result.values[measure] if order is None else result.values[measure][order]
        return out


def draw_judge(grades: np.ndarray, matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cumulative = matrix.cumsum(axis=1)[grades]
    return (rng.random(grades.size)[:, None] > cumulative[:, :2]).sum(axis=1)


class Tally:
    """Coverage and summed widths of PPI and human-only intervals (the engine's default: Student's t), per budget
    and measure (and run); and the coverage of ppi-python's normal PPI interval on the same draws."""

    def __init__(self, shape: tuple[int, ...]):
        self.count = 0
        self.ppi_covered, self.human_covered = np.zeros(shape), np.zeros(shape)
        self.ppi_covered_normal = np.zeros(shape)
        self.ppi_width, self.human_width = np.zeros(shape), np.zeros(shape)

    def add(self, index: tuple[int, ...], ppi, human, truth: float, ppi_normal) -> None:
        self.ppi_covered[index] += ppi.low <= truth <= ppi.high
        self.ppi_covered_normal[index] += ppi_normal.low <= truth <= ppi_normal.high
        self.human_covered[index] += human.low <= truth <= human.high
        self.ppi_width[index] += ppi.high - ppi.low
        self.human_width[index] += human.high - human.low


def simulate(collection: Collection, truth_values: np.ndarray, matrix: np.ndarray, *, seeds: int,
             judge_draws: int, kappa_index: int) -> dict:
    n_runs, n_queries = len(collection.run_names), len(collection.queries)
    runs_tally, pair_tally = Tally((len(BUDGETS), len(MEASURES), n_runs)), Tally((len(BUDGETS), len(MEASURES)))
    truth = truth_values.mean(axis=2)
    a, b = (collection.run_names.index(name) for name in PAIR)
    measured_kappas, lams, correlations = [], [], []
    per_draw = -(-seeds // judge_draws)
    done = 0
    for draw in range(judge_draws):
        rng = np.random.default_rng([kappa_index, draw])
        judge_grades = draw_judge(collection.grades, matrix, rng)
        measured_kappas.append(cohen_kappa_score(collection.grades, judge_grades))
        judge_values = collection.values(judge_grades)
        correlations.append([np.mean([np.corrcoef(truth_values[r, m], judge_values[r, m])[0, 1] for r in range(n_runs)])
                             for m in range(len(MEASURES))])
        for _ in range(min(per_draw, seeds - done)):
            order = rng.permutation(n_queries)
            for k, n in enumerate(BUDGETS):
                labelled, rest = order[:n], order[n:]
                for m in range(len(MEASURES)):
                    for r in range(n_runs):
                        y, yhat, yhat_u = truth_values[r, m, labelled], judge_values[r, m, labelled], judge_values[r, m, rest]
                        found = ppi_mean(y, yhat, yhat_u)
                        lams.append(found.lam)
                        runs_tally.add((k, m, r), found, classical_mean(y), truth[r, m],
                                       ppi_mean(y, yhat, yhat_u, interval="normal"))
                    diff_truth, diff_judge = truth_values[a, m] - truth_values[b, m], judge_values[a, m] - judge_values[b, m]
                    parts = (diff_truth[labelled], diff_judge[labelled], diff_judge[rest])
                    pair_tally.add((k, m), ppi_mean(*parts), classical_mean(diff_truth[labelled]), diff_truth.mean(),
                                   ppi_mean(*parts, interval="normal"))
            done += 1
    runs_tally.count = pair_tally.count = done
    return {"runs": runs_tally, "pair": pair_tally, "measured_kappa": measured_kappas, "mean_lam": float(np.mean(lams)),
            "correlation": np.mean(correlations, axis=0).tolist()}


def _report(results: dict, matrices: dict, settings: dict, elapsed: float) -> tuple[str, dict]:
    lines, document = [], {"settings": settings, "kappas": {}, "targets": {}}
    lines.append("Judge confusion matrices P(judge grade | raters' grade), rows raters' 0, 1, 2:")
    for kappa in KAPPAS:
        found = results[kappa]
        measured = np.array(found["measured_kappa"])
        rows = "  ".join("[" + " ".join(f"{p:.3f}" for p in row) + "]" for row in matrices[kappa])
        lines.append(f"  kappa {kappa:<4}  e = {settings['error_rates'][str(kappa)]:.3f}  {rows}  measured kappa "
                     f"{measured.mean():.3f} (range {measured.min():.3f}-{measured.max():.3f}), per-query r "
                     + "/".join(f"{c:.2f}" for c in found["correlation"]) + f", mean lam {found['mean_lam']:.2f}")
    lines.append("  (r: Pearson correlation of the judge's and the raters' per-query values within a run, "
                 + "/".join(MEASURES) + ", averaged over runs and draws)")
    coverage_rows, worst_widths = [], []
    n_runs = len(settings["runs"])

    def share(field: str, k: int, m: int, run: int | None = None) -> float:
        """Covered share over seeds (and runs when run is None) and kappas."""
        return float(np.mean([getattr(results[kp]["runs"], field)[k, m].sum() / (results[kp]["runs"].count * n_runs)
                              if run is None else getattr(results[kp]["runs"], field)[k, m, run] / results[kp]["runs"].count
                              for kp in KAPPAS]))

    lines += ["", f"Coverage of nominal 95% intervals over {settings['seeds']:,} seeds x {n_runs} runs x "
              f"{len(KAPPAS)} kappas: PPI / human-only (both Student's t, the engine's default) / PPI with ppi-python's "
              "normal interval; target PPI >= 94%:",
              f"{'measure':<9}" + "".join(f"{'n=' + str(n):>28}" for n in BUDGETS)]
    for m, measure in enumerate(MEASURES):
        cells = []
        for k, n in enumerate(BUDGETS):
            ppi, human, normal = share("ppi_covered", k, m), share("human_covered", k, m), share("ppi_covered_normal", k, m)
            worst = min(results[kp]["runs"].ppi_covered[k, m].min() / results[kp]["runs"].count for kp in KAPPAS)
            cells.append(f"{100 * ppi:.2f} / {100 * human:.2f} / {100 * normal:.2f}%")
            coverage_rows.append({"measure": measure, "n": n, "ppi": ppi, "human": human, "ppi_normal": normal,
                                  "ppi_worst_run_kappa": worst,
                                  "ppi_per_run": {run: share("ppi_covered", k, m, r) for r, run in enumerate(settings["runs"])},
                                  "met": bool(ppi >= COVERAGE_TARGET)})
        lines.append(f"{measure:<9}" + "".join(f"{c:>28}" for c in cells))
    lines += ["", f"PPI coverage per run at n={BUDGETS[0]} (over seeds and kappas; true means in brackets):",
              f"{'measure':<9}" + "".join(f"{run:>16}" for run in settings["runs"])]
    for m, measure in enumerate(MEASURES):
        lines.append(f"{measure:<9}" + "".join(
            f"{100 * share('ppi_covered', 0, m, r):6.1f}% [{settings['truth'][run][measure]:.2f}]"
            for r, run in enumerate(settings["runs"])))
    lines += ["", "Interval width, PPI / human-only (mean width over seeds and runs; the widest run's ratio in "
              "brackets): target <= 0.80 at kappa >= 0.5, <= 1.02 everywhere",
              f"{'kappa':<6}" + "".join(f"{m + ' n=' + str(n):>20}" for m in MEASURES for n in BUDGETS)]
    width_rows = []
    for kappa in KAPPAS:
        tally = results[kappa]["runs"]
        cells = []
        for m, measure in enumerate(MEASURES):
            for k, n in enumerate(BUDGETS):
                ratio = tally.ppi_width[k, m].sum() / tally.human_width[k, m].sum()
                widest = float((tally.ppi_width[k, m] / tally.human_width[k, m]).max())
                cells.append(f"{ratio:.3f} [{widest:.3f}]")
                met = ratio <= NARROWER_TARGET if kappa >= 0.5 else True
                width_rows.append({"kappa": kappa, "measure": measure, "n": n, "ratio": ratio, "widest_run_ratio": widest,
                                   "met": bool(met and widest <= WIDER_LIMIT)})
                worst_widths.append(widest)
        lines.append(f"{kappa:<6}" + "".join(f"{c:>20}" for c in cells))
    lines += ["", f"Paired difference of the best two runs ({PAIR[0]} - {PAIR[1]}): PPI coverage, width PPI / human-only",
              f"{'kappa':<6}" + "".join(f"{m + ' n=' + str(n):>20}" for m in MEASURES for n in BUDGETS)]
    pair_rows = []
    for kappa in KAPPAS:
        tally = results[kappa]["pair"]
        cells = []
        for m, measure in enumerate(MEASURES):
            for k, n in enumerate(BUDGETS):
                coverage = tally.ppi_covered[k, m] / tally.count
                ratio = tally.ppi_width[k, m] / tally.human_width[k, m]
                cells.append(f"{100 * coverage:.1f}% {ratio:.3f}")
                pair_rows.append({"kappa": kappa, "measure": measure, "n": n, "ppi_coverage": coverage,
                                  "human_coverage": tally.human_covered[k, m] / tally.count, "width_ratio": ratio})
        lines.append(f"{kappa:<6}" + "".join(f"{c:>20}" for c in cells))
    coverage_met = all(r["met"] for r in coverage_rows)
    width_met = all(r["met"] for r in width_rows)
    lines += ["", f"coverage >= 94% per measure and budget: {'met' if coverage_met else 'MISSED'}; "
              f"width <= 0.80 at kappa >= 0.5 and <= 1.02 everywhere: {'met' if width_met else 'MISSED'} "
              f"(widest run ratio anywhere {max(worst_widths):.3f}); {elapsed:.0f} s"]
    for kappa in KAPPAS:
        document["kappas"][str(kappa)] = {"confusion": matrices[kappa].tolist(),
                                          "error_rate": settings["error_rates"][str(kappa)],
                                          "measured_kappa_mean": float(np.mean(results[kappa]["measured_kappa"])),
                                          "measured_kappa_min": float(np.min(results[kappa]["measured_kappa"])),
                                          "measured_kappa_max": float(np.max(results[kappa]["measured_kappa"])),
                                          "mean_lam": results[kappa]["mean_lam"],
                                          "per_query_correlation": dict(zip(MEASURES, results[kappa]["correlation"]))}
    document.update({"coverage": coverage_rows, "width": width_rows, "best_pair": pair_rows,
                     "targets": {"coverage_met": coverage_met, "width_met": width_met}, "seconds": elapsed})
    return "\n".join(lines) + "\n", document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1000, help="samples of labelled queries per kappa (1000)")
    parser.add_argument("--judge-draws", type=int, default=100, help="judge labellings per kappa (100)")
    parser.add_argument("--order-seeds", type=int, default=10,
                        help="seeds the random, Move-To-Front and MM-NS orders are averaged over (10)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    qrels = load_qrels()
    runs = simulated_runs(qrels, seed=0)
    collection = Collection(qrels, runs)
    prior = np.bincount(collection.grades, minlength=3) / collection.grades.size
    truth_values = collection.values(collection.grades)
    error_rates = {kappa: error_rate_for(kappa, prior) for kappa in KAPPAS}
    matrices = {kappa: confusion(e) for kappa, e in error_rates.items()}
    results = {}
    for index, kappa in enumerate(KAPPAS):
        results[kappa] = simulate(collection, truth_values, matrices[kappa], seeds=args.seeds,
                                  judge_draws=min(args.judge_draws, args.seeds), kappa_index=index)
        print(f"kappa {kappa}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    settings = {"seeds": args.seeds, "judge_draws": args.judge_draws, "budgets": list(BUDGETS),
                "measures": list(MEASURES), "runs": collection.run_names, "queries": len(collection.queries),
                "grade_shares": prior.tolist(), "error_rates": {str(k): e for k, e in error_rates.items()},
                "lenient_errors": LENIENT_ERRORS.tolist(), "pair": list(PAIR),
                "truth": {run: dict(zip(MEASURES, truth_values[r].mean(axis=1).tolist()))
                          for r, run in enumerate(collection.run_names)}}
    text, document = _report(results, matrices, settings, time.perf_counter() - started)
    sys.stdout.write(text + "\n")
    ordering_started = time.perf_counter()
    ordering = ordering_report(qrels, runs, seeds=range(args.order_seeds))
    print_report(ordering)
    print(f"({time.perf_counter() - ordering_started:.0f} s)")
    document["ordering"] = {"queries": ordering["queries"], "runs": ordering["runs"], "depth": ordering["depth"],
                            "seeds": ordering["seeds"], "pooled": ordering["pooled"],
                            "relevant_in_pools": ordering["relevant_in_pools"],
                            "judgments": {str(p): n for p, n in ordering["judgments"].items()},
                            "found": {order: {str(p): n for p, n in found.items()} for order, found in ordering["found"].items()},
                            "targets": ordering["targets"]}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
