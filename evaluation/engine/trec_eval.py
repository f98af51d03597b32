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
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .errors import EngineInputError, UnknownMeasureError
from .measures import TREC_FAMILIES, TREC_ORDER, Measure, trec_family_measures
from .rel_formats import MEASURE_ORDER as REL_FORMAT_MEASURES
from .rel_formats import NICKNAMES as REL_FORMAT_NICKNAMES
from .rel_formats import REL_FORMATS

VERSION = "10.0-rc3"
MISSING_ZSCORE = -1000000.0
_ATOF = re.compile(r"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
                   r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.IGNORECASE)
SHORT_OPTIONS = "hvqm:cl:nD:JN:M:R:T:oZ:"
LONG_OPTIONS = {
    "help": "h", "version": "v", "query_eval_wanted": "q", "measure=": "m", "complete_rel_info_wanted": "c",
    "level_for_rel=": "l", "nosummary": "n", "Debug_level=": "D", "Judged_docs_only": "J",
    "Number_docs_in_coll=": "N", "Max_retrieved_per_topic=": "M", "Rel_info_format=": "R",
    "Results_format=": "T", "Output_old_results_format=": "o", "Zscore=": "Z",
    # Verdict's own: read grades and scores as trec_eval's atol and atof do instead of refusing them.
    "c-numbers": "C",
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
 -R  qrels (default), or prefs, qrels_prefs (measures all_prefs, prefs, prefs_simp...) or qrels_jg
     (measures qrels_jg, map_avgjg, P_avgjg, Rprec_mult_avgjg): see evaluation/engine/rel_formats.

One deliberate difference: a grade that is not a whole number (1.5) and a score that is not a finite
number (nan, inf, 1e999, 'high') stop verdict-eval with the file and line, where trec_eval reads them
with C's atol and atof (1.5 -> 1, 'high' -> 0, nan ranked where its comparisons leave it).
 --c-numbers  read them as trec_eval does, to reproduce its output on such files.
"""


class TrecEvalExit(Exception):
    """Stop with trec_eval's exit status and message."""

    def __init__(self, status: int, message: str = ""):
        super().__init__(message)
        self.status = status
        self.message = message
        self.output = ""  # what trec_eval had written to standard output when it stopped


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
    c_numbers: bool = False
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
              "J": ("judged_only", True), "o": (None, None), "C": ("c_numbers", True)}
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
    unknown = [n for n in names if n != "runid" and n not in TREC_FAMILIES
               and n not in REL_FORMAT_MEASURES and n not in REL_FORMAT_NICKNAMES]
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
        sys.stdout.write(stop.output)
        sys.stderr.write(stop.message)
        return stop.status
    except (EngineInputError, ValueError) as error:
        sys.stderr.write(f"verdict-eval: {error}\n")
        return 2
    except BrokenPipeError:
        return 0


def _read_qrels(options: Options, qrels_path: str):
    from .data import read_qrels

    if options.rel_format != "qrels":
        raise TrecEvalExit(2, f"trec_eval: Illegal rel_format '{options.rel_format}'\n")
    if options.c_numbers:
        return read_qrels(c_numbers_qrels(_bytes(qrels_path)), name=qrels_path)
    return read_qrels(qrels_path)


def _evaluate_run(options: Options, qrels, run_path: str, measures: list[Measure]):
    """Every qrels query's values (-c's placeholder for those the run lacks). A run file is read a part at a
    time (``evaluate_run_file``: memory follows the part); stdin and --c-numbers are read whole."""
    from .scoring import evaluate, evaluate_run_file

    settings = dict(all_queries=True, relevance_level=options.level, judged_only=options.judged_only,
                    max_docs=options.max_docs, num_docs_in_coll=options.num_docs_in_coll)
    if run_path == "-" or options.c_numbers:
        return evaluate(qrels, _read_run(options, run_path), measures, **settings)
    _check_results_format(options)
    return evaluate_run_file(qrels, run_path, measures, **settings)


def _read_run(options: Options, run_path: str):
    from .data import read_run

    _check_results_format(options)
    run_source = sys.stdin.buffer.read() if run_path == "-" else run_path
    if not options.c_numbers:
        return read_run(run_source, name=run_path)
    return read_run(c_numbers_run(_bytes(run_source)), name=run_path)


def _check_results_format(options: Options) -> None:
    if options.results_format != "trec_results":
        raise TrecEvalExit(2, f"trec_eval: Illegal retrieval results format '{options.results_format}'\n")


def _rel_format_text(options: Options, rel_path: str, run_path: str) -> str:
    """-R prefs, qrels_prefs and qrels_jg (evaluation/engine/rel_formats); -Z is for qrels only here."""
    from .rel_formats.evaluate import MissingRanking, evaluate_rel_format

    if options.zscores:
        raise TrecEvalExit(2, f"trec_eval: -Z is not supported with -R {options.rel_format}\n")
    specs = [f"{name}.{options.params[name]}" if name in options.params else name for name in options.marked]
    try:
        return evaluate_rel_format(options.rel_format, rel_path, _read_run(options, run_path), specs,
                                   per_query=options.query_flag, summary=options.summary,
                                   complete=options.complete, max_docs=options.max_docs,
                                   judged_only=options.judged_only, level=options.level,
                                   only_query=options.debug_query)
    except MissingRanking as missing:
        stop = TrecEvalExit(4, f"trec_eval: result qid '{missing.qid}' not found in qrels\n")
        stop.output = missing.output
        raise stop from None


def _bytes(source: str | bytes) -> bytes:
    if isinstance(source, bytes):
        return source
    try:
        with open(source, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise EngineInputError(f"cannot read file: {error.strerror or error}", path=source) from None


def c_numbers_qrels(data: bytes) -> bytes:
    """Qrels with each grade rewritten as trec_eval reads it (C's atol: 1.5 -> 1, 'x' -> 0)."""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        fields = line.split()
        if len(fields) == 4 and not line.lstrip().startswith(b"#"):
            grade = max(min(atol(fields[3].decode("latin-1")), 2**63 - 1), -2**63)
            lines[i] = b" ".join(fields[:3] + [str(grade).encode()])
    return b"\n".join(lines)


def c_numbers_run(data: bytes) -> bytes:
    """A run with each score rewritten as trec_eval reads it (C's atof), line for line. A query with a score that
    is not finite is put in trec_eval's order (its comparator, which NaN defeats, in glibc's merge sort from docno
    order) and scored by rank."""
    from .kernels import c_qsort

    lines = [line.split() for line in data.split(b"\n")]
    queries: dict[bytes, list[list]] = {}
    for fields in lines:
        if len(fields) == 6 and not fields[0].startswith(b"#"):
            fields[4] = atof(fields[4].decode("latin-1"))
            queries.setdefault(fields[0], []).append(fields)
    for query in queries.values():
        if not all(math.isfinite(fields[4]) for fields in query):
            ranked = c_qsort(sorted(query, key=lambda fields: fields[2]), _compare_sim_docno)
            for rank, fields in enumerate(ranked):
                fields[4] = float(len(ranked) - rank)
    return b"\n".join(b" ".join(repr(f).encode() if isinstance(f, float) else f for f in fields)
                      for fields in lines)


def _compare_sim_docno(a: list, b: list) -> int:
    """trec_eval's comp_sim_docno: score descending, then docno descending; NaN compares as a tie."""
    if a[4] > b[4]:
        return -1
    if a[4] < b[4]:
        return 1
    return (a[2] < b[2]) - (a[2] > b[2])


def evaluate_text(options: Options, qrels_path: str, run_path: str) -> str:
    """The whole of trec_eval's standard output for these options and files."""
    if options.rel_format in REL_FORMATS:
        return _rel_format_text(options, qrels_path, run_path)
    with_runid, measures = selected_measures(options)
    zscores = read_zscores(options.zscores) if options.zscores else None
    qrels = _read_qrels(options, qrels_path)
    # trec_eval goes through the qrels' queries; one the run lacks stops it (exit 4) unless -c is given.
    result = _evaluate_run(options, qrels, run_path, measures)
    rows = [i for i, q in enumerate(result.query_ids) if options.debug_query in (None, q)]
    missing = next((n for n, i in enumerate(rows) if result.query_ids[i] in result.missing_from_run), None)
    if missing is not None and not options.complete:
        stop = TrecEvalExit(4, f"trec_eval: result qid '{result.query_ids[rows[missing]]}' not found in qrels\n")
        rows = rows[:missing]
    else:
        stop = None
    _check_first_query(qrels, result.query_ids[rows[0]] if rows else None, measures)
    if not rows and stop is None:
        raise TrecEvalExit(7, "trec_eval: No queries with both results and relevance info\n")
    values = {m: np.asarray(result.values[m.canonical])[rows] for m in measures}
    query_ids = [result.query_ids[i] for i in rows]
    if zscores is not None:
        values = {m: _to_zscores(m, query_ids, v, zscores) for m, v in values.items()}
    lines = []
    if options.query_flag:
        for i, qid in enumerate(query_ids):
            lines.extend(_line(m, qid, values[m][i], zscores) for m in measures
                         if m.name != "NumQ" and m.family.aggregate != "gmean")
    if stop is not None:
        stop.output = "".join(line + "\n" for line in lines)
        raise stop
    if options.summary:
        if with_runid:
            lines.append(f"{'runid':<22}\tall\t{result.run_id or ''}")
        lines.extend(_line(m, "all", _summary(m, values[m], result, options), zscores) for m in measures
                     if m.family.aggregate != "none")
    return "".join(line + "\n" for line in lines)


def _check_first_query(qrels, qid: str | None, measures: list[Measure]) -> None:
    """trec_eval 10.0 cannot score a first query whose judgments all have negative grades (it sizes its table
    of grade counts by the first query's top grade, and a size of 0 fails): it stops with exit status 4."""
    if qid is None:
        return
    index = qrels.query_ids.index(qid)
    grades = qrels.grades[qrels.offsets[index]:qrels.offsets[index + 1]]
    first = next((m for m in measures if m.name != "NumQ"), None)
    if first is not None and len(grades) and grades.max() < 0:
        raise TrecEvalExit(4, f"trec_eval: Can't calculate measure '{first.family.trec}'\n")


def _summary(m: Measure, values: np.ndarray, result, options: Options) -> float:
    """The 'all' value: as the engine aggregates, over the queries shown, except that under -c trec_eval divides
    by every qrels query even when -D picks one, num_q counts them, and num_rel comes from the whole qrels."""
    from .scoring import _aggregate

    count = len(result.query_ids) if options.complete else len(values)
    if m.name == "NumQ":
        return float(count)
    if m.name == "NumRel" and options.complete:
        return result.aggregate[m.canonical]
    # The qrels queries -D leaves out count as 0 (the floor, in a geometric mean), as queries -c adds.
    return _aggregate(m, np.concatenate([values, np.zeros(count - len(values))]), None)


def _line(m: Measure, qid: str, value, zscores) -> str:
    from .scoring import _trec_line, c_float

    if zscores is None or isinstance(value, str):
        return _trec_line(m, qid, value)
    return f"Z{m.trec_name or m.canonical:<22}\t{qid}\t{c_float(value)}"


def read_zscores(path: str) -> ZScores:
    """A -Z file: 'qid measure mean stddev' lines (numbers read as C's atof)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        data = b""
    if not data:
        raise TrecEvalExit(255, f"trec_eval.get_zscores: Cannot read zscores file '{path}'\n")
    lines = []
    for number, line in enumerate(data.splitlines(), start=1):
        fields = line.split()
        if len(fields) != 4:
            raise TrecEvalExit(255, f"trec_eval.get_zscores: Malformed line {number}\n")
        lines.append((fields[0], fields[1], atof(fields[2].decode("latin-1")), atof(fields[3].decode("latin-1"))))
    return ZScores(sorted(lines, key=lambda line: line[:2]))


class ZScores:
    """trec_eval's z-score table and its look-ups (get_zscores.c, convert_zscores.c): lines sorted by query and
    measure, found by binary searches whose upper bound is one past the end, so a measure a query lacks may be
    read from the next query's first line, as trec_eval does."""

    def __init__(self, lines: list[tuple[bytes, bytes, float, float]]):
        self.lines = lines
        self.names = [line[1] for line in lines]
        self.ranges: dict[bytes, list[int]] = {}  # query -> [first line, number of lines]
        for i, line in enumerate(lines):
            self.ranges.setdefault(line[0], [i, 0])[1] += 1
        self.queries = list(self.ranges)

    def find(self, qid: str, measure: str) -> tuple[float, float] | None:
        """(mean, stddev) for the query and measure, or None."""
        found = _search(self.queries, qid.encode(), len(self.queries))
        if found is None:
            return None
        start, count = self.ranges[self.queries[found]]
        hit = _search(self.names[start:start + count + 1], measure.encode(), count)
        return None if hit is None else self.lines[start + hit][2:]


def _search(items: list[bytes], key: bytes, end: int) -> int | None:
    """trec_eval's binary search with its inclusive end: the index of the item found; a probe past the list
    finds nothing."""
    start = 0
    while start <= end:
        current = (start + end) // 2
        if current >= len(items):
            return None
        if key < items[current]:
            end = current - 1
        elif key > items[current]:
            start = current + 1
        else:
            return current
    return None


def _to_zscores(m: Measure, query_ids: list[str], values: np.ndarray, zscores: ZScores) -> np.ndarray:
    """trec_eval's te_convert_to_zscore: (value - mean) / stddev, or -1000000 where the file has no mean (or a
    zero stddev and a value other than the mean). A query missing from the file gets -1000000 throughout."""
    if m.family.aggregate == "none":
        return values
    out = np.empty(len(values))
    for i, (qid, value) in enumerate(zip(query_ids, values.tolist())):
        mean, stddev = zscores.find(qid, m.trec_name or m.canonical) or (None, 0.0)
        if mean is not None and stddev:
            out[i] = (value - mean) / stddev
        else:
            out[i] = 0.0 if mean is not None and value == mean else MISSING_ZSCORE
    return out


def atof(text: str) -> float:
    """C's atof on a whitespace-free field: the longest leading decimal or hex number, inf or nan; 0 when none."""
    match = _ATOF.match(text)
    if not match:
        return 0.0
    number = match.group(0)
    try:
        return float(number)
    except ValueError:
        return float.fromhex(number)
