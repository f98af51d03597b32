"""Parquet in an S3-compatible bucket: read by ranged GETs (judgments/core/storage.py) or whole (django-storages'
S3File, which downloads the object before the first read), and a large file uploaded in parts.

    make bench-storage        (or: .venv/bin/python benchmarks/storage.py [--rows 7000000])

The server is moto's server mode in its own process on a loopback port (no MinIO on the project's machines);
the app's storage is configured as in production, by STORAGE_BACKEND=s3 and the S3_* variables.
The file is a stored run as the app writes one: query_id, doc_id, score, rank, zstd, 2^20 rows per row group,
in ranking order (100 documents for each of rows/100 queries).

Cases (targets: what streaming from the bucket is for):
  * upload the run's Parquet file through the storage API                   -> in parts of S3_PART_SIZE_MB (8)
  * read one column (query_id: a run's coverage of a query set)    -> ranges fetch at most half the bytes
  * read one query's rows with a filter (a run's ranked list page)  -> ranges fetch at most half the bytes
  * read the whole table (evaluating the run)                       -> ranges at most 1.25 x the time of a whole download
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
ROW_GROUP = 1 << 20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server, f"http://127.0.0.1:{port}"
        time.sleep(0.1)
    server.kill()
    raise SystemExit("moto_server did not start")


def setup_django(endpoint: str, bucket: str) -> None:
    os.environ.update({"DEBUG": "true", "STORAGE_BACKEND": "s3", "S3_BUCKET": bucket, "S3_ENDPOINT_URL": endpoint,
                       "S3_REGION": "us-east-1", "S3_ACCESS_KEY_ID": "bench", "S3_SECRET_ACCESS_KEY": "bench-secret",
                       "S3_ADDRESSING_STYLE": "path", "DJANGO_SETTINGS_MODULE": "config.settings"})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.files.storage import default_storage

    default_storage.bucket.create()


def run_file(rows: int, folder: Path) -> Path:
    rng = np.random.default_rng(1)
    queries = rows // 100
    table = pa.table({
        "query_id": pa.array(np.repeat([f"q{i:06d}" for i in range(queries)], 100)).dictionary_encode().cast(pa.string()),
        "doc_id": pa.array([f"doc{n:08d}" for n in rng.integers(0, 50_000_000, size=queries * 100)]),
        "score": np.sort(rng.random(queries * 100))[::-1],
        "rank": np.tile(np.arange(1, 101, dtype=np.int32), queries),
    })
    path = folder / "run.parquet"
    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP)
    return path


def timed(read) -> tuple[float, int, int]:
    started = time.perf_counter()
    fetched, rows = read()
    return time.perf_counter() - started, fetched, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=7_000_000)
    args = parser.parse_args()
    server, endpoint = start_server()
    try:
        setup_django(endpoint, f"bench-{uuid.uuid4().hex[:8]}")
        from django.core.files import File
        from django.core.files.storage import default_storage

        from judgments.core.storage import open_stored

        with tempfile.TemporaryDirectory() as folder:
            path = run_file(args.rows, Path(folder))
            size = path.stat().st_size
            started = time.perf_counter()
            with path.open("rb") as handle:
                name = default_storage.save("runs/bench.parquet", File(handle))
            upload_seconds = time.perf_counter() - started
        etag = default_storage.bucket.Object(name).e_tag.strip('"')  # no S3_PREFIX here: the key is the name
        parts = int(etag.rsplit("-", 1)[1]) if "-" in etag else 1
        query = f"q{args.rows // 200:06d}"

        def with_ranges(**options):
            def read():
                with open_stored(name) as handle:
                    table = pq.read_table(handle, **options)
                    return handle.raw.bytes_fetched, table.num_rows
            return read

        def whole(**options):
            def read():
                with default_storage.open(name, "rb") as handle:
                    table = pq.read_table(handle, **options)
                    return handle.size, table.num_rows
            return read

        cases = [("one column (query_id)", {"columns": ["query_id"]}, "bytes"),
                 ("one query (filter)", {"filters": [("query_id", "=", query)]}, "bytes"),
                 ("whole table", {}, "time")]
        load = os.getloadavg()[0]
        print(f"Parquet run of {args.rows:,} rows, {size / 2**20:.1f} MB, on moto_server at {endpoint} "
              f"({os.cpu_count()} cores, load {load:.1f})")
        print(f"upload through the storage API: {upload_seconds:.2f} s in {parts} parts")
        print(f"{'case':<24}{'ranges s':>10}{'MB fetched':>12}{'whole s':>10}{'MB fetched':>12}  target")
        failed = False
        for label, options, target in cases:
            r_seconds, r_bytes, r_rows = min((timed(with_ranges(**options)) for _ in range(3)), key=lambda t: t[0])
            w_seconds, w_bytes, w_rows = min((timed(whole(**options)) for _ in range(3)), key=lambda t: t[0])
            assert r_rows == w_rows, (label, r_rows, w_rows)
            ok = r_bytes <= w_bytes / 2 if target == "bytes" else r_seconds <= 1.25 * w_seconds
            failed |= not ok
            goal = "ranges fetch <= half" if target == "bytes" else "ranges <= 1.25 x whole"
            print(f"{label:<24}{r_seconds:>10.2f}{r_bytes / 2**20:>12.1f}{w_seconds:>10.2f}{w_bytes / 2**20:>12.1f}  "
                  f"{goal}: {'PASS' if ok else 'FAIL'}")
        print(f"upload in parts: {'PASS' if parts > 1 else 'FAIL'} ({parts} parts)")
        failed |= parts <= 1
    finally:
        server.terminate()
        server.wait()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
