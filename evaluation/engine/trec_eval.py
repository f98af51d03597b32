"""trec_eval 10.0's command line, argument for argument and byte for byte: ``verdict-eval [options] QRELS RUN``.

Options are read as trec_eval reads them (GNU getopt_long: short options bundled or with attached values,
long options and their unique prefixes, options after the file names). Its measure rules hold: ``-m`` names
a measure or a nickname (``official``, ``all_trec``, ``set``), the first parameter list given for a measure
is the one used (``-m P.5 -m P.10`` prints P_5 only; ``-m all_trec -m P.5`` prints P_5 as the only P), and
output comes in trec_eval's measure order whatever the ``-m`` order.
"""

from __future__ import annotations

import getopt
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import __version__
from .errors import EngineInputError, UnknownMeasureError
from .measures import TREC_FAMILIES, TREC_ORDER, Measure, trec_family_measures

VERSION = "10.0-rc3"
SHORT_OPTIONS = "hvqm:cl:nD:JN:M:R:T:oZ:"
LONG_OPTIONS = {
    "help": "h", "version": "v", "query_eval_wanted": "q", "measure=": "m", "complete_rel_info_wanted": "c",
    "level_for_rel=": "l", "nosummary": "n", "Debug_level=": "D", "Judged_docs_only": "J",
    "Number_docs_in_coll=": "N", "Max_retrieved_per_topic=": "M", "Rel_info_format=": "R",
    "Results_format=": "T", "Output_old_results_format=": "o", "Zscore=": "Z",
}
NICKNAMES = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                 "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
    "all_trec": ("runid",) + tuple(n for n in TREC_ORDER if n in TREC_FAMILIES),
}
USAGE = """\
Usage: verdict-eval [-h] [-q] {-m measure}* trec_rel_file trec_top_file
   -h: Give full help information, including other options
   -q: In addition to summary evaluation, give evaluation for each query
   -m: calculate and print measures indicated by 'measure'
       ('-m official' is default, '-m all_trec' gives every measure)
"""
HELP = """\
verdict-eval [-h] [-v] [-q] [-n] [-c] [-J] [-m measure[.params]]... [-l level] [-M num] [-N num]
             [-D level[.qid]] [-R rel_format] [-T results_format] [-Z zscores_file]  rel_info_file results_file

trec_eval 10.0's command line on Verdict's metric engine: same options, same output. The results file
may be '-' for standard input. Long forms: --help --version --query_eval_wanted --measure
--complete_rel_info_wanted --level_for_rel --nosummary --Debug_level --Judged_docs_only
--Number_docs_in_coll --Max_retrieved_per_topic --Rel_info_format --Results_format --Zscore.

 -q  also print each query's values          -n  print no summary (the 'all' lines)
 -c  average over every query of the qrels   -J  evaluate judged documents only
 -l  minimum grade of a relevant document    -M  evaluate only the top num documents of each query
 -N  documents in the collection (utility)   -D  debug level; level.qid evaluates that query only
 -Z  print z-scores (value - mean) / stddev from 'qid measure mean stddev' lines
 -m  a measure (P.5,10 takes cutoffs), or official, all_trec, set; the first parameters given for a
     measure are the ones used.
"""


class TrecEvalExit(Exception):
    """Stop with trec_eval's exit status and message."""

    def __init__(self, status: int, message: str = ""):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Options:
    query_flag: bool = False
    summary: bool = True
    complete: bool = False
    judged_only: bool = False
    level: int = 1
    max_docs: int | None = None
    num_docs_in_coll: int = 0
    debug_level: int = 0
    debug_query: str | None = None
    rel_format: str = "qrels"
    results_format: str = "trec_results"
    zscores: str | None = None
    help: bool = False
    marked: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)


def atol(text: str) -> int:
    """C's atol: leading blanks, a sign and the digits that follow; 0 when there are none."""
    text = text.lstrip(" \t\n\v\f\r")
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    count = 0
    while count < len(digits) and digits[count] in "0123456789":
        count += 1
    return sign * int(digits[:count]) if count else 0


def parse_args(argv: Sequence[str]) -> tuple[Options, list[str]]:
    try:
        pairs, files = getopt.gnu_getopt(list(argv), SHORT_OPTIONS, list(LONG_OPTIONS))
    except getopt.GetoptError as error:
        raise TrecEvalExit(1, f"verdict-eval: {error}\n{USAGE}") from None
    options = Options()
    for flag, value in pairs:
        _apply(options, LONG_OPTIONS.get(flag[2:] + "=", LONG_OPTIONS.get(flag[2:])) if flag[1] == "-"
               else flag[1], value)
    return options, files


def _apply(options: Options, letter: str, value: str) -> None:
    if letter == "v":
        # trec_eval's own line first (scripts read it), then the engine's release (pyproject's one source).
        raise TrecEvalExit(0, f"trec_eval version {VERSION}\nverdict-eval {__version__}\n")
    if letter == "m":
        _mark(options, value)
        return
    simple = {"h": ("help", True), "q": ("query_flag", True), "c": ("complete", True), "n": ("summary", False),
              "J": ("judged_only", True), "o": (None, None)}
    if letter in simple:
        name, flag = simple[letter]
        if name:
            setattr(options, name, flag)
        return
    if letter == "D":
        level, _, query = value.partition(".")
        options.debug_level, options.debug_query = atol(level), (query or None)
        return
    numbers = {"l": "level", "N": "num_docs_in_coll", "M": "max_docs"}
    texts = {"R": "rel_format", "T": "results_format", "Z": "zscores"}
    if letter in numbers:
        setattr(options, numbers[letter], atol(value))
    else:
        setattr(options, texts[letter], value)


def _mark(options: Options, value: str) -> None:
    """trec_eval's mark_measure: ``name[.params]``; a measure's first parameter list is the one kept."""
    name, dot, params = value.partition(".")
    if dot:
        if not params:
            raise TrecEvalExit(1, f"trec_eval: improper measure in parameter '{name}'\n"
                                  f"trec_eval: illegal measure '{name}'\n")
        options.params.setdefault(name, params)
    names = NICKNAMES.get(name, (name,))
    unknown = [n for n in names if n != "runid" and n not in TREC_FAMILIES]
    if unknown:
        raise TrecEvalExit(1, f"trec_eval: illegal measure '{name}'\n")
    options.marked.extend(n for n in names if n not in options.marked)


def selected_measures(options: Options) -> tuple[bool, list[Measure]]:
    """(runid wanted, the measures in trec_eval's order with each family's first parameter list)."""
    marked = options.marked or list(NICKNAMES["official"])
    measures = []
    for family in TREC_ORDER:
        if family in marked and family != "runid":
            params = options.params.get(family)
            try:
                measures.extend(trec_family_measures(family, params))
            except UnknownMeasureError as error:
                raise TrecEvalExit(2, f"trec_eval: Cannot initialize measure '{family}': {error}\n") from None
    return "runid" in marked, measures


def trec_eval_main(argv: Sequence[str] | None = None) -> int:
    """trec_eval 10.0's command: ``[options] rel_info_file results_file``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        options, files = parse_args(argv)
        if options.help:
            sys.stdout.write(HELP)
            return 0
        if len(files) != 2:
            raise TrecEvalExit(1, USAGE)
        sys.stdout.write(evaluate_text(options, files[0], files[1]))
        return 0
    except TrecEvalExit as stop:
        sys.stderr.write(stop.message)
        return stop.status
    except (EngineInputError, ValueError) as error:
        sys.stderr.write(f"trec_eval: {error}\n")
        return 2
    except BrokenPipeError:
        return 0


def _read_inputs(options: Options, qrels_path: str, run_path: str):
    from .data import read_qrels, read_run

    if options.rel_format != "qrels":
        raise TrecEvalExit(2, f"trec_eval: Illegal rel_format '{options.rel_format}'\n")
    if options.results_format != "trec_results":
        raise TrecEvalExit(2, f"trec_eval: Illegal retrieval results format '{options.results_format}'\n")
    qrels = read_qrels(qrels_path)
    run = read_run(sys.stdin.buffer, name="-") if run_path == "-" else read_run(run_path)
    return qrels, run


def evaluate_text(options: Options, qrels_path: str, run_path: str) -> str:
    """The whole of trec_eval's standard output for these options and files."""
    from .scoring import evaluate

    with_runid, measures = selected_measures(options)
    qrels, run = _read_inputs(options, qrels_path, run_path)
    result = evaluate(qrels, run, measures, all_queries=options.complete, relevance_level=options.level,
                      judged_only=options.judged_only, max_docs=options.max_docs)
    if not result.query_ids:
        raise TrecEvalExit(7, "trec_eval: No queries with both results and relevance info\n")
    lines = []
    if options.query_flag:
        for i, qid in enumerate(result.query_ids):
            lines.extend(_line(m, qid, float(result.values[m.canonical][i])) for m in measures
                         if m.name != "NumQ" and m.family.aggregate != "gmean")
    if options.summary:
        if with_runid:
            lines.append(f"{'runid':<22}\tall\t{run.run_id or ''}")
        lines.extend(_line(m, "all", result.aggregate[m.canonical]) for m in measures)
    return "".join(line + "\n" for line in lines)


def _line(m: Measure, qid: str, value: float) -> str:
    name = m.trec_name or m.canonical
    if m.family.integer:
        return f"{name:<22}\t{qid}\t{int(value)}"
    return f"{name:<22}\t{qid}\t{c_float(value)}"


def c_float(value: float) -> str:
    """printf's %6.4f, NaN as glibc prints it ('-nan' for the NaN that 0.0/0.0 makes)."""
    if math.isnan(value):
        return f"{'-nan' if math.copysign(1.0, value) < 0 else 'nan':>6}"
    return f"{value:6.4f}"
