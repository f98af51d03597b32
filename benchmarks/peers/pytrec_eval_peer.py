"""Peer: pytrec_eval, used the usual way (parse the TREC files into dicts, then evaluate).

Usage: python pytrec_eval_peer.py QRELS RUN  ->  JSON {measure: mean over queries} on stdout.
"""

import json
import sys

import pytrec_eval

MEASURES = {"map", "ndcg_cut.10", "recip_rank", "P.10", "recall.100", "recall.1000"}


def read_qrels(path):
    qrels = {}
    with open(path) as f:
        for line in f:
            qid, _, docid, rel = line.split()
            qrels.setdefault(qid, {})[docid] = int(rel)
    return qrels


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            qid, _, docid, _, score, _ = line.split()
            run.setdefault(qid, {})[docid] = float(score)
    return run


def main(qrels_path, run_path):
    evaluator = pytrec_eval.RelevanceEvaluator(read_qrels(qrels_path), MEASURES)
    per_query = evaluator.evaluate(read_run(run_path))
    names = {m.replace(".", "_"): m for m in MEASURES}
    means = {
        names[key]: sum(scores[key] for scores in per_query.values()) / len(per_query)
        for key in names
    }
    json.dump(means, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
