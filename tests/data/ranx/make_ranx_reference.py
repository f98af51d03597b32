"""Write ranx_reference.json: ranx 0.3.21's own values of f1, dcg, dcg_burges and ndcg_burges (and ir_measures
0.4.3's nDCG(dcg='exp-log2'), which it hands to ranx) on seeded random cases, for tests/engine/test_ranx_measures.py.

ranx compiles with numba, too heavy for the test environment, so its outputs are stored. Run it by hand in a venv
with `pip install ranx==0.3.21 ir-measures==0.4.3 'pandas<3'` (ir_measures' ranx provider needs pandas 2):

    python tests/data/ranx/make_ranx_reference.py > tests/data/ranx/ranx_reference.json

Each case holds the qrels and the run exactly as the engine reads them, the engine options (relevance level,
-J, -M, -c), and ranx's per-query values under the engine's names (the level is ranx's rel_lvl, "f1@5-l2"). The options are applied to what ranx gets, the way trec_eval applies
them: -M keeps each ranking's top M, then -J drops documents without a judgment (missing from the qrels or graded below
0), -c scores every qrels query (ranx's make_comparable: missing ones get an empty ranking); without -c both sides
see only the queries the run has. Scores are distinct, so no tie order can differ.
"""

import json
import random
import sys

import ir_measures
from ranx import Qrels, Run, evaluate

CUTOFFS = (1, 3, 5, 10, 0)  # 0: ranx's "whole ranking", the engine's measure without a cutoff
RANX = {"f1": "F1", "dcg": "DCG", "dcg_burges": "DCG_burges", "ndcg_burges": "nDCG_burges"}


def engine_name(ranx_name: str, k: int) -> str:
    return RANX[ranx_name] + (f"@{k}" if k else "")


def random_case(rng: random.Random) -> dict:
    n_queries = rng.randint(1, 6)
    qrels, run = {}, {}
    for q in range(n_queries):
        docs = [f"d{i}" for i in range(rng.randint(3, 25))]
        judged = rng.sample(docs, rng.randint(1, len(docs)))
        qrels[f"q{q}"] = {doc: rng.choice([-1, 0, 0, 0, 1, 1, 2, 3, 4]) for doc in judged}
        if rng.random() < 0.85:
            ranked = rng.sample(docs + [f"x{i}" for i in range(5)], rng.randint(1, len(docs)))
            scores = rng.sample(range(1, 1000), len(ranked))
            run[f"q{q}"] = {doc: score / 10 for doc, score in zip(ranked, scores)}
    if not run:
        run["q0"] = {"d0": 1.0}
    return {"qrels": qrels, "run": run, "level": rng.choice([1, 1, 2, 3]), "judged_only": rng.random() < 0.3,
            "max_docs": rng.choice([None, None, 4, 8]), "all_queries": rng.random() < 0.4}


def as_ranx_sees_it(case: dict) -> tuple[dict, dict]:
    """The qrels and run after the engine's options, as ranx needs them (the same queries on both sides)."""
    qrels = case["qrels"]
    run = {}
    for qid, scores in case["run"].items():
        ranked = sorted(scores, key=scores.get, reverse=True)
        if case["max_docs"] is not None:
            ranked = ranked[:case["max_docs"]]
        if case["judged_only"]:
            ranked = [doc for doc in ranked if qrels.get(qid, {}).get(doc, -1) >= 0]
        if qid in qrels and ranked:
            run[qid] = {doc: scores[doc] for doc in ranked}
    queries = qrels if case["all_queries"] else {qid for qid in case["run"] if qid in qrels}
    return {qid: qrels[qid] for qid in queries}, {qid: run[qid] for qid in queries if qid in run}


def ranx_values(case: dict) -> dict:
    qrels, run = as_ranx_sees_it(case)
    level = case["level"]
    wanted = [f"{name}@{k}-l{level}" if k else f"{name}-l{level}" for name in RANX for k in CUTOFFS]
    scores = evaluate(Qrels(qrels), Run(run), wanted, return_mean=False, make_comparable=True)
    queries = sorted(qrels)  # ranx orders queries by id
    out = {}
    for name in RANX:
        for k in CUTOFFS:
            values = scores[f"{name}@{k}-l{level}" if k else f"{name}-l{level}"]
            out[engine_name(name, k)] = dict(zip(queries, map(float, values)))
    return out


def ir_measures_values(case: dict) -> dict:
    """ir_measures' nDCG(dcg='exp-log2') (its ranx provider; ir_measures has no rel level, so level 1 only) on the
    queries with a ranking: the provider refuses a run that lacks a qrels query."""
    qrels, run = as_ranx_sees_it(case)
    qrels = {qid: qrels[qid] for qid in run}
    measures = [ir_measures.nDCG(dcg="exp-log2") @ k if k else ir_measures.nDCG(dcg="exp-log2") for k in CUTOFFS]
    out = {}
    for metric in ir_measures.ranx.iter_calc(measures, qrels, run):
        out.setdefault(str(metric.measure), {})[metric.query_id] = float(metric.value)
    return out


def main() -> None:
    rng = random.Random(20261129)
    cases = []
    for _ in range(120):
        case = random_case(rng)
        while not as_ranx_sees_it(case)[1]:  # ranx cannot build a Run with no ranking at all
            case = random_case(rng)
        case["ranx"] = ranx_values(case)
        if case["level"] == 1:
            case["ir_measures"] = ir_measures_values(case)
        cases.append(case)
    json.dump({"made_by": "tests/data/ranx/make_ranx_reference.py with ranx 0.3.21 and ir_measures 0.4.3",
               "cases": cases}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
