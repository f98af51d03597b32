"""Dev-time script, not run in CI: regenerate the expected outputs in this folder from a trec_eval 10.0 binary.

    .venv/bin/python tests/data/trec_eval/cases/make_cases.py /path/to/trec_eval

For each case below it runs the binary here (file names are relative to this folder), writes its standard output
to <name>.out and its exit status (and, for cases marked so, its standard error) to cases.json, and rewrites
README.md's list of commands. tests/engine/test_trec_eval_exact.py runs verdict-eval on the same arguments and
compares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL_SEVEN = ["-m", "relstring.5", "-m", "utility.2,-1,-0.5,0.25", "-m", "G.1=0.5,2=3", "-m", "binG",
             "-m", "Rndcg.1=0.5,2=3", "-m", "ndcg_rel.2=1", "-m", "rbp_resid.p=0.5"]
# verdict-eval refuses grades like 1.5 and scores like nan unless given --c-numbers; these cases give it.
C_NUMBERS = ("c_numbers_all_trec", "c_numbers_judged_only")
# name: (arguments, file for standard input or None, compare standard error too)
CASES: dict[str, tuple[list[str], str | None, bool]] = {
    "nosummary_q": (["-n", "-q", "-m", "P.5", "qrels.small", "run.small"], None, False),
    "nosummary_only": (["-n", "qrels.small", "run.small"], None, False),
    "nosummary_long": (["--nosummary", "--query_eval_wanted", "--measure=P.5", "qrels.small", "run.small"], None,
                       False),
    "long_prefixes": (["--query", "--meas", "map", "--complete_rel", "--Judged_docs_only", "--level_for_rel=2",
                       "qrels.extra", "run.small"], None, False),
    "bundled_short_options": (["-qcJ", "-l2", "-M2", "-mmap", "qrels.extra", "run.small"], None, False),
    "options_after_files": (["qrels.small", "run.small", "-m", "P.5", "-q"], None, False),
    "family_twice_P": (["-m", "P.5", "-m", "P.10", "qrels.small", "run.small"], None, False),
    "family_twice_recall": (["-m", "recall.100", "-m", "recall.1000", "qrels.small", "run.small"], None, False),
    "all_trec_then_P5": (["-m", "all_trec", "-m", "P.5", "qrels.small", "run.small"], None, False),
    "P5_then_all_trec": (["-q", "-m", "P.5", "-m", "all_trec", "qrels.small", "run.small"], None, False),
    "bare_then_params": (["-m", "P", "-m", "P.5,2", "-m", "official", "qrels.small", "run.small"], None, False),
    "set_nickname": (["-q", "-m", "set", "qrels.small", "run.small"], None, False),
    "judged_only_empty_query": (["-c", "-J", "-M", "100", "-l", "2", "-q", "-m", "all_trec", "qrels.extra",
                                 "run.small"], None, False),
    "judged_only_empty_iprec": (["-J", "-q", "-m", "iprec_at_recall", "-m", "11pt_avg", "qrels.small",
                                 "run.small"], None, False),
    "max_docs_zero": (["-M0", "-q", "-m", "iprec_at_recall.0,0.5", "-m", "11pt_avg", "-m", "P.5", "qrels.small",
                       "run.small"], None, False),
    "seven_measures": (["-q", "-N", "1000", *ALL_SEVEN, "qrels.small", "run.small"], None, False),
    "seven_measures_default": (["-q", "-m", "relstring", "-m", "utility", "-m", "G", "-m", "binG", "-m", "Rndcg",
                                "-m", "ndcg_rel", "-m", "rbp_resid", "qrels.small", "run.small"], None, False),
    "seven_measures_complete": (["-q", "-c", "-N", "50", *ALL_SEVEN, "-m", "relstring", "qrels.extra",
                                 "run.small"], None, False),
    "seven_measures_complete_default": (["-q", "-c", "-m", "relstring", "-m", "utility", "-m", "rbp_resid",
                                         "-m", "unj", "qrels.extra", "run.small"], None, False),
    "seven_measures_judged_level": (["-q", "-J", "-l2", *ALL_SEVEN, "qrels.small", "run.small"], None, False),
    "all_trec_complete_graded": (["-q", "-c", "-m", "all_trec", "qrels.extra", "run.small"], None, False),
    "zscores": (["-q", "-Z", "zscores.small", "-m", "official", "qrels.small", "run.small"], None, False),
    "zscores_nosummary": (["-n", "-q", "-Z", "zscores.small", "-m", "P.5", "-m", "relstring", "qrels.small",
                           "run.small"], None, False),
    "debug_query": (["-D", "0.q2", "-q", "-m", "P.5", "-m", "map", "qrels.small", "run.small"], None, False),
    "num_docs_in_coll": (["-N", "100", "-m", "utility.0,0,0,1", "-q", "qrels.small", "run.small"], None, False),
    "run_on_stdin": (["-q", "-m", "map", "qrels.small", "-"], "run.small", False),
    "explicit_formats": (["-R", "qrels", "-T", "trec_results", "-m", "P.5", "qrels.small", "run.small"], None,
                         False),
    "c_numbers_all_trec": (["-q", "-m", "all_trec", "qrels.fractional", "run.nonfinite"], None, False),
    "c_numbers_judged_only": (["-q", "-J", "-m", "relstring", "-m", "P.2", "-m", "map", "qrels.fractional",
                               "run.nonfinite"], None, False),
    "version": (["-v"], None, True),
    "version_long": (["--version", "qrels.small", "run.small"], None, True),
    "qrels_query_missing_from_run": (["-q", "-m", "P.5", "qrels.extra", "run.small"], None, True),
    "negative_first_query": (["-m", "P.5", "qrels.negative_first", "run.small"], None, True),
    "unknown_measure": (["-m", "nonsense.5", "qrels.small", "run.small"], None, True),
    "empty_measure_parameters": (["-m", "P.", "qrels.small", "run.small"], None, True),
    "unknown_rel_format": (["-R", "nonsense", "qrels.small", "run.small"], None, True),
    "unknown_results_format": (["-T", "nonsense", "qrels.small", "run.small"], None, True),
}


def main() -> int:
    binary = sys.argv[1]
    manifest = {}
    for name, (argv, stdin, with_stderr) in CASES.items():
        with open(HERE / stdin, "rb") if stdin else open("/dev/null", "rb") as source:
            done = subprocess.run([binary, *argv], cwd=HERE, stdin=source, capture_output=True, check=False)
        (HERE / f"{name}.out").write_bytes(done.stdout)
        manifest[name] = {"args": argv, "stdin": stdin, "status": done.returncode,
                          "verdict_eval_extra": ["--c-numbers"] if name in C_NUMBERS else []}
        if with_stderr:
            manifest[name]["stderr"] = done.stderr.decode()
    (HERE / "cases.json").write_text(json.dumps(manifest, indent=1) + "\n")
    lines = ["# trec_eval 10.0 cases", "",
             "Outputs of trec_eval 10.0 (built from its public source) on small inputs, for",
             "`tests/engine/test_trec_eval_exact.py`. Regenerate with `make_cases.py /path/to/trec_eval`;",
             "`fuzz.py /path/to/trec_eval` compares random inputs and options. Each case, run in this folder:", ""]
    for name, (argv, stdin, _) in CASES.items():
        lines.append(f"- `{name}`: `trec_eval {' '.join(argv)}`" + (f" < {stdin}" if stdin else "")
                     + (" (verdict-eval with `--c-numbers`)" if name in C_NUMBERS else ""))
    (HERE / "README.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
