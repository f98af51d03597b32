"""Hostile and careless files through the real imports, each in a fresh process: wall time and peak RSS.

    make bench-hostile        (or: .venv/bin/python benchmarks/hostile_inputs.py [--cases name,...] [--rows 1000000])

The inputs are generated with a seed under benchmarks/data/hostile/ and kept between runs; the big ones are
written as they are compressed or streamed, never held in memory:
  * a 1 MB .gz query log whose second data line is 1 GiB long, and a 10 MB one with a 10 GiB line
  * a gzip bomb of short lines (2 GiB unpacked from 2 MB), read with DECOMPRESSED_MAX_BYTES=1 GiB so that
    the case takes a minute, not the quarter of an hour that reading to the default 16 GiB takes; reading
    streams, so memory does not grow with the limit
  * a TREC run with one 200 MB line
  * a run of --rows rows with one 100 KB doc id, and the same run without it
  * JSON nested too deeply for each JSON reader: a JSON run and a JSON judgment list 10 million levels deep,
    and JSON Lines for the corpus, a query set and a query log with a line 400,000 levels deep (800 KB,
    within the 1 MiB line limit, so that the depth is what is refused)
  * a JSON Lines corpus with a 200 MB field
  * a 10 KB Parquet run whose one doc id is 300 MB of one character (zstd)
  * Parquet dictionary bombs: a run of 200,000 rows naming one 20 KB doc id, and a query log of 200,000 rows
    naming one 500 KB query; the dictionary keeps the value once, so the files are small and unpack to 4 GB
    and 100 GB
  * a 600 MB line in a query set (CSV), in reference answers (JSON Lines) and in a judgment list (qrels, JSON)

Each case calls what the job (or the command) calls: `import_query_log`, `import_run`, `import_corpus`,
`import_queries`, `import_references`, `import_judgments`, on PostgreSQL through the benchmark Django setup; "read ..." cases
call the engine's `read_run` alone. "Extra" is the peak less the memory the process held just before the call.
Targets: peak RSS under 500 MB for every bomb (the process's own high-water mark, Django and all), and for
the Parquet bombs at most 100 MB extra, for the 600 MB lines at most 50 MB extra; the run with the 100 KB id handled within 2x the time of the same run
without it, both as the import job does it (the id is refused, INPUT_ID_MAX_BYTES) and as the engine
reads it with no id limit (the id accepted and hashed).

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/verdict_bench).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from itertools import chain
from pathlib import Path

import numpy as np

from bench_django import DATA, ROOT, setup_django

FOLDER = DATA / "hostile"
SLUG = "bench-hostile"
TARGET_PEAK_MB = 500.0
TARGET_EXTRA_MB = {"parquet-bomb": 100.0, "parquet-dictionary-run": 100.0, "parquet-dictionary-log": 100.0,
                   "queries-600mb-line": 50.0, "references-600mb-line": 50.0, "judgments-600mb-line": 50.0,
                   "judgments-json-600mb-line": 50.0}
TARGET_RATIO = 2.0
MiB = 1 << 20
DEPTH, LINE_DEPTH = 10_000_000, 400_000


def memory_mb(field: str) -> float:
    """VmRSS (held now) or VmHWM (the high-water mark) of this process, from /proc. Not ru_maxrss: a process
    started by this script inherits the script's own peak there (Linux keeps it across fork and exec)."""
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith(f"{field}:"))
    return int(kib) / 1024


# ------------------------------------------------------------------------------------------- inputs


def _gzip(path: Path, head: bytes, chunk: bytes, repeat: int, tail: bytes = b"") -> Path:
    """A gzip file of `head`, `chunk` `repeat` times and `tail`, compressed as it is written."""
    if path.exists():
        return path
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    partial = path.with_name(path.name + ".part")
    with partial.open("wb") as handle:
        handle.write(packer.compress(head))
        for _ in range(repeat):
            handle.write(packer.compress(chunk))
        handle.write(packer.compress(tail) + packer.flush())
    partial.rename(path)
    return path


def _streamed(path: Path, *pieces) -> Path:
    """A file of the byte strings of `pieces` (lists or generators), written as they come."""
    if path.exists():
        return path
    partial = path.with_name(path.name + ".part")
    with partial.open("wb") as handle:
        for piece in chain(*pieces):
            handle.write(piece)
    partial.rename(path)
    return path


def _run_lines(rows: int, seed: int) -> bytes:
    """`rows` TREC run lines: 1,000 per query, 14-byte doc ids (hashed, not packed: longer than 8 bytes)."""
    rng = np.random.default_rng(seed)
    queries = rows // 1000
    docs = np.concatenate([rng.choice(10_000_000, 1000, replace=False) for _ in range(queries)])
    lines = [f"q{i // 1000} Q0 doc-{doc:010d} {i % 1000 + 1} {30 - (i % 1000) * 0.02:.3f} bench\n"
             for i, doc in enumerate(docs.tolist())]
    return "".join(lines).encode()


def _parquet_bomb(path: Path) -> Path:
    """The tests' Parquet bomb: one doc id of 300 MB of one character, about 10 KB with zstd."""
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT))
    from tests.hostile import write_parquet_bomb

    partial = path.with_name(path.name + ".part")
    write_parquet_bomb(partial).rename(path)
    return path


def _dictionary_bomb(path: Path, column: str, value_bytes: int) -> Path:
    """The tests' dictionary bomb: one value named by 200,000 rows, kept once in the file."""
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT))
    from tests.hostile import write_dictionary_bomb

    partial = path.with_name(path.name + ".part")
    write_dictionary_bomb(partial, column, rows=200_000, value_bytes=value_bytes).rename(path)
    return path


def _long_line(path: Path, head: bytes, tail: bytes) -> Path:
    """`head`, then 600 MB of one character on the same line, then `tail`."""
    return _streamed(path, [head], (b"x" * MiB for _ in range(600)), [tail])


def _deep(opening: bytes, closing: bytes, depth: int = DEPTH) -> list[bytes]:
    return [opening, b"[" * depth, b"]" * depth, closing]


def make_input(source: str, rows: int) -> Path:
    """The input file `source` (made the first time it is asked for)."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    if source.startswith("run-"):
        normal = _streamed(FOLDER / f"run-{rows}.txt", [_run_lines(rows, 7)])
    makers = {
        "log-1g-line": lambda: _gzip(FOLDER / "log-1g-line.csv.gz", b"query,count\ntent,3\n", b"x" * MiB, 1024, b"\nboots,1\n"),
        "log-10g-line": lambda: _gzip(FOLDER / "log-10g-line.csv.gz", b"query,count\ntent,3\n", b"x" * MiB, 10240,
                                      b"\nboots,1\n"),
        "gzip-bomb": lambda: _gzip(FOLDER / "bomb.csv.gz", b"query\n", b"tent\n" * (MiB // 5), 2048),
        "run-200mb-line": lambda: _streamed(FOLDER / "run-200mb-line.txt", [
            b"q0 Q0 d1 1 2.0 bench\nq0 Q0 "], (b"d" * MiB for _ in range(200)), [b" 2 1.0 bench\n"]),
        "run-normal": lambda: normal,
        "run-long-id": lambda: _streamed(FOLDER / f"run-{rows}-long-id.txt", [
            normal.read_bytes(), b"q0 Q0 ", b"z" * 100_000, b" 1001 0.5 bench\n"]),
        "json-run": lambda: _streamed(FOLDER / "deep-run.json", _deep(b'{"q1": {"d1": 1.0},\n "q2": ', b"}\n")),
        "json-judgments": lambda: _streamed(FOLDER / "deep-judgments.json", _deep(
            b'[\n{"query_id": "q1", "ratings": []},\n{"query_id": "q2", "ratings": ', b"}\n]\n")),
        "jsonl-corpus": lambda: _streamed(FOLDER / "deep-corpus.jsonl",
                                          _deep(b'{"doc_id": "d1"}\n{"doc_id": "d2", "x": ', b"}\n", LINE_DEPTH)),
        "jsonl-queries": lambda: _streamed(FOLDER / "deep-queries.jsonl", _deep(
            b'{"query_id": "q1", "query": "tent"}\n{"query_id": "q2", "query": ', b"}\n", LINE_DEPTH)),
        "jsonl-log": lambda: _streamed(FOLDER / "deep-log.jsonl",
                                       _deep(b'{"query": "tent"}\n{"query": ', b'}\n{"query": "boots"}\n', LINE_DEPTH)),
        "corpus-200mb-field": lambda: _streamed(FOLDER / "corpus-200mb-field.jsonl", [
            b'{"doc_id": "d1", "title": "Tent"}\n{"doc_id": "d2", "body": "'], (b"b" * MiB for _ in range(200)), [b'"}\n']),
        "parquet-bomb": lambda: _parquet_bomb(FOLDER / "run-300mb-id.parquet"),
        "parquet-dictionary-run": lambda: _dictionary_bomb(FOLDER / "run-dictionary-4gb.parquet", "doc_id", 20_000),
        "parquet-dictionary-log": lambda: _dictionary_bomb(FOLDER / "log-dictionary-100gb.parquet", "query", 500_000),
        "queries-600mb-line": lambda: _long_line(FOLDER / "queries-600mb-line.csv", b"query_id,query\nq1,tent\nq2,", b"\n"),
        "references-600mb-line": lambda: _long_line(
            FOLDER / "references-600mb-line.jsonl", b'{"query_id": "q1", "answers": ["Paris"]}\n{"query_id": "q2", "answers": ["',
            b'"]}\n'),
        "judgments-600mb-line": lambda: _long_line(FOLDER / "judgments-600mb-line.qrels", b"q1 0 d1 2\nq1 0 ", b" 1\n"),
        "judgments-json-600mb-line": lambda: _long_line(FOLDER / "judgments-600mb-line.json",
                                                        b'[{"query_id": "q1",\n "ratings": [{"doc_id": "', b'", "rating": 1}]}]\n'),
    }
    return makers[source]()


# -------------------------------------------------------------------------------------------- cases


CASES = {
    # name: (what the process does, the input it reads, whether it is a bomb held to the memory target)
    "log-1g-line": ("import_query_log: .gz log, one 1 GiB line", "log-1g-line", True),
    "log-10g-line": ("import_query_log: .gz log, one 10 GiB line", "log-10g-line", True),
    "gzip-bomb": ("import_query_log: gzip bomb of short lines (limit 1 GiB unpacked)", "gzip-bomb", True),
    "run-200mb-line": ("import_run: run with one 200 MB line", "run-200mb-line", True),
    "run-normal": ("import_run: {rows} rows", "run-normal", False),
    "run-long-id": ("import_run: the same with one 100 KB doc id (refused)", "run-long-id", True),
    "read-normal": ("read_run: {rows} rows", "run-normal", False),
    "read-long-id": ("read_run, no id limit: the same with one 100 KB doc id (accepted)", "run-long-id", True),
    "json-run": ("import_run: JSON run nested 10M deep", "json-run", True),
    "json-judgments": ("import_judgments: JSON list nested 10M deep", "json-judgments", True),
    "jsonl-corpus": ("import_corpus: JSON Lines, a line nested 400k deep", "jsonl-corpus", True),
    "jsonl-queries": ("import_queries: JSON Lines, a line nested 400k deep", "jsonl-queries", True),
    "jsonl-log": ("import_query_log: JSON Lines, a line nested 400k deep", "jsonl-log", True),
    "corpus-200mb-field": ("import_corpus: one 200 MB field", "corpus-200mb-field", True),
    "parquet-bomb": ("import_run: 10 KB Parquet run, one 300 MB doc id", "parquet-bomb", True),
    "parquet-dictionary-run": ("import_run: Parquet run, 200,000 rows naming one 20 KB doc id (4 GB unpacked)",
                               "parquet-dictionary-run", True),
    "parquet-dictionary-log": ("import_query_log: Parquet log, 200,000 rows naming one 500 KB query (100 GB unpacked)",
                               "parquet-dictionary-log", True),
    "queries-600mb-line": ("import_queries: one 600 MB line", "queries-600mb-line", True),
    "references-600mb-line": ("import_references: one 600 MB line", "references-600mb-line", True),
    "judgments-600mb-line": ("import_judgments: qrels, one 600 MB line", "judgments-600mb-line", True),
    "judgments-json-600mb-line": ("import_judgments: JSON list, one 600 MB line", "judgments-json-600mb-line", True),
}


def _project():
    from django.contrib.auth import get_user_model

    from judgments.models import Project, Round
    from judgments.ops.actions import create_project

    Round.objects.filter(project__slug=SLUG).delete()  # (a round protects its pool and guidelines)
    Project.objects.filter(slug=SLUG).delete()
    lead, _ = get_user_model().objects.get_or_create(username="bench-hostile-lead")
    return create_project(name=SLUG, slug=SLUG, creator=lead)


def _round(project):
    from tests.factory import make_round

    return make_round(project, project.created_by, [project.created_by], {"q1": ["d1", "d2"], "q2": ["d3"]})


def run_case(case: str, path: str) -> dict:
    """One case, in this process: set up, time the call alone, report its outcome and the peak RSS."""
    if case == "gzip-bomb":
        os.environ["DECOMPRESSED_MAX_BYTES"] = str(1 << 30)
    if case.startswith("read-"):
        sys.path.insert(0, str(ROOT))
        from evaluation.engine import read_run

        def call():
            return f"{len(read_run(path, max_id_bytes=None)):,} rows read"
    else:
        setup_django()
        call = _import_call(case, Path(path))
    setup_peak, before = memory_mb("VmHWM"), memory_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts again from what is held now
    started = time.perf_counter()
    try:
        outcome = call()
    except Exception as error:  # what the person would see
        outcome = f"refused: {error}"
    seconds = time.perf_counter() - started
    peak = memory_mb("VmHWM")
    return {"seconds": seconds, "peak_mb": max(setup_peak, peak), "extra_mb": peak - before, "outcome": outcome[:160]}


def _import_call(case: str, path: Path):
    from judgments.lib.querylog import ColumnMapping
    from judgments.ops.imports import import_corpus, import_queries, import_run
    from judgments.ops.judgment_files import import_judgments
    from judgments.ops.log_sampling import import_query_log

    project = _project()
    if case.startswith("log-") or case in ("gzip-bomb", "jsonl-log", "parquet-dictionary-log"):
        return lambda: str(import_query_log(project, path, path.name, name=case, mapping=ColumnMapping("query")))
    if case.startswith("run-") or case in ("json-run", "parquet-bomb", "parquet-dictionary-run"):
        return lambda: f"stored {import_run(project, path, path.name, name=case, system='bench')[0].n_rows:,} rows"
    if case in ("jsonl-corpus", "corpus-200mb-field"):
        return _streaming(path, lambda stream: str(import_corpus(project, stream, path.name)))
    if case in ("jsonl-queries", "queries-600mb-line"):
        return _streaming(path, lambda stream: str(import_queries(project, stream, path.name, name=case)[0]))
    if case == "references-600mb-line":
        from judgments.ops.answers import import_references

        query_set, _warnings = import_queries(project, b"query_id,query\nq1,capital of france\nq2,tent\n", "q.csv", name=case)
        return lambda: str(import_references(query_set, path))
    round = _round(project)
    return _streaming(path, lambda stream: import_judgments(round, stream, path.name).summary)


def _streaming(path: Path, call):
    """`call` on the file opened, as the job or the command gives it to the import."""
    def opened():
        with path.open("rb") as stream:
            return call(stream)
    return opened


def child(case: str, path: Path) -> dict:
    result = subprocess.run([sys.executable, __file__, "--case", case, "--input", str(path)], cwd=ROOT / "benchmarks",
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"the {case} case crashed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, from: " + ", ".join(CASES))
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the long-id run and its twin")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.case:
        print(json.dumps(run_case(options.case, options.input)))
        return
    cases = options.cases.split(",")
    started = time.perf_counter()
    files = {CASES[case][1]: make_input(CASES[case][1], options.rows) for case in cases}
    print(f"inputs under {FOLDER.relative_to(ROOT)} ({time.perf_counter() - started:.0f} s to make or find)\n")
    results = {}
    print("| case | file | seconds | peak RSS | extra | outcome | target |")
    print("|---|---:|---:|---:|---:|---|---|")
    for case in cases:
        label, source, bomb = CASES[case]
        results[case] = result = child(case, files[source])
        ok = result["peak_mb"] < TARGET_PEAK_MB if bomb else None
        verdict = "" if ok is None else f"{'PASS' if ok else 'FAIL'} (< {TARGET_PEAK_MB:.0f} MB)"
        if case in TARGET_EXTRA_MB:
            within = result["extra_mb"] < TARGET_EXTRA_MB[case]
            ok = ok and within
            verdict += f", {'PASS' if within else 'FAIL'} (< {TARGET_EXTRA_MB[case]:.0f} MB extra)"
        size = files[source].stat().st_size
        print(f"| {label.format(rows=f'{options.rows:,}')} | {f'{size / 1024:,.1f} KB' if size < MiB else f'{size / MiB:,.1f} MB'} | "
              f"{result['seconds']:.2f} | {result['peak_mb']:,.0f} MB | {result['extra_mb']:,.0f} MB | {result['outcome']} | "
              f"{verdict} |", flush=True)
        results[case]["ok"] = ok
    for slow, fast in (("run-long-id", "run-normal"), ("read-long-id", "read-normal")):
        if slow in results and fast in results:
            ratio = results[slow]["seconds"] / results[fast]["seconds"]
            results[slow]["ok"] = results[slow]["ok"] is not False and ratio <= TARGET_RATIO
            print(f"{slow} / {fast}: {ratio:.2f} x the time -> {'PASS' if ratio <= TARGET_RATIO else 'FAIL'} "
                  f"(at most {TARGET_RATIO:.0f} x)")
    print(f"load average {os.getloadavg()[0]:.2f}")
    sys.exit(0 if all(result["ok"] is not False for result in results.values()) else 1)


if __name__ == "__main__":
    main()
