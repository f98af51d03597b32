"""Peer: ranx, loading the TREC files with its own readers.

Usage: python ranx_peer.py QRELS RUN  ->  JSON {trec_eval measure name: mean} on stdout.
ranx compiles with numba and caches the machine code on disk, so the first run after an install
is slow; the benchmark makes one untimed run first ("warm cache").
Definitions: ranx's map and mrr have no cutoff (as trec_eval's map and recip_rank); its ndcg uses
linear gains (as trec_eval's ndcg_cut). Ties in score may be ordered differently from trec_eval.
"""

import json
import sys

from ranx import Qrels, Run, evaluate

MEASURES = {
    "map": "map",
    "ndcg_cut.10": "ndcg@10",
    "recip_rank": "mrr",
    "P.10": "precision@10",
    "recall.100": "recall@100",
    "recall.1000": "recall@1000",
}


def main(qrels_path, run_path):
    qrels = Qrels.from_file(qrels_path, kind="trec")
    run = Run.from_file(run_path, kind="trec")
    scores = evaluate(qrels, run, list(MEASURES.values()))
    json.dump({name: float(scores[ranx_name]) for name, ranx_name in MEASURES.items()}, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
