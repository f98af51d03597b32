"""The ordering half of the fewer-judgments benchmark on a pool small enough to follow by hand. No database."""

from benchmarks.fewer_judgments_order import ordering_report
from judgments.lib.judging_order import run_tie_break

QRELS = {"q1": {"a1": 1, "a2": 2, "a3": 1, "x9": 0}}
RUNS = {"A": {"q1": ["a1", "a2", "x1", "x2"]}, "B": {"q1": ["x3", "x4", "a3", "x5"]}}


def test_relevant_documents_found_are_counted_after_each_share_of_the_pool():
    seed = next(s for s in range(100) if run_tie_break(s, "A") > run_tie_break(s, "B"))
    report = ordering_report(QRELS, RUNS, seeds=[seed], depth=4)
    # 8 pooled documents: 10% -> 1 judgment (0.8 rounded half up), 25% -> 2, 50% -> 4, 75% -> 6.
    assert (report["pooled"], report["relevant_in_pools"]) == (8, 3)
    assert report["judgments"] == {0.10: 1, 0.25: 2, 0.50: 4, 0.75: 6}
    # Pool order (best rank, then doc id): a1 x3 a2 x4 a3 x1 x2 x5.
    assert report["found"]["pool"] == {0.10: 1, 0.25: 1, 0.50: 2, 0.75: 3}
    # Move-To-Front from A: a1 a2 (relevant, stay), x1 (A -1), x3 (B -1), x2 (A, pulled longer ago, -2), x4, a3, x5.
    assert report["found"]["mtf"] == {0.10: 1, 0.25: 2, 0.50: 2, 0.75: 2}
    assert report["targets"]["state"] in ("pass", "fail")


def test_the_targets_fail_when_mm_ns_does_not_beat_pool_order_at_a_quarter_and_say_so():
    seed = next(s for s in range(100) if run_tie_break(s, "B") > run_tie_break(s, "A"))
    report = ordering_report(QRELS, RUNS, seeds=[seed], depth=4)
    # MM-NS from B: x3 (B 1/3), then A (1/2): a1, a2 relevant, x1, x2 not (A still 0.467 > 1/3), then B: x4 a3 x5.
    assert report["found"]["mmns"] == {0.10: 0, 0.25: 1, 0.50: 2, 0.75: 2}
    assert report["targets"]["state"] == "fail"
    assert report["targets"]["reasons"] == ["at 25% of the pool MM-NS found 1.0, not more than pool order's 1.0"]
