"""Property tests: every measure pytrec_eval shares with the engine, per query, on random data.

Scores are drawn as k/8 so float32 (pytrec_eval) and float64 (the engine) read the same ranking.
"""

import math

import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine import evaluate, read_qrels, read_run

SHARED = {
    "map": "AP", "map_cut_5": "AP@5", "gm_map": "GMAP", "Rprec": "Rprec", "bpref": "Bpref",
    "recip_rank": "RR", "P_5": "P@5", "P_10": "P@10", "recall_5": "R@5", "recall_10": "R@10",
    "ndcg": "nDCG", "ndcg_cut_5": "nDCG@5", "ndcg_cut_10": "nDCG@10", "success_1": "Success@1",
    "success_5": "Success@5", "set_P": "SetP", "set_recall": "SetR", "set_F": "SetF",
    "num_ret": "NumRet", "num_rel": "NumRel", "num_rel_ret": "NumRelRet", "infAP": "infAP",
    "iprec_at_recall_0.00": "IPrec@0", "iprec_at_recall_0.50": "IPrec@0.5", "iprec_at_recall_1.00": "IPrec@1",
    "set_relative_P": "SetRelP", "relative_P_5": "RelP@5", "set_map": "SetAP",
    "num_nonrel_judged_ret": "NumNonrelJudgedRet", "gm_bpref": "GMBpref", "Rprec_mult_0.20": "Rprec(mult=0.2)",
}
PYTREC_MEASURES = {"map", "map_cut.5", "gm_map", "Rprec", "bpref", "recip_rank", "P.5,10", "recall.5,10", "ndcg",
                   "ndcg_cut.5,10", "success.1,5", "set_P", "set_recall", "set_F", "num_ret", "num_rel",
                   "num_rel_ret", "infAP", "iprec_at_recall", "set_relative_P", "relative_P.5", "set_map",
                   "num_nonrel_judged_ret", "gm_bpref", "Rprec_mult.0.20"}

queries = st.sampled_from(["q1", "q2", "q3", "q10"])
docs = st.sampled_from([f"d{i}" for i in range(14)])
# pytrec_eval's bpref reads freed memory (it hangs or crashes) on a query whose judgments are all
# negative, so every drawn query has a grade >= 0; reference_outputs covers negative-only queries.
judgments = st.dictionaries(docs, st.integers(-1, 3), min_size=1, max_size=10).filter(lambda grades: max(grades.values()) >= 0)
qrels_strategy = st.dictionaries(queries, judgments, min_size=1, max_size=4)
run_strategy = st.dictionaries(queries, st.dictionaries(docs, st.integers(0, 6).map(lambda k: k / 8), max_size=12),
                               max_size=4)


@settings(max_examples=150, deadline=None)
@given(qrels=qrels_strategy, run=run_strategy, level=st.sampled_from([1, 2]))
def test_every_shared_measure_matches_pytrec_eval_per_query(qrels, run, level):
    run = {q: ranking for q, ranking in run.items() if ranking}
    if not any(q in qrels for q in run):
        return
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES, relevance_level=level)
    expected = evaluator.evaluate(run)
    ours = evaluate(read_qrels(qrels), read_run(run), list(SHARED.values()), relevance_level=level)
    per_query = ours.per_query
    assert sorted(expected) == ours.query_ids
    for trec_name, canonical in SHARED.items():
        for qid, values in expected.items():
            value = per_query[canonical][qid]
            if trec_name.startswith("gm_"):
                value = math.log(max(value, 1e-5))  # pytrec_eval reports gm_* per query as the log
            assert math.isclose(value, values[trec_name], rel_tol=1e-9, abs_tol=1e-12), (
                trec_name, qid, value, values[trec_name])


@settings(max_examples=60, deadline=None)
@given(qrels=qrels_strategy, run=run_strategy)
def test_averages_over_all_judged_queries_match_pytrec_eval_with_missing_queries_as_zero(qrels, run):
    run = {q: ranking for q, ranking in run.items() if ranking}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"map", "P.5", "ndcg_cut.10"})
    expected = evaluator.evaluate(run)
    ours = evaluate(read_qrels(qrels), read_run(run) if run else read_run([]), ["AP", "P@5", "nDCG@10"],
                    all_queries=True)
    assert ours.query_ids == sorted(qrels)
    for trec_name, canonical in (("map", "AP"), ("P_5", "P@5"), ("ndcg_cut_10", "nDCG@10")):
        total = sum(values[trec_name] for values in expected.values())
        assert math.isclose(ours.aggregate[canonical], total / len(qrels), rel_tol=1e-9, abs_tol=1e-12)
