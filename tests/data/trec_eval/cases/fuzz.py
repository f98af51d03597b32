"""Dev-time fuzzing, not run in CI: random small qrels and runs x random trec_eval option sets, each run through
a trec_eval 10.0 binary and through verdict-eval (in process); prints every combination whose stdout or exit status
differs.

    .venv/bin/python tests/data/trec_eval/cases/fuzz.py /path/to/trec_eval [--count 500] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from evaluation.engine.trec_eval import trec_eval_main

FAMILIES = ["official", "all_trec", "set", "P", "P.5", "P.3,1", "recall.2,4", "map", "map_cut.3", "ndcg",
            "ndcg.1=2,2=5", "ndcg_cut.2,5", "relstring", "relstring.4", "utility", "utility.2,-1,-0.5,0.25", "G",
            "G.1=2,2=5", "G.1=0.5,3=0", "ndcg.2=2.5,1=0.5", "binG", "Rndcg", "Rndcg.1=0.5,2=3", "ndcg_rel", "ndcg_rel.2=1", "rbp_resid", "rbp_resid.p=0.5",
            "iprec_at_recall", "11pt_avg", "11pt_avg.0.2,0.5", "bpref", "infAP", "Rprec_mult", "unj", "rbp",
            "success", "set_F", "relative_P", "num_nonrel_judged_ret", "gm_map", "recip_rank"]


def random_files(rng: random.Random, c_numbers: bool = False) -> tuple[str, str]:
    queries = [f"q{i}" for i in range(rng.randint(1, 5))]
    docs = [f"d{i}" for i in range(rng.randint(2, rng.choice([14, 14, 60])))]
    qrels, run = [], []
    for q in queries:
        if rng.random() < 0.85:
            for d in rng.sample(docs, rng.randint(1, len(docs))):
                grade = rng.choice([0, 0, 0, 1, 1, 2, 3, -1] if rng.random() < 0.9 else [0, 1, 12])
                if c_numbers and rng.random() < 0.3:
                    grade = rng.choice(["1.5", "0.7", "2e1", "+2", "x", "-0.5", "3abc"])
                qrels.append(f"{q} 0 {d} {grade}")
        if rng.random() < 0.85:
            for rank, d in enumerate(rng.sample(docs + ["x1", "x2", "x3"], rng.randint(1, len(docs) + 3))):
                score = rng.choice([rng.randint(0, 5), round(rng.random(), 3)])
                if c_numbers and rng.random() < 0.25:
                    score = rng.choice(["nan", "inf", "-inf", "NaN", "1e999", "abc", "2.5x", "0x1p-2", "-nan"])
                run.append(f"{q} Q0 {d} {rank} {score} tag")
    if not qrels:
        qrels.append(f"{queries[0]} 0 {docs[0]} 1")
    if not run:
        run.append(f"{queries[0]} Q0 {docs[0]} 1 1.0 tag")
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n"


def random_options(rng: random.Random) -> list[str]:
    options = []
    for flag in ("-q", "-c", "-J", "-n"):
        if rng.random() < 0.4:
            options.append(flag)
    if rng.random() < 0.3:
        options += ["-M", str(rng.choice([0, 1, 2, 3, 5, 100]))]
    if rng.random() < 0.3:
        options.append(f"-l{rng.choice([0, 1, 2, 3])}")
    if rng.random() < 0.2:
        options += ["-N", str(rng.choice([0, 50, 1000]))]
    if rng.random() < 0.1:
        options += ["-D", f"0.q{rng.randint(0, 4)}"]
    if rng.random() < 0.15:
        options += ["-Z", "zscores"]
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        options += rng.choice([["-m", rng.choice(FAMILIES)], [f"--measure={rng.choice(FAMILIES)}"]])
    return options


def random_zscores(rng: random.Random) -> str:
    """Every query has a line (trec_eval reads past its table for a query it lacks: a crash, not a result)."""
    names = ["num_ret", "num_rel", "map", "P_5", "P_10", "Rprec", "bpref", "recip_rank", "iprec_at_recall_0.00"]
    lines = [f"q{q} {name} {rng.choice([0, 0.2, 0.5, 3])} {rng.choice([0, 0.1, 1])}"
             for q in range(5) for name in rng.sample(names, rng.randint(1, len(names)))]
    return "\n".join(lines) + "\n"


def _only_rbp(expected: str, got: str) -> bool:
    """True when the outputs differ only on rbp lines: trec_eval 10.0's m_rbp.c scales gains by a min and max it
    never initialises, so its rbp on grades above 1 depends on what earlier measures left on the stack."""
    a, b = expected.splitlines(), got.splitlines()
    return len(a) == len(b) and all(x == y or (x.startswith("rbp") and y.startswith("rbp")) for x, y in zip(a, b))


def ours(argv: list[str], folder: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), contextlib.chdir(folder):
        status = trec_eval_main(argv)
    return status, out.getvalue()


def theirs(binary: str, argv: list[str], folder: str) -> tuple[int, str]:
    done = subprocess.run([binary, *argv], capture_output=True, text=True, timeout=60, cwd=folder, check=False)
    return done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    differ = undefined = crashed = 0
    with tempfile.TemporaryDirectory() as folder:
        qrels, run = Path(folder, "qrels"), Path(folder, "run")
        for n in range(args.count):
            c_numbers = rng.random() < 0.3
            qrels_text, run_text = random_files(rng, c_numbers)
            qrels.write_text(qrels_text)
            run.write_text(run_text)
            Path(folder, "zscores").write_text(random_zscores(rng))
            argv = random_options(rng) + [str(qrels), str(run)]
            expected = theirs(args.binary, argv, folder)
            got = ours(["--c-numbers"] * c_numbers + argv, folder)
            if expected != got and not (expected[0] and got[0]):
                if expected[0] < 0:  # killed by a signal: -Z reads past its table for a measure it lacks
                    crashed += 1
                    continue
                if _only_rbp(expected[1], got[1]):
                    undefined += 1
                    continue
                differ += 1
                print(f"--- case {n}: {' '.join(argv[:-2])}  (status {expected[0]} vs {got[0]})")
                print(qrels_text + "---\n" + run_text)
                import difflib
                sys.stdout.writelines(list(difflib.unified_diff(expected[1].splitlines(True), got[1].splitlines(True),
                                                                "trec_eval", "verdict-eval"))[:30])
    print(f"{args.count} combinations, {differ} differ; {undefined} more differ only in rbp, where trec_eval reads "
          f"uninitialised variables (m_rbp.c's min and max); trec_eval crashed on {crashed}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
