"""Hostile inputs too big to build inside the test process: the Parquet bomb. The benchmark
(`benchmarks/hostile_inputs.py`) builds its bomb here too."""

import subprocess
import sys
from pathlib import Path

BOMB_BYTES = 300 << 20

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


def write_parquet_bomb(path: Path) -> Path:
    """A Parquet run of one row whose doc id is 300 MB of one character: zstd packs it into about 10 KB."""
    subprocess.run([sys.executable, "-c", _BOMB, str(path)], check=True)
    return path
