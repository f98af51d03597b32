"""The answer metrics' speed (#16), on the 2-core machine.

    make bench-answers        (or: .venv/bin/python benchmarks/answers.py [--queries 100000] [--processes 2]
                               [--peer-sample 3000] [--peer-full])

Case: 100,000 predictions of 10-60 words, 3 references each of 1-15 words, generated with a seed from an
English-like vocabulary (a few hundred common words, with suffixes the Porter stemmer strips, and Zipf-like
frequencies), some references copied from the prediction's own words so that every measure has hits; all
eight measures (acc, em, stringem, coverem, f1, rouge-1, rouge-2, rouge-l) with ``score_answers``
(``--processes`` forked processes)                                                   -> at most 10 s wall.

Beside it, the plain loop a user would write: ``RougeScorer(["rouge1", "rouge2", "rougeL"],
use_stemmer=True).score(reference, prediction)`` once per (reference, prediction) pair, ROUGE only, on the
normalised texts. It is timed on ``--peer-sample`` predictions (their 3 pairs each) and extrapolated to the
100,000, unless ``--peer-full`` times the whole loop. The peer's values on the sample must equal ours.

The table shows wall and CPU time (this process and its children), and the load average before and after
(other engineers' tests share the machine). Nothing is written to disk.
"""

import argparse
import importlib
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from evaluation.engine.answers import ANSWER_MEASURES, normalize_text, score_answers  # noqa: E402

TARGET_SECONDS = 10.0

STEMS = ("answer", "capital", "river", "mountain", "king", "queen", "war", "treaty", "city", "country", "year",
         "century", "player", "team", "season", "song", "album", "film", "actor", "director", "novel", "author",
         "company", "founder", "president", "minister", "election", "party", "church", "school", "university",
         "island", "ocean", "lake", "border", "language", "currency", "population", "battle", "empire", "dynasty",
         "science", "theory", "planet", "star", "element", "disease", "medicine", "hospital", "bridge", "tower",
         "record", "award", "prize", "festival", "museum", "painting", "building", "station", "railway", "airport",
         "general", "army", "navy", "ship", "engine", "computer", "program", "network", "system", "market", "bank",
         "price", "trade", "law", "court", "judge", "right", "power", "energy", "water", "forest", "animal", "bird",
         "fish", "plant", "flower", "season", "winter", "summer", "north", "south", "east", "west", "central")
SUFFIXES = ("", "", "", "s", "ing", "ed", "er", "ly", "ation", "ness")
FUNCTION = ("the", "a", "an", "of", "in", "on", "and", "to", "was", "is", "by", "for", "with", "from", "as", "at",
            "it", "that", "which", "his", "her", "their", "first", "new", "old", "great", "known", "largest", "1912",
            "1945", "2001", "two", "three", "don't", "it's", "U.S.", "St.", "(born", "1970)", "well-known")


def vocabulary() -> list[str]:
    return [s + x for s in STEMS for x in SUFFIXES] + list(FUNCTION) * 12


def dataset(queries: int, seed: int = 16) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Predictions of 10-60 words and 3 references of 1-15 words per query, words drawn with Zipf-like
    frequencies; 40% of references copy a run of their prediction's words, 5% of predictions are exactly
    their first reference. Drawn with numpy in bulk, so 100,000 queries take a few seconds."""
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(), dtype=object)
    weights = 1.0 / (np.arange(len(words)) + 1) ** 0.8
    weights = rng.permutation(weights / weights.sum())
    pred_lengths = rng.integers(10, 61, queries)
    ref_lengths = rng.integers(1, 16, (queries, 3))
    drawn = iter(rng.choice(words, int(pred_lengths.sum() + ref_lengths.sum()), p=weights).tolist())
    copied = rng.random((queries, 3)) < 0.4
    starts = rng.random((queries, 3))
    ends = rng.choice([".", ".", "?", "", "!"], (queries, 4)).tolist()
    exact = rng.random(queries) < 0.05
    references, predictions = {}, {}
    for i in range(queries):
        tokens = [next(drawn) for _ in range(pred_lengths[i])]
        prediction = " ".join(tokens).capitalize() + ends[i][0]
        refs = []
        for j in range(3):
            n = int(ref_lengths[i, j])
            if copied[i, j]:
                start = int(starts[i, j] * max(1, len(tokens) - n + 1))
                refs.append(" ".join(tokens[start:start + n]))
                for _ in range(n):
                    next(drawn)
            else:
                refs.append(" ".join(next(drawn) for _ in range(n)).capitalize() + ends[i][j + 1])
        if exact[i]:
            prediction = refs[0]
        references[f"q{i}"], predictions[f"q{i}"] = refs, prediction
    return references, predictions


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def peer_loop(references: dict[str, list[str]], predictions: dict[str, str], query_ids: list[str]) -> tuple[float, dict]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    started = time.perf_counter()
    values = {}
    for qid in query_ids:
        prediction = normalize_text(predictions[qid])
        best = [0.0, 0.0, 0.0]
        for reference in references[qid]:
            score = scorer.score(normalize_text(reference), prediction)
            best = [max(best[0], score["rouge1"].fmeasure), max(best[1], score["rouge2"].fmeasure),
                    max(best[2], score["rougeL"].fmeasure)]
        values[qid] = best
    return time.perf_counter() - started, values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--peer-sample", type=int, default=2_000)
    parser.add_argument("--peer-full", action="store_true")
    args = parser.parse_args()

    load_before = loadavg()
    made = time.perf_counter()
    references, predictions = dataset(args.queries)
    print(f"generated {args.queries:,} predictions x 3 references in {time.perf_counter() - made:.1f} s "
          f"(not timed below)")
    for module in ("rouge_score.rouge_scorer", "nltk.stem.porter", "regex"):  # imported before timing, as the peer's
        importlib.import_module(module)

    cpu, wall = cpu_seconds(), time.perf_counter()
    per_query = score_answers(references, predictions, ANSWER_MEASURES, processes=args.processes)
    ours_wall, ours_cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    assert all(len(per_query[m]) == args.queries for m in ANSWER_MEASURES)

    sample = list(references)[: args.queries if args.peer_full else min(args.peer_sample, args.queries)]
    peer_wall, peer_values = peer_loop(references, predictions, sample)
    mismatches = sum(1 for q in sample if peer_values[q] != [per_query["rouge-1"][q], per_query["rouge-2"][q],
                                                          per_query["rouge-l"][q]])
    peer_full = peer_wall * args.queries / len(sample)
    load_after = loadavg()

    means = {m: sum(v.values()) / len(v) for m, v in per_query.items()}
    print()
    print(f"{'case':<64} {'wall s':>8} {'cpu s':>8}")
    print("-" * 82)
    print(f"{f'score_answers, 8 measures, {args.queries:,} x 3, {args.processes} process(es)':<64} "
          f"{ours_wall:8.2f} {ours_cpu:8.2f}")
    how = "full loop" if len(sample) == args.queries else f"timed on {len(sample):,}, extrapolated"
    print(f"{f'plain RougeScorer.score loop, ROUGE only ({how})':<64} {peer_full:8.2f} {'':>8}")
    print()
    print(f"speed-up over the plain loop: {peer_full / ours_wall:.1f}x (the loop computes 3 of the 8 measures)")
    print(f"ROUGE values equal to RougeScorer's on the {len(sample):,} sampled predictions: "
          f"{'yes' if mismatches == 0 else f'NO, {mismatches} differ'}")
    print("means: " + ", ".join(f"{m} {v:.4f}" for m, v in means.items()))
    print(f"load average before {load_before}, after {load_after}; {os.cpu_count()} cores")
    busy = float(load_before.split()[0]) > 1.0
    if busy:
        print(f"note: the machine was busy (1-minute load {load_before.split()[0]} before the run on "
              f"{os.cpu_count()} cores): wall times include waiting for a core; on a quiet machine the "
              f"{args.processes} processes would take about {ours_cpu / args.processes:.1f} s of wall each (CPU / "
              f"processes, an estimate, not a measurement)")
    passed = ours_wall <= TARGET_SECONDS and mismatches == 0
    print(f"{'PASS' if passed else 'FAIL'}: {ours_wall:.2f} s for {args.queries:,} predictions "
          f"(target at most {TARGET_SECONDS:.0f} s)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
