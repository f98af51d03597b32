"""A synthetic search log for the query-sampling benchmark, and the benchmark itself.

    .venv/bin/python benchmarks/sampling_data.py [--rows 10000000] [--gz]

``generate_log`` writes a CSV query log with one row per search, in time order: ``timestamp`` (ISO-8601, UTC,
over ``days`` days ending 2026-10-31), ``query``, ``language`` (en/de/fr/ja, skewed) and ``device``. Query
popularity follows a Zipf law (s = 1.05) over ``vocabulary`` synthetic queries, as search logs do
(Baeza-Yates & Saint-Jean, SPIRE 2003). About 3% of the rows spell their query differently (case, spaces,
end punctuation), about 0.1% hold an e-mail address or a phone number and about 0.01% are bad (no query, or a
timestamp that is not one). The file is cached under benchmarks/data/, its parameters in its name.

Run as a script, it times each stage of a sampling job on the 10-million-row log: ``aggregate_log``,
``query_traffic``, ``assign_tiers`` and ``draw_sample``, with the process's peak RSS after each stage.
Target (issue #6, 2-core machine): file to aggregate in under 15 s, under 1.5 GB peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"

END_DAY = np.datetime64("2026-10-31")
LANGUAGES = (("en", 0.62), ("de", 0.2), ("fr", 0.11), ("ja", 0.07))
DEVICES = (("mobile", 0.58), ("desktop", 0.37), ("tablet", 0.05))
ZIPF_S = 1.05
_CHUNK = 1_000_000


def generate_log(path: Path, rows: int = 10_000_000, vocabulary: int = 2_000_000, days: int = 120, seed: int = 7,
                 gz: bool = False) -> Path:
    """Write (or reuse) the log; `path` is a directory, the file name carries the parameters."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"querylog_r{rows}_v{vocabulary}_d{days}_s{seed}.csv{'.gz' if gz else ''}"
    if target.exists():
        return target
    rng = np.random.default_rng(seed)
    texts, languages = _vocabulary(vocabulary, rng)
    cdf = np.cumsum(np.arange(1, vocabulary + 1, dtype=np.float64) ** -ZIPF_S)
    cdf /= cdf[-1]
    devices = pa.array([name for name, _ in DEVICES])
    device_cdf = np.cumsum([share for _, share in DEVICES])
    start = (END_DAY - np.timedelta64(days - 1, "D")).astype("datetime64[s]").astype(np.int64)
    span = days * 86_400

    partial = target.with_name(target.name + ".part")
    sink = pa.CompressedOutputStream(str(partial), "gzip") if gz else pa.OSFile(str(partial), "wb")
    schema = pa.schema([("timestamp", pa.string()), ("query", pa.string()), ("language", pa.string()),
                        ("device", pa.string())])
    with sink, pcsv.CSVWriter(sink, schema) as writer:
        for first in range(0, rows, _CHUNK):
            n = min(_CHUNK, rows - first)
            ids = np.minimum(np.searchsorted(cdf, rng.random(n)), vocabulary - 1)
            # Logs are written as searches happen: the rows run in time order over the whole file.
            low, high = start + span * first // rows, start + span * (first + n) // rows
            seconds = np.sort(rng.integers(low, max(high, low + 1), size=n))
            stamps = pc.strftime(pa.array(seconds.astype("datetime64[s]")), format="%Y-%m-%dT%H:%M:%SZ")
            query = _spell(texts.take(pa.array(ids)), rng)
            query, stamps = _spoil(query, stamps, rng)
            device = devices.take(pa.array(np.searchsorted(device_cdf, rng.random(n) * device_cdf[-1])))
            writer.write_table(pa.table([stamps, query, languages.take(pa.array(ids)), device], schema=schema))
    partial.rename(target)
    return target


def _vocabulary(size: int, rng: np.random.Generator) -> tuple[pa.Array, pa.Array]:
    """`size` distinct queries of one to three pseudo-words, the most frequent first, and each one's language."""
    consonants = list("bcdfghklmnprstvz")
    vowels = list("aeiou")
    syllables = np.array([c + v for c in consonants for v in vowels])
    kana = np.array(list("アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン"))
    words = np.char.add(np.char.add(syllables[rng.integers(0, len(syllables), 3000)],
                                    syllables[rng.integers(0, len(syllables), 3000)]),
                        syllables[rng.integers(0, len(syllables), 3000)])
    words = rng.permutation(np.unique(words))[:2000]
    jwords = rng.permutation(np.unique(np.char.add(np.char.add(kana[rng.integers(0, len(kana), 3000)], kana[rng.integers(0, len(kana), 3000)]),
                                   kana[rng.integers(0, len(kana), 3000)])))[:2000]
    base = len(words)
    ids = np.arange(size)
    language_cdf = np.cumsum([share for _, share in LANGUAGES])
    language = np.searchsorted(language_cdf, rng.random(size) * language_cdf[-1])
    japanese = language == 3
    first = np.where(japanese, jwords[ids % len(jwords)], words[ids % base])
    second = np.where(japanese, jwords[(ids // base) % len(jwords)], words[(ids // base) % base])
    third = words[(ids // (base * base)) % base]
    joined = np.where(ids < base, first, np.char.add(np.char.add(first, " "), second))
    joined = np.where(ids < base * base, joined, np.char.add(np.char.add(joined, " "), third))
    names = pa.array([name for name, _ in LANGUAGES])
    return pa.array(joined.astype(object)), names.take(pa.array(language))


def _spell(query: pa.Array, rng: np.random.Generator) -> pa.Array:
    """About 3% of searches spell their query differently: Capitalised, UPPER, doubled space, end '?' or '!'."""
    kind = rng.integers(0, 100, size=len(query))
    kind = np.where(rng.random(len(query)) < 0.03, kind % 5, -1)
    variants = [pc.utf8_capitalize(query), pc.utf8_upper(query),
                pc.replace_substring(query, " ", "  ", max_replacements=1),
                pc.binary_join_element_wise(query, pa.scalar("?"), ""),
                pc.binary_join_element_wise(query, pa.scalar("!"), "")]
    for k, variant in enumerate(variants):
        query = pc.if_else(pa.array(kind == k), variant, query)
    return query


def _spoil(query: pa.Array, stamps: pa.Array, rng: np.random.Generator) -> tuple[pa.Array, pa.Array]:
    """About 0.1% personal data (e-mail addresses, phone numbers) and 0.01% bad rows (no query, bad time)."""
    n = len(query)
    draw = rng.random(n)
    digits = pc.cast(pa.array(rng.integers(1_000_000, 9_999_999, size=n)), pa.string())
    phone = pc.binary_join_element_wise(pa.scalar("call +1 (555) "), digits, "")
    mail = pc.binary_join_element_wise(pa.scalar("user"), digits, pa.scalar("@example.com"), "")
    query = pc.if_else(pa.array(draw < 0.0005), phone, query)
    query = pc.if_else(pa.array((draw >= 0.0005) & (draw < 0.001)), mail, query)
    query = pc.if_else(pa.array((draw >= 0.001) & (draw < 0.00105)), pa.scalar(""), query)
    stamps = pc.if_else(pa.array((draw >= 0.00105) & (draw < 0.0011)), pa.scalar("yesterday"), stamps)
    return query, stamps


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--vocabulary", type=int, default=2_000_000)
    parser.add_argument("--gz", action="store_true")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from judgments.lib.querylog import ColumnMapping, aggregate_log
    from judgments.lib.sampling import DEFAULT_QUOTAS, Boundaries, Quota, assign_tiers, draw_sample, query_traffic

    started = time.perf_counter()
    log = generate_log(DATA, rows=options.rows, vocabulary=min(options.vocabulary, options.rows), gz=options.gz)
    print(f"log        {log.name}  {log.stat().st_size / 1e6:,.0f} MB  ({time.perf_counter() - started:.1f} s to make or find)")

    def stage(name, work):
        started = time.perf_counter()
        result = work()
        print(f"{name:<26} {time.perf_counter() - started:6.2f} s   peak RSS {_peak_mb():7,.0f} MB")
        return result

    mapping = ColumnMapping(query="query", time="timestamp", segments=("language", "device"))
    aggregate = stage("aggregate_log", lambda: aggregate_log(log, log.name, mapping))
    print(f"    {aggregate.rows_read:,} rows, {aggregate.rows_bad:,} bad, {aggregate.rows_personal:,} personal,"
          f" {aggregate.daily.num_rows:,} daily rows, {aggregate.variants.num_rows:,} variants,"
          f" {aggregate.rows.num_rows:,} kept rows")

    def sample_once(label: str, stratify_by: str | None, boundaries: str, quotas: dict) -> None:
        """One job's sampling stages; its frames are freed on return, as they are when a job ends."""
        traffic = stage(f"query_traffic{label}",
                        lambda: query_traffic(aggregate.daily, ("language", "device"), stratify_by=stratify_by))
        print(f"    {len(traffic):,} units in the 90-day window")
        tiered = stage("assign_tiers", lambda: assign_tiers(traffic, Boundaries.parse(boundaries)))
        sample = stage("draw_sample", lambda: draw_sample(tiered, quotas, seed=1))
        print(sample.summary.to_string(index=False))

    sample_once("", None, "share:0.8,0.95", DEFAULT_QUOTAS)
    sample_once(" by language", "language", "rank:500,5000",
                {tier: Quota(quota.n, "traffic") for tier, quota in DEFAULT_QUOTAS.items()})


if __name__ == "__main__":
    main()
