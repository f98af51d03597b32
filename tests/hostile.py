"""Hostile inputs too big to build or read inside the test process: the Parquet bomb, and the memory a call
takes measured in a fresh interpreter (the test process's own high-water mark says nothing about one call).
The benchmark (`benchmarks/hostile_inputs.py`) builds its bomb here too."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOMB_BYTES = 300 << 20
MiB = 1 << 20

# Writing the bomb takes about 1 GB for a moment, so it is written by a process of its own; without a
# dictionary and statistics (which would only copy the id again) it takes 3 s instead of 12.
_BOMB = f"""
import sys
import pyarrow as pa
import pyarrow.parquet as pq

doc_id = pa.StringArray.from_buffers(1, pa.array([0, {BOMB_BYTES}], pa.int32()).buffers()[1],
                                     pa.py_buffer(b"x" * {BOMB_BYTES}))
pq.write_table(pa.table({{"query_id": ["q1"], "doc_id": doc_id, "score": [1.0]}}), sys.argv[1], compression="zstd",
               use_dictionary=False, write_statistics=False)
"""

# Run in the child before the measured calls: `measure(name, call)` records the memory `call()` adds to what
# the process holds (VmHWM, reset to VmRSS through clear_refs) and what it raised.
_MEASURE = """
import json, sys
from pathlib import Path

def held(field):
    status = Path("/proc/self/status").read_text()
    return int(status.split(field + ":")[1].split()[0]) / 1024

results = {}

def measure(name, call):
    before = held("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    try:
        call()
        raised = None
    except Exception as error:
        raised = str(error)
    results[name] = {"extra_mb": held("VmHWM") - before, "raised": raised}
"""


def write_parquet_bomb(path: Path) -> Path:
    """A Parquet run of one row whose doc id is 300 MB of one character: zstd packs it into about 10 KB."""
    subprocess.run([sys.executable, "-c", _BOMB, str(path)], check=True)
    return path


def write_dictionary_bomb(path: Path, column: str, *, rows: int, value_bytes: int) -> Path:
    """A Parquet file whose `column` names one value of `value_bytes` in every one of `rows` rows: the dictionary
    keeps the value once, so the file and its footer are small and the rows unpack to rows x value_bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * value_bytes]))
    others = {"query_id": pa.array(["q1"] * rows), "doc_id": pa.array(["d1"] * rows), "score": pa.array(np.ones(rows))}
    pq.write_table(pa.table({**others, column: values}), path, compression="zstd")
    return path


def long_line_file(path: Path, head: bytes, tail: bytes, megabytes: int) -> Path:
    """`head`, then a line of `megabytes` MB of one character, then `tail`: written a block at a time."""
    block = b"x" * MiB
    with path.open("wb") as handle:
        handle.write(head)
        for _ in range(megabytes):
            handle.write(block)
        handle.write(tail)
    return path


def measured_in_child(code: str, env: dict[str, str] | None = None) -> dict[str, dict]:
    """Run `code` (which calls `measure(name, call)`) in a fresh interpreter at the repository root; returns
    {name: {"extra_mb", "raised"}}."""
    script = _MEASURE + code + "\nprint(json.dumps(results))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
