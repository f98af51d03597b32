"""The data of the fewer-judgments benchmark (``benchmarks/fewer_judgments.py``): real graded qrels and simulated
runs of graded quality built from them.

``load_qrels()`` reads the DBpedia-Entity v2 test qrels committed under ``benchmarks/reference/`` (400 queries,
grades 0-2, about 109 judged documents per query; the README there says where they come from).

``simulated_runs(qrels)`` builds ``n_runs`` systems whose quality rises from weak to strong. For each query, run r
(r = 0 .. n_runs - 1) scores every judged document d by

    score_r(d) = quality_r * grade(d) + e,    e ~ Normal(0, 1) drawn per run, query and document,
    quality_r  = 0.25 + 1.75 * r / (n_runs - 1)     (0.25: close to random; 2.0: grade 2 two noise-widths up)

and ranks them by score, best first. Then each of the ``depth`` ranks is, with probability filler_r, taken by an
unjudged document instead (one of 200 per query, shared by the runs, so their pools overlap as real runs do):

    filler_r = 0.5 - 0.4 * r / (n_runs - 1)         (the weakest run fills half its ranks, the strongest a tenth)

so weaker runs also find fewer of the judged documents in their top ``depth`` (lower recall), and runs differ in
both precision and recall. Unjudged documents are not relevant under the qrels. Everything is drawn from
``numpy.random.default_rng(seed)`` in sorted query order, so a seed gives the same runs on every machine.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

QRELS = Path(__file__).resolve().parent / "reference" / "qrels.dbpedia-entity-v2.test.txt.gz"
FILLERS_PER_QUERY = 200


def load_qrels(path: Path = QRELS) -> dict[str, dict[str, int]]:
    """query id -> document id -> grade, from a (gzipped) TREC qrels file 'qid iter docno grade'."""
    qrels: dict[str, dict[str, int]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if len(fields) != 4:
                raise ValueError(f"{path}:{number}: expected 4 columns, found {len(fields)}")
            query, _, doc, grade = fields
            qrels.setdefault(query, {})[doc] = int(grade)
    return qrels


def run_qualities(n_runs: int) -> list[tuple[float, float]]:
    """(quality_r, filler_r) of each simulated run, weakest first (see the module docstring)."""
    steps = np.linspace(0.0, 1.0, n_runs) if n_runs > 1 else np.array([1.0])
    return [(0.25 + 1.75 * float(s), 0.5 - 0.4 * float(s)) for s in steps]


def simulated_runs(qrels: dict[str, dict[str, int]], *, n_runs: int = 8, depth: int = 100,
                   seed: int = 0) -> dict[str, dict[str, list[str]]]:
    """run name -> query id -> ranked document ids (at most ``depth``), for ``n_runs`` runs named run1 (weakest)
    to run<n_runs> (strongest), built as the module docstring says."""
    rng = np.random.default_rng(seed)
    runs: dict[str, dict[str, list[str]]] = {f"run{r + 1}": {} for r in range(n_runs)}
    for query in sorted(qrels):
        docs = sorted(qrels[query])
        grades = np.array([qrels[query][d] for d in docs], dtype=np.float64)
        fillers = [f"{query}:unjudged:{k}" for k in range(FILLERS_PER_QUERY)]
        for r, (quality, filler_share) in enumerate(run_qualities(n_runs)):
            scores = quality * grades + rng.normal(size=len(docs))
            judged = [docs[i] for i in np.argsort(-scores, kind="stable")]
            is_filler = rng.random(depth) < filler_share
            unjudged = [fillers[i] for i in rng.choice(FILLERS_PER_QUERY, int(is_filler.sum()), replace=False)]
            ranking, next_judged, next_filler = [], iter(judged), iter(unjudged)
            for filler in is_filler:
                doc = next(next_filler) if filler else next(next_judged, None)
                if doc is not None:
                    ranking.append(doc)
            runs[f"run{r + 1}"][query] = ranking
    return runs
