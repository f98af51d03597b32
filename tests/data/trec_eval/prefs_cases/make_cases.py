"""Dev-time script: trec_eval 10.0's outputs for -R prefs / qrels_prefs / qrels_jg cases, and a fuzz against it.

    python tests/data/trec_eval/prefs_cases/make_cases.py --trec-eval /path/to/trec_eval            # regenerate
    python tests/data/trec_eval/prefs_cases/make_cases.py --trec-eval /path/to/trec_eval --fuzz 2000

Regenerating writes the small inputs (seeded, so the same every time), runs every command of CASES with the
binary and stores its standard output as ``<name>.out`` (``cases.txt`` lists the commands). ``--fuzz N`` draws
N random inputs and option sets, runs the binary and ``verdict-eval`` on each, and prints how many were tried
and how many differ (exit status and output bytes when trec_eval succeeds or stops on a query the run lacks;
failing or not when it refuses the judgments). CI has no binary:
tests/engine/test_rel_formats.py compares with the stored outputs.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

INPUTS = {"prefs": "small.prefs", "qrels_prefs": "small.qrels_prefs", "qrels_jg": "small.qrels_jg"}
RUN = "small.run"
CASES = {
    "prefs": "-m all_prefs -R prefs small.prefs small.run",
    "prefs_q": "-q -m all_prefs -R prefs small.prefs small.run",
    "prefs_qc": "-q -c -m all_prefs -R prefs small.prefs small.run",
    "prefs_qcM3": "-q -c -M 3 -m all_prefs -R prefs small.prefs small.run",
    "prefs_JL2": "-J -l 2 -m prefs -R prefs small.prefs small.run",
    "prefs_n": "-q -n -c -m prefs_avgjg_Rnonrel -m prefs_pair -R prefs small.prefs small.run",
    "qrels_prefs_q": "-q -c -m all_prefs -R qrels_prefs small.qrels_prefs small.run",
    "qrels_prefs_M5": "-c -M 5 -m all_prefs -R qrels_prefs small.qrels_prefs small.run",
    "qrels_jg": "-c -m qrels_jg -R qrels_jg small.qrels_jg small.run",
    "qrels_jg_q": "-q -c -m qrels_jg -R qrels_jg small.qrels_jg small.run",
    "qrels_jg_qJ": "-q -c -J -m qrels_jg -R qrels_jg small.qrels_jg small.run",
    "qrels_jg_l2M4": "-q -c -l 2 -M 4 -m qrels_jg -R qrels_jg small.qrels_jg small.run",
    "qrels_jg_params": "-q -c -m P_avgjg.1,3,7 -m Rprec_mult_avgjg.0.5,1.0,3.0 -m map_avgjg -m P_avgjg.2 "
                       "-R qrels_jg small.qrels_jg small.run",
    "qrels_jg_l0J": "-c -l 0 -J -m qrels_jg -R qrels_jg small.qrels_jg small.run",
}


def prefs_lines(rng: random.Random, qids: list[str], messy: bool = False) -> list[str]:
    """Lines of a prefs file: each judgment group ranks docs by hidden levels, so it is consistent; ``messy``
    gives some subgroups levels of their own and repeats some lines (conflicts trec_eval refuses, or counts)."""
    lines = []
    for qid in qids:
        docs = [f"d{qid}{i:02d}" for i in range(rng.randint(3, 12))]
        for g in range(rng.randint(1, 3)):
            truth = {doc: rng.choice((0, 0, 1, 2, 3, 4.5)) for doc in docs}
            for s in range(rng.choice((1, 1, 2, 3))):
                members = rng.sample(docs, rng.randint(1, min(6, len(docs))))
                own = messy and rng.random() < 0.1
                lines += [f"{qid} g{g} s{s} {doc} {rng.choice((0, 1, 2)) if own else truth[doc]}" for doc in members]
    if messy:
        lines += rng.sample(lines, len(lines) // 20)
    rng.shuffle(lines)
    return lines


def qrels_lines(rng: random.Random, qids: list[str], grades: tuple[int, ...]) -> list[str]:
    lines = []
    for qid in qids:
        docs = [f"d{qid}{i:02d}" for i in range(rng.randint(2, 12))]
        for g in range(rng.randint(1, 3)):
            lines += [f"{qid} {g} {doc} {rng.choice(grades)}" for doc in rng.sample(docs, rng.randint(1, len(docs)))]
    rng.shuffle(lines)
    return lines


def run_lines(rng: random.Random, qids: list[str]) -> list[str]:
    lines = []
    for qid in qids:
        docs = [f"d{qid}{i:02d}" for i in range(15)] + [f"x{qid}{i}" for i in range(3)]
        for rank, doc in enumerate(rng.sample(docs, rng.randint(1, 14)), start=1):
            lines.append(f"{qid} Q0 {doc} {rank} {rng.choice((1, 2, 2.5, 3, 3, 4))} tag")
    return lines


def write_inputs(folder: Path, rng: random.Random, missing_ok: bool = True, messy: bool = False) -> None:
    """Inputs for up to five queries; with ``missing_ok`` False every judged query is in the run."""
    judged = [f"{q}" for q in rng.sample(range(1, 9), rng.randint(1, 5))]
    ranked = [q for q in judged if rng.random() < 0.7 or not missing_ok] + ["99"]
    (folder / INPUTS["prefs"]).write_text("\n".join(prefs_lines(rng, judged, messy)) + "\n")
    (folder / INPUTS["qrels_prefs"]).write_text("\n".join(qrels_lines(rng, judged, (0, 0, 1, 2, 3))) + "\n")
    (folder / INPUTS["qrels_jg"]).write_text("\n".join(qrels_lines(rng, judged, (-1, 0, 0, 1, 2, 3))) + "\n")
    (folder / RUN).write_text("\n".join(run_lines(rng, ranked)) + "\n")


def binary_output(trec_eval: str, args: list[str], folder: Path) -> tuple[int, str, str]:
    done = subprocess.run([trec_eval, *args], cwd=folder, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


def our_output(args: list[str], folder: Path) -> tuple[int, str, str]:
    from evaluation.engine.trec_eval import trec_eval_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = trec_eval_main(args)
    return status, out.getvalue(), err.getvalue()


def random_options(rng: random.Random) -> list[str]:
    rel_format = rng.choice(tuple(INPUTS))
    options = [flag for flag in ("-q", "-c", "-J", "-n") if rng.random() < 0.4]
    if "-n" in options and "-q" not in options:
        options.remove("-n")
    if rng.random() < 0.4:
        options += ["-M", str(rng.randint(0, 8))]
    if rng.random() < 0.3:
        options += ["-l", str(rng.randint(0, 3))]
    if rel_format == "qrels_jg":
        measures = rng.choice((["qrels_jg"], ["P_avgjg.1,2,5"], ["Rprec_mult_avgjg.0.5,1,1.5,4"], ["map_avgjg"],
                               ["qrels_jg", "P_avgjg.3"]))
    else:
        measures = rng.choice((["all_prefs"], ["prefs"], ["prefs_avgjg_Rnonrel", "prefs_avgjg_Rnonrel_ret"],
                               ["prefs_pair", "prefs_pair_imp", "prefs_pair_ret"]))
    return [*options, *[arg for m in measures for arg in ("-m", m)], "-R", rel_format, INPUTS[rel_format], RUN]


def regenerate(trec_eval: str) -> None:
    write_inputs(HERE, random.Random(31), missing_ok=False)
    lines = []
    for name, command in CASES.items():
        status, output, _ = binary_output(trec_eval, command.split(), HERE)
        if status:
            raise SystemExit(f"trec_eval failed on {name}: {command}")
        (HERE / f"{name}.out").write_text(output)
        lines.append(f"{name}\t{command}")
    (HERE / "cases.txt").write_text("\n".join(lines) + "\n")
    print(f"{len(CASES)} cases written to {HERE}")


def fuzz(trec_eval: str, count: int, seed: int) -> int:
    rng = random.Random(seed)
    differing = failing_both = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(count):
            write_inputs(folder, rng, missing_ok=rng.random() < 0.3, messy=rng.random() < 0.3)
            args = random_options(rng)
            theirs, ours = binary_output(trec_eval, args, folder), our_output(args, folder)
            # Both succeed with the same bytes, or both stop at a query the run lacks after the same lines, or
            # both refuse the judgments (trec_eval aborts or stops; verdict-eval names the contradiction).
            if theirs[0] == 0 or "not found in qrels" in theirs[2]:
                agree = ours == theirs
            else:
                agree = ours[0] != 0
            failing_both += theirs[0] != 0 and ours[0] != 0
            if not agree:
                differing += 1
                if differing <= 5:
                    keep = HERE.parent / f"fuzz-diff-{i}"
                    keep.mkdir(exist_ok=True)
                    for name in (*INPUTS.values(), RUN):
                        (keep / name).write_text((folder / name).read_text())
                    print(f"differs: {' '.join(args)} (inputs kept in {keep})")
    print(f"fuzz: {count} combinations tried, {differing} differing ({failing_both} refused by both)")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trec-eval", required=True, help="trec_eval 10.0 binary built from its source")
    parser.add_argument("--fuzz", type=int, metavar="N", help="compare N random cases instead of regenerating")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.fuzz:
        return fuzz(args.trec_eval, args.fuzz, args.seed)
    regenerate(args.trec_eval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
