"""Benchmark the metric engine against trec_eval, pytrec_eval and ranx, and time the significance tests.

Run by hand (`make bench`):  .venv/bin/python benchmarks/engine.py [--cases msmarco,2k,mem,dl,small,wide]
[--repeat 5] [--quick] [--trec-eval PATH]

Synthetic TREC files are generated with a fixed seed into benchmarks/data/ (git-ignored) and kept
between runs. Each tool runs as a whole process, as a user runs it (interpreter start, imports,
reading, evaluating, printing). The tools take turns: each repeat runs Verdict, trec_eval (with
--trec-eval PATH), pytrec_eval and ranx one after the other, so that other load on the machine falls
on all of them alike; a ratio is the median over repeats of Verdict's time over the peer's in the
same repeat. Wall
times are medians; peak RSS is the largest "Maximum resident set size" of GNU time -v (apt package
`time`; without it, wait4()'s ru_maxrss). ranx is run once untimed first so that numba's on-disk
cache is warm. The engine's bytecode is compiled first (as pip does on install), so that no run
pays for compiling it, whatever PYTHONDONTWRITEBYTECODE says.

Targets (PASS/FAIL): the msmarco, 2k, mem and wide cases end to end in at most 0.3 x pytrec_eval's
wall time (the dl and small cases are reported without one: pytrec_eval takes 0.07-0.25 s there, most
of it starting Python and importing numpy, which Verdict needs too); with trec_eval, the msmarco, 2k
and mem cases in at most 0.5 x its wall time and at most its peak memory, and Verdict's output the
same bytes as trec_eval's (both print the timed command's six measures); peak memory at most 1 GB; a
10,000-resample permutation test over 6,980 queries in at most 0.15 s per measure (in process, best
of 5, median printed beside it); our aggregates within 1e-4 of pytrec_eval's (compared at full
precision through an extra, untimed --json run). The exit status is 1 when a target fails.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
PEERS = ROOT / "benchmarks" / "peers"
sys.path.insert(0, str(ROOT))

MEASURES = ["map", "ndcg_cut.10", "recip_rank", "P.10", "recall.100", "recall.1000"]
# How the command lines ask for them: trec_eval keeps only the first -m of a family, so both recall
# cutoffs go in one list.
MEASURE_ARGS = ["-m", "map", "-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "P.10", "-m", "recall.100,1000"]
AGREEMENT = 1e-4
SPEED_RATIO = 0.3
TREC_EVAL_SPEED_RATIO = 0.5
TREC_EVAL_CASES = ("msmarco", "2k", "mem")  # the goals against trec_eval (time and memory) apply here
MEMORY_MB = 1024
PERMUTATION_SECONDS = 0.15
SIGNIFICANCE_QUERIES = 6_980
RESAMPLES = 10_000


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    queries: int
    depth: int
    kind: str  # "binary" (MS MARCO-like) or "graded" (TREC DL-like)
    relevant: float  # binary: mean relevant per query; graded: judged per query


CASES = {
    "msmarco": Case("msmarco", 6_980, 1_000, "binary", 1.1),
    "2k": Case("msmarco", 2_000, 1_000, "binary", 1.1),
    "mem": Case("mem", 7_000, 1_000, "graded", 40),  # 7,000,000 lines, 40 judgments a query
    "dl": Case("dl", 200, 1_000, "graded", 200),
    "small": Case("small", 50, 100, "graded", 30),
    "wide": Case("wide", 50_000, 100, "binary", 1.5),
}
QUICK = {
    "msmarco": Case("msmarco", 700, 200, "binary", 1.1),
    "2k": Case("msmarco", 200, 200, "binary", 1.1),
    "mem": Case("mem", 700, 200, "graded", 40),
    "dl": Case("dl", 20, 200, "graded", 60),
    "small": Case("small", 10, 50, "graded", 20),
    "wide": Case("wide", 5_000, 20, "binary", 1.5),
}
NO_SPEED_TARGET = ("dl", "small")  # start-up bound for both tools: see the docstring


# Data generation


def _ranks(rng: np.random.Generator, size: int, depth: int) -> np.ndarray:
    """Log-uniform ranks in 1..depth: relevant documents cluster near the top, as in real runs."""
    return np.minimum(depth, np.exp(rng.random(size) * np.log(depth + 1)).astype(int))


def generate(case: Case, seed: int, folder: Path) -> tuple[Path, Path]:
    qrels_path = folder / f"{case.name}-{case.queries}x{case.depth}.qrels"
    run_path = folder / f"{case.name}-{case.queries}x{case.depth}.run"
    if qrels_path.exists() and run_path.exists():
        return qrels_path, run_path
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, case.queries, case.depth])
    qids = np.sort(rng.choice(1_200_000, case.queries, replace=False)) + 1
    partial_run = run_path.with_name(run_path.name + ".partial")
    partial_qrels = qrels_path.with_name(qrels_path.name + ".partial")
    with open(partial_run, "w") as run_file, open(partial_qrels, "w") as qrels_file:
        for qid in qids.tolist():
            _write_query(case, rng, qid, run_file, qrels_file)
    partial_qrels.rename(qrels_path)
    partial_run.rename(run_path)
    return qrels_path, run_path


def _write_query(case: Case, rng: np.random.Generator, qid: int, run_file, qrels_file) -> None:
    docs = np.unique(rng.integers(0, 10_000_000, case.depth + 64))
    docs = rng.permutation(docs)
    retrieved, spare = docs[: case.depth], docs[case.depth:]
    # Descending scores with occasional exact ties (about 5% of neighbours share a score).
    gaps = rng.exponential(0.02, case.depth) * (rng.random(case.depth) > 0.05)
    scores = np.round(25.0 - np.cumsum(gaps), 3)
    run_file.writelines(
        f"{qid} Q0 D{doc:07d} {rank} {score:.3f} bench\n"
        for rank, (doc, score) in enumerate(zip(retrieved.tolist(), scores.tolist()), 1)
    )
    if case.kind == "binary":
        count = 1 + rng.poisson(case.relevant - 1)
        found = rng.random(count) < 0.75
        judged = list(dict.fromkeys(
            retrieved[rank - 1] if hit else spare[i]
            for i, (hit, rank) in enumerate(zip(found, _ranks(rng, count, case.depth)))
        ))
        grades = [1] * len(judged)
    else:
        count = int(case.relevant)
        pooled = min(int(count * 0.85), case.depth // 4 * 3)
        top = rng.choice(min(case.depth, 250), pooled, replace=False)
        judged = [retrieved[r] for r in top.tolist()] + spare[: min(count - pooled, 64)].tolist()
        near_top = np.concatenate([top < 20, np.zeros(len(judged) - pooled, dtype=bool)])
        grades = np.where(
            near_top,
            rng.choice(4, len(judged), p=[0.3, 0.3, 0.2, 0.2]),
            rng.choice(4, len(judged), p=[0.6, 0.25, 0.1, 0.05]),
        ).tolist()
    qrels_file.writelines(
        f"{qid} 0 D{int(doc):07d} {grade}\n" for doc, grade in zip(judged, grades)
    )


# Timing whole processes


@dataclasses.dataclass
class Timing:
    wall: list[float]
    rss_mb: float
    scores: dict[str, float] | None
    error: str = ""
    output: str = ""  # the last run's standard output


def run_process(argv: list[str]) -> tuple[float, float, str, str, int]:
    """Run argv; return wall seconds, peak RSS (MB), stdout, stderr, exit code.

    Peak RSS comes from GNU time -v where installed. Otherwise from wait4(): on Linux a child's
    ru_maxrss also counts the parent's resident memory at fork time, so that fallback can
    overstate small tools (this script keeps its own footprint small for that reason).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    gnu_time = Path("/usr/bin/time")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".time") as report:
        prefix = [str(gnu_time), "-v", "-o", report.name] if gnu_time.exists() else []
        start = time.perf_counter()
        process = subprocess.Popen(prefix + argv, stdout=out, stderr=err, cwd=ROOT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        peak_kb = usage.ru_maxrss
        for line in report.read().splitlines():
            if "Maximum resident set size" in line:
                peak_kb = int(line.rsplit(":", 1)[1])
        out.seek(0)
        err.seek(0)
        return wall, peak_kb / 1024, out.read().decode(), err.read().decode(), process.returncode


def parse_scores(text: str) -> dict[str, float]:
    """Aggregates from JSON ({measure: value}) or trec_eval-style lines (measure [all] value)."""
    text = text.strip()
    if text.startswith("{"):
        data = json.loads(text)
        data = data.get("all", data.get("aggregate", data)) if isinstance(data, dict) else data
        return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))}
    scores = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "all":
            name, value = parts[0], parts[2]
        elif len(parts) == 2:
            name, value = parts
        else:
            continue
        try:
            scores[name] = float(value)
        except ValueError:
            pass
    return scores


def canonical(scores: dict[str, float]) -> dict[str, float]:
    """Map the engine's measure names (trec_eval or canonical spellings) to trec_eval names."""
    aliases = {
        "map": "map", "ap": "map",
        "ndcg_cut_10": "ndcg_cut.10", "ndcg_cut.10": "ndcg_cut.10", "ndcg@10": "ndcg_cut.10",
        "recip_rank": "recip_rank", "rr": "recip_rank", "mrr": "recip_rank",
        "p_10": "P.10", "p.10": "P.10", "p@10": "P.10",
        "recall_100": "recall.100", "recall.100": "recall.100", "r@100": "recall.100",
        "recall@100": "recall.100",
        "recall_1000": "recall.1000", "recall.1000": "recall.1000", "r@1000": "recall.1000",
        "recall@1000": "recall.1000",
    }
    return {aliases[k.lower()]: v for k, v in scores.items() if k.lower() in aliases}


def time_tools(argvs: dict[str, list[str]], repeat: int, warmup: tuple[str, ...] = ()) -> dict[str, Timing]:
    """Time every tool `repeat` times, taking turns, so that load on the machine hits them alike."""
    for tool in warmup:
        run_process(argvs[tool])
    timings = {tool: Timing([], 0.0, None) for tool in argvs}
    for _ in range(repeat):
        for tool, argv in argvs.items():
            timing = timings[tool]
            if timing.error:
                continue
            wall, rss, out, err, code = run_process(argv)
            if code != 0:
                timing.error = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
                continue
            timing.wall.append(wall)
            timing.rss_mb = max(timing.rss_mb, rss)
            timing.scores = canonical(parse_scores(out))
            timing.output = out
    return timings


def paired_ratio(ours: Timing, reference: Timing) -> float | None:
    """The median over repeats of our wall time over the reference's in the same repeat."""
    if ours.error or reference.error or not ours.wall or len(ours.wall) != len(reference.wall):
        return None
    return statistics.median(a / b for a, b in zip(ours.wall, reference.wall))


def tools(qrels: Path, run: Path, trec_eval: str | None) -> dict[str, list[str]]:
    python = sys.executable
    argvs = {"verdict": [python, "-m", "evaluation.engine", *MEASURE_ARGS, str(qrels), str(run)]}
    if trec_eval:
        argvs["trec_eval"] = [trec_eval, *MEASURE_ARGS, str(qrels), str(run)]
    argvs["pytrec_eval"] = [python, str(PEERS / "pytrec_eval_peer.py"), str(qrels), str(run)]
    argvs["ranx"] = [python, str(PEERS / "ranx_peer.py"), str(qrels), str(run)]
    return argvs


def trec_eval_checks(name: str, ours: Timing, trec_eval: Timing) -> list[tuple[str, bool]]:
    """Verdict against trec_eval on one case: the same output bytes, and (on the goal's cases) at most
    0.5 x its wall time and at most its peak memory."""
    if trec_eval.error or ours.error or len(ours.wall) != len(trec_eval.wall):
        return [(f"{name}: trec_eval and verdict both ran ({trec_eval.error or ours.error or 'a run failed'})", False)]
    checks = [(f"{name}: verdict prints the same bytes as trec_eval", ours.output == trec_eval.output)]
    if name in TREC_EVAL_CASES:
        ratio = paired_ratio(ours, trec_eval)
        checks.append((f"{name}: verdict wall {statistics.median(ours.wall):.2f}s, {ratio:.2f} x trec_eval "
                       f"{statistics.median(trec_eval.wall):.2f}s (median of paired ratios) <= "
                       f"{TREC_EVAL_SPEED_RATIO}", ratio <= TREC_EVAL_SPEED_RATIO))
        checks.append((f"{name}: verdict peak RSS {ours.rss_mb:.0f} MB <= trec_eval's {trec_eval.rss_mb:.0f} MB",
                       ours.rss_mb <= trec_eval.rss_mb))
    return checks


def have(module: str) -> bool:
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT))).returncode == 0


# Significance, in process


def per_query_scores(qrels: Path, run: Path, queries: int) -> dict[str, np.ndarray]:
    """pytrec_eval's per-query scores for the first `queries` query ids, one array per measure."""
    import pytrec_eval

    qrels_dict: dict[str, dict[str, int]] = {}
    for line in qrels.read_text().splitlines():
        qid, _, doc, rel = line.split()
        qrels_dict.setdefault(qid, {})[doc] = int(rel)
    run_dict: dict[str, dict[str, float]] = {}
    for line in run.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run_dict.setdefault(qid, {})[doc] = float(score)
    per_query = pytrec_eval.RelevanceEvaluator(qrels_dict, set(MEASURES)).evaluate(run_dict)
    qids = sorted(per_query)[:queries]
    return {m: np.array([per_query[q][m.replace(".", "_")] for q in qids]) for m in MEASURES}


def time_significance(qrels: Path, run: Path, repeat: int, queries: int) -> list[tuple]:
    """Per measure: (best, median) seconds of permutation_test and bootstrap_ci over `queries`.

    Run A is the generated run; run B gives 70% of the queries the scores of another query (a
    fixed shuffle), so differences look like real per-query differences between two systems.
    """
    from evaluation.engine.significance import bootstrap_ci, permutation_test

    scores = per_query_scores(qrels, run, queries)
    # The millions of parsed objects are garbage now; collect them so that no garbage-collector
    # pass over them lands inside a timed call.
    gc.collect()
    rng = np.random.default_rng(0)
    n = len(scores[MEASURES[0]])
    shuffled = rng.permutation(n)
    swapped = rng.random(n) < 0.7
    rows = []
    for measure in MEASURES:
        a = scores[measure]
        d = a - np.where(swapped, a[shuffled], a)
        permutation_test(d, resamples=RESAMPLES)  # warm-up: imports, thread pool
        perm = seconds(lambda: permutation_test(d, resamples=RESAMPLES), repeat)
        boot = seconds(lambda: bootstrap_ci(d, resamples=RESAMPLES), repeat)
        rows.append((measure, n, perm, boot, permutation_test(d), bootstrap_ci(d)))
    return rows


def seconds(fn, repeat: int) -> tuple[float, float]:
    """Best and median wall time of `repeat` calls.

    The target is checked on the best time, as timeit advises: slower runs measure other work
    on the machine, not the code. The median is printed beside it.
    """
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


# Report


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="msmarco,2k,mem,dl,small,wide",
                        help="comma-separated: " + ",".join(CASES))
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per tool (median)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke-testing")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--no-ranx", action="store_true", help="skip ranx")
    parser.add_argument("--no-significance", action="store_true")
    parser.add_argument("--trec-eval", metavar="PATH",
                        help="a trec_eval binary: time it too, and compare its output with Verdict's")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)

    sizes = QUICK if args.quick else CASES
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    has_engine = (ROOT / "evaluation" / "engine" / "__main__.py").exists()
    has_ranx = not args.no_ranx and have("ranx")
    if has_engine:
        compileall.compile_dir(ROOT / "evaluation" / "engine", quiet=1)
    if args.trec_eval and not os.access(args.trec_eval, os.X_OK):
        parser.error(f"--trec-eval {args.trec_eval}: not an executable file")

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# {os.cpu_count()} CPUs, load average {load} (other work on the machine skews times)")
    checks: list[tuple[str, bool]] = []
    table: list[tuple] = []
    deltas: list[str] = []
    for name in names:
        case = sizes[name]
        start = time.perf_counter()
        qrels, run = generate(case, args.seed, DATA)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"# {name}: {case.queries} queries x {case.depth}, files ready in "
              f"{time.perf_counter() - start:.1f}s ({run.stat().st_size / 1e6:.0f} MB run), "
              f"load average {load}", flush=True)
        argvs = tools(qrels, run, args.trec_eval)
        if not has_engine:
            print("# verdict: evaluation/engine/__main__.py not found, skipped")
            del argvs["verdict"]
        if not has_ranx:
            print("# ranx: skipped (--no-ranx)" if args.no_ranx else
                  "# ranx: not installed (make bench installs it), skipped")
            del argvs["ranx"]
        results = time_tools(argvs, args.repeat, warmup=("ranx",) if has_ranx else ())
        for tool, timing in results.items():
            if timing.error:
                print(f"# {tool} failed: {timing.error}")
            elif tool == "verdict":
                # The timed text output has trec_eval's 4 decimals; compare at full precision.
                *_, out, _, code = run_process(argvs[tool] + ["--json"])
                if code == 0:
                    timing.scores = canonical(parse_scores(out))
        reference = results.get("pytrec_eval")
        trec_eval = results.get("trec_eval")
        for tool, timing in results.items():
            if not timing.wall:
                table.append((name, tool, None, None, None, None))
                continue
            wall = statistics.median(timing.wall)
            ratio = paired_ratio(timing, reference) if reference else None
            trec_ratio = paired_ratio(timing, trec_eval) if trec_eval else None
            table.append((name, tool, wall, timing.rss_mb, trec_ratio, ratio))
            if tool == "verdict":
                checks.append((f"{name}: verdict peak RSS {timing.rss_mb:.0f} MB <= {MEMORY_MB} MB",
                               timing.rss_mb <= MEMORY_MB))
                if name not in NO_SPEED_TARGET and ratio is not None:
                    checks.append((f"{name}: verdict wall {wall:.2f}s, {ratio:.2f} x pytrec_eval "
                                   f"{statistics.median(reference.wall):.2f}s (median of paired "
                                   f"ratios) <= {SPEED_RATIO}", ratio <= SPEED_RATIO))
                if trec_eval:
                    checks += trec_eval_checks(name, timing, trec_eval)
        if reference and reference.scores:
            for tool in ("verdict", "ranx"):
                timing = results.get(tool)
                if not timing or not timing.scores:
                    continue
                diffs = {m: timing.scores.get(m, float("nan")) - reference.scores[m]
                         for m in MEASURES}
                deltas.append(f"{name:8} {tool:8} " + "  ".join(
                    f"{m}={reference.scores[m]:.4f}{d:+.1e}" for m, d in diffs.items()))
                if tool == "verdict":
                    worst = max(abs(d) if d == d else float("inf") for d in diffs.values())
                    checks.append((f"{name}: verdict agrees with pytrec_eval within {AGREEMENT} "
                                   f"(worst {worst:.1e})", worst <= AGREEMENT))

    print()
    print(f"{'case':8} {'tool':12} {'wall s':>8} {'peak MB':>8} {'x trec_eval':>11} {'x pytrec':>9}")
    for name, tool, wall, rss, trec_ratio, ratio in table:
        if wall is None:
            print(f"{name:8} {tool:12} {'failed':>8}")
            continue
        print(f"{name:8} {tool:12} {wall:8.2f} {rss:8.0f} {_ratio(trec_ratio):>11} {_ratio(ratio):>9}")
    if deltas:
        print("\nAggregate vs pytrec_eval (value, then tool minus pytrec_eval):")
        print("\n".join(deltas))

    if not args.no_significance:
        case = sizes["msmarco"]
        qrels, run = generate(case, args.seed, DATA)
        queries = min(SIGNIFICANCE_QUERIES, case.queries)
        repeat = max(args.repeat, 5)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\nSignificance, in process, {RESAMPLES} resamples, {queries} queries, best and "
              f"median of {repeat} (load average {load}):")
        print(f"{'measure':12} {'perm best':>9} {'median':>7} {'boot best':>9} {'median':>7} "
              f"{'p':>7}  95% CI")
        for measure, n, perm, boot, p, (low, high) in time_significance(
                qrels, run, repeat, queries):
            print(f"{measure:12} {perm[0]:9.3f} {perm[1]:7.3f} {boot[0]:9.3f} {boot[1]:7.3f} "
                  f"{p:7.4f}  [{low:+.4f}, {high:+.4f}]")
            checks.append((f"permutation test {measure}: best {perm[0]:.3f}s (median "
                           f"{perm[1]:.3f}s) <= {PERMUTATION_SECONDS}s ({n} queries)",
                           perm[0] <= PERMUTATION_SECONDS))

    print()
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    if args.quick:
        print("(--quick: sizes are reduced, the targets are indicative only)")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
