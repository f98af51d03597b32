"""Agreement statistics and qrels exports at scale, on PostgreSQL, against named peers.

    make bench-agreement        (or: .venv/bin/python benchmarks/agreement.py [--pairs 100000] [--judgments 1000000])

Cases (targets from the agreement issue, on the 2-core machine):
  * the full statistics of a round's report on 100,000 pairs x 3 raters, 0-3 scale: percent agreement,
    Fleiss' kappa, Krippendorff's alpha (ordinal and interval), Gwet's AC1 and mean pairwise Cohen's kappa,
    each with a 1,000-resample bootstrap interval over pairs; the rater pairs with confusion matrices, alpha
    per query, each rater against the others and the weekly drift; from the grades in memory
                                                                                  -> at most 10 s
    peer: the krippendorff package's alpha and scikit-learn's cohen_kappa_score called once per
    bootstrap resample (what a script without vectorised resampling does), timed on 20 resamples and
    scaled to 1,000
  * export a round with 1,000,000 judgments (500,000 pairs x 2 raters) as qrels, consensus labels, streamed
    from PostgreSQL                                                               -> at most 20 s, flat memory
    peer: the ORM way, a list of every judgment with select_related, grouped in a dict, joined into one
    string (all in memory)

Each export case runs in a fresh process, so that its peak RSS is its own. The round is built with SQL
(generate_series) and cached in the benchmark database between runs.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from bench_django import ROOT, bulk_project, kept_round, setup_django

SLUG = "bench-agreement"
TARGET_STATISTICS_SECONDS = 10.0
TARGET_EXPORT_SECONDS = 20.0
LABELS = [0, 1, 2, 3]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_grades(pairs: int, raters: int = 3, seed: int = 1) -> pd.DataFrame:
    """Three raters who mostly agree: a latent grade per pair, each rater off by one a fifth of the time,
    one rater a little harsher; queries of 25 pairs; grades spread over eight weeks."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(LABELS, size=pairs, p=[0.45, 0.25, 0.2, 0.1])
    noise = rng.choice([-1, 0, 0, 0, 0, 0, 0, 0, 1, 1], size=(pairs, raters))
    noise[:, 2] -= rng.random(pairs) < 0.1
    grades = np.clip(truth[:, None] + noise, 0, 3)
    start = np.datetime64("2026-09-01T00:00:00")
    times = start + rng.integers(0, 56 * 86400, size=pairs * raters).astype("timedelta64[s]")
    return pd.DataFrame({"item": np.repeat(np.arange(pairs), raters), "rater": np.tile([f"r{i}" for i in range(raters)], pairs),
                         "grade": grades.ravel(), "time": pd.to_datetime(times, utc=True),
                         "query": np.repeat(np.arange(pairs) // 25, raters)})


def statistics_case(pairs: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from judgments.lib import agreement

    grades = synthetic_grades(pairs)
    started = time.perf_counter()
    summary = agreement.summary(grades, LABELS, scale_kind="graded", resamples=1000, seed=0)
    summary_seconds = time.perf_counter() - started
    agreement.pairwise(grades, LABELS)
    agreement.per_item_group_alpha(grades, dict(zip(grades["item"], grades["query"])), LABELS, "ordinal")
    agreement.rater_vs_consensus(grades, LABELS)
    agreement.drift(grades, LABELS, level="ordinal")
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "summary_seconds": summary_seconds, "peak_mb": peak_mb(),
            "alpha": summary["statistics"]["alpha_ordinal"], "kappa": summary["statistics"]["mean_pairwise_kappa"]}


def statistics_peer(pairs: int, resamples: int = 20) -> dict:
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    grades = synthetic_grades(pairs)
    matrix = grades.pivot(index="rater", columns="item", values="grade").to_numpy(dtype=float)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for _ in range(resamples):
        pick = rng.integers(0, pairs, pairs)
        sample = matrix[:, pick]
        krippendorff.alpha(reliability_data=sample, level_of_measurement="ordinal", value_domain=LABELS)
        for a, b in ((0, 1), (0, 2), (1, 2)):
            cohen_kappa_score(sample[a], sample[b], labels=LABELS, weights="quadratic")
    per_resample = (time.perf_counter() - started) / resamples
    return {"seconds_per_resample": per_resample, "seconds_for_1000": per_resample * 1000, "resamples_run": resamples}


def build_round(n_items: int, raters: int = 2, slug: str = SLUG):
    """A round of n_items pairs, each graded by `raters` raters, written with SQL, its counters counted;
    reused when present (in the project `slug`)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from judgments.lib.scales import GRADED
    from judgments.models import Pool, Round
    from judgments.ops.grading import recount_pairs

    if (round := kept_round(slug, n_items)) is not None:
        return round
    users = [get_user_model().objects.get_or_create(username=f"bench-rater-{i}")[0] for i in range(raters)]
    n_queries, per_query = n_items // 100, 100
    project, collection, guidelines = bulk_project(slug, n_queries, per_query * 10)
    pool = Pool.objects.create(project=project, name="pool", query_set=collection,
                               report={"total_pairs": n_items, "pairs_per_query": {}, "missing_from_corpus": 0, "missing_examples": []})
    round = Round.objects.create(project=project, name="bench round", pool=pool, guidelines=guidelines, scale=GRADED.to_json(),
                                 status=Round.Status.OPEN, raters_per_pair=raters, overlap_share=0)
    round.raters.set(users)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO judgments_poolpair (pool_id, query_id, doc_id, document_id, best_rank, n_systems, provenance, priority) "
            "SELECT %s, q.id, d.doc_id, d.id, k + 1, 1, '{}', -k "
            "FROM judgments_query q CROSS JOIN generate_series(0, %s) AS k "
            "JOIN judgments_document d ON d.project_id = %s AND d.doc_id = 'doc' || lpad(((q.id * 7 + k * 13) %% %s)::text, 6, '0') "
            "WHERE q.collection_id = %s",
            [pool.pk, per_query - 1, project.pk, per_query * 10, collection.pk])
        cursor.execute(
            "INSERT INTO judgments_rounditem (uuid, round_id, pair_id, query_id, document_id, priority, query_key, pair_key, required, n_judged) "
            "SELECT gen_random_uuid(), %s, p.id, p.query_id, p.document_id, p.priority, 0, 0, %s, %s "
            "FROM judgments_poolpair p WHERE p.pool_id = %s",
            [round.pk, raters, raters, pool.pk])
        for i, user in enumerate(users):
            cursor.execute(
                "INSERT INTO judgments_judgment (uuid, item_id, rater_id, grade, unrateable, unrateable_note, note, created_at, updated_at) "
                "SELECT gen_random_uuid(), i.id, %s, LEAST(3, GREATEST(0, (i.id %% 4) + CASE WHEN (i.id * %s) %% 5 = 0 THEN 1 ELSE 0 END)), "
                "'', '', '', now(), now() FROM judgments_rounditem i WHERE i.round_id = %s",
                [user.pk, i + 3, round.pk])
        cursor.execute("ANALYZE judgments_poolpair, judgments_rounditem, judgments_judgment, judgments_query, judgments_document")
    recount_pairs(round)
    return round


def export_case(n_items: int) -> dict:
    setup_django()
    from judgments.models import Round
    from judgments.ops.judgment_files import export

    round = Round.objects.get(project__slug=SLUG)
    before = peak_mb()
    started = time.perf_counter()
    lines = size = 0
    for chunk in export(round, "qrels"):
        size += len(chunk)
        lines += chunk.count("\n")
    return {"seconds": time.perf_counter() - started, "lines": lines, "bytes": size, "peak_mb": peak_mb(),
            "rss_before_mb": before}


def export_peer(n_items: int) -> dict:
    setup_django()
    from judgments.models import Judgment, Round

    round = Round.objects.get(project__slug=SLUG)
    before = peak_mb()
    started = time.perf_counter()
    grades: dict = {}
    for judgment in Judgment.objects.filter(item__round=round, grade__isnull=False).select_related("item__query", "item__document"):
        grades.setdefault((judgment.item.query.query_id, judgment.item.document.doc_id), []).append(judgment.grade)
    text = "".join(f"{q} 0 {d} {sorted(g)[(len(g) - 1) // 2]}\n" for (q, d), g in sorted(grades.items()))
    return {"seconds": time.perf_counter() - started, "lines": text.count("\n"), "peak_mb": peak_mb(), "rss_before_mb": before}


def in_child(case: str, size: int) -> dict:
    result = subprocess.run([sys.executable, __file__, "--case", case, "--size", str(size)], cwd=ROOT / "benchmarks",
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"the {case} case failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


CASES = {"statistics": statistics_case, "statistics-peer": statistics_peer, "export": export_case, "export-peer": export_peer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000, help="pairs for the statistics case (3 raters each)")
    parser.add_argument("--judgments", type=int, default=1_000_000, help="judgments for the export case (2 per pair)")
    parser.add_argument("--case", choices=list(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.case:
        print(json.dumps(CASES[options.case](options.size), default=float))
        return
    stats, peer = in_child("statistics", options.pairs), in_child("statistics-peer", options.pairs)
    setup_django()
    started = time.perf_counter()
    build_round(options.judgments // 2)
    print(f"round with {options.judgments:,} judgments ready in {time.perf_counter() - started:.0f} s\n")
    ours, theirs = in_child("export", options.judgments // 2), in_child("export-peer", options.judgments // 2)

    stats_ok = stats["seconds"] <= TARGET_STATISTICS_SECONDS
    export_ok = ours["seconds"] <= TARGET_EXPORT_SECONDS and ours["peak_mb"] - ours["rss_before_mb"] < 100
    print("| case | seconds | peak RSS | target |")
    print("|---|---:|---:|---|")
    print(f"| Verdict: full statistics, {options.pairs:,} pairs x 3 raters, 1,000 bootstrap resamples | **{stats['seconds']:.1f}** "
          f"(summary with intervals {stats['summary_seconds']:.1f}) | {stats['peak_mb']:,.0f} MB | {'PASS' if stats_ok else 'FAIL'} (<= 10 s) |")
    print(f"| peer: krippendorff.alpha + 3 x cohen_kappa_score per resample (x 1,000, from {peer['resamples_run']}) | "
          f"{peer['seconds_for_1000']:,.0f} | | |")
    print(f"| Verdict: export {ours['lines']:,} qrels lines from {options.judgments:,} judgments, streamed | **{ours['seconds']:.1f}** | "
          f"{ours['peak_mb']:,.0f} MB (+{ours['peak_mb'] - ours['rss_before_mb']:,.0f} MB while exporting) | "
          f"{'PASS' if export_ok else 'FAIL'} (<= 20 s, flat memory) |")
    print(f"| peer: ORM list + dict + one string | {theirs['seconds']:.1f} | {theirs['peak_mb']:,.0f} MB "
          f"(+{theirs['peak_mb'] - theirs['rss_before_mb']:,.0f} MB) | |")
    alpha, kappa = stats["alpha"], stats["kappa"]
    print(f"\nalpha (ordinal) {alpha['value']:.3f} [{alpha['low']:.3f}, {alpha['high']:.3f}], "
          f"mean pairwise kappa {kappa['value']:.3f} [{kappa['low']:.3f}, {kappa['high']:.3f}]; load average {os.getloadavg()[0]:.2f}")
    sys.exit(0 if stats_ok and export_ok else 1)


if __name__ == "__main__":
    main()
