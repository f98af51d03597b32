"""The judging orders (judgments.lib.judging_order): worked cases done by hand from the papers' definitions, and the
app's one-pair-at-a-time priorities agreeing with the whole sequence. No database."""

import random
import subprocess
import sys
from pathlib import Path

import pytest

from judgments.lib.judging_order import DISCOUNT, ORDERS, judging_sequence, priorities, random_priority, run_tie_break


def _seed_where(first: str, second: str) -> int:
    """A seed under which run `first` goes before run `second` when nothing else tells them apart."""
    return next(seed for seed in range(100) if run_tie_break(seed, first) > run_tie_break(seed, second))


def _pool(rankings) -> list:
    seen = []
    for ranking in rankings.values():
        seen += [doc for doc in ranking if doc not in seen]
    return seen


def _sequence(order, rankings, relevant, seed, pool_order=None):
    labels = {doc: doc in relevant for doc in _pool(rankings)}
    return judging_sequence(order, rankings, labels, pool_order=pool_order or _pool(rankings), seed=seed)


def test_move_to_front_stays_on_a_run_while_it_gives_relevant_documents():
    # A first (seeded tie); a1 relevant: stay on A; a2 not: A drops to -1, B (0) is now highest; b1 relevant: stay;
    # b2 not: B drops to -1 and has nothing left; A is the only run left: a3.
    rankings = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2"]}
    sequence = _sequence("mtf", rankings, {"a1", "b1", "a3"}, _seed_where("A", "B"))
    assert sequence == ["a1", "a2", "b1", "b2", "a3"]


def test_move_to_front_takes_turns_among_runs_with_the_same_priority():
    # Every first document is non-relevant: each run drops to -1 in turn, then the run pulled longest ago goes first.
    rankings = {"A": ["a1", "a2"], "B": ["b1", "b2"], "C": ["c1", "c2"]}
    seed = next(s for s in range(100) if run_tie_break(s, "A") > run_tie_break(s, "B") > run_tie_break(s, "C"))
    assert _sequence("mtf", rankings, set(), seed) == ["a1", "b1", "c1", "a2", "b2", "c2"]


def test_mm_ns_follows_the_beta_posterior_mean_and_forgets_old_successes():
    # Posterior mean (1 + rel) / (2 + judged), both counts multiplied by 0.9 at each pull of the run.
    # A first (tie at 1/2): a1 not relevant -> A = 1/3. B: b1, b2, b3 relevant -> rel = judged = 2.71 -> 0.788;
    # then not relevant: b4 -> 3.439/5.439 = 0.632, b5 -> 0.524, b6 -> 0.445, b7 -> 2.778/7.217 = 0.385,
    # b8 -> 2.600/7.695 = 0.338 (> 1/3: B again), b9 -> 2.440/8.126 = 0.300 < 1/3: A is pulled, before b10.
    # Without forgetting B would still be at 4/11 = 0.364 after b9 and get b10 too.
    assert DISCOUNT == 0.9
    rankings = {"A": ["a1", "a2"], "B": [f"b{i}" for i in range(1, 12)]}
    sequence = _sequence("mmns", rankings, {"b1", "b2", "b3", "a2"}, _seed_where("A", "B"))
    assert sequence[:11] == ["a1", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "a2"]
    assert sequence[11:] == ["b10", "b11"]


def test_a_document_retrieved_by_several_runs_counts_for_the_pulled_run_and_is_skipped_by_the_others():
    # Seeded order A, C, B. A pulled: "shared" relevant -> A = 2/3; A again: a2 not relevant -> rel 0.9, judged 1.9
    # -> 1.9/3.9 = 0.487. B and C are both still at 1/2 (B got nothing from "shared"), so the seeded order picks C;
    # had B been credited with "shared" it would be at 2/3 and go first. B then skips "shared": b2.
    rankings = {"A": ["shared", "a2"], "B": ["shared", "b2"], "C": ["c1"]}
    seed = next(s for s in range(200) if run_tie_break(s, "A") > run_tie_break(s, "C") > run_tie_break(s, "B"))
    assert _sequence("mmns", rankings, {"shared"}, seed) == ["shared", "a2", "c1", "b2"]


def test_runs_with_no_documents_are_never_pulled_and_documents_of_no_run_come_last():
    rankings = {"empty": [], "A": ["a1", "a2"]}
    pool_order = ["a1", "orphan", "a2"]
    for order in ("mtf", "mmns"):
        labels = {"a1": False, "a2": True}
        assert judging_sequence(order, rankings, labels, pool_order=pool_order, seed=1) == ["a1", "a2", "orphan"]
    assert judging_sequence("mtf", {}, {}, pool_order=[], seed=1) == []


def test_pool_order_is_the_pools_and_random_order_is_seeded():
    rankings = {"A": ["a1", "a2", "a3"], "B": ["b1", "a2"]}
    pool_order = ["a2", "a1", "b1", "a3"]
    assert _sequence("pool", rankings, set(), 0, pool_order) == pool_order
    shuffled = _sequence("random", rankings, set(), 7, pool_order)
    assert sorted(shuffled) == sorted(pool_order)
    assert shuffled == sorted(pool_order, key=lambda doc: -random_priority(7, doc))
    assert shuffled == _sequence("random", rankings, {"a1"}, 7, pool_order)  # labels change nothing
    others = {tuple(_sequence("random", rankings, set(), seed, pool_order)) for seed in range(20)}
    assert len(others) > 1


def test_the_same_seed_gives_the_same_order_and_ties_are_broken_by_it():
    rankings = {"A": ["a1", "a2"], "B": ["b1", "b2"]}
    first = {_sequence("mmns", rankings, set(), seed)[0] for seed in range(40)}
    assert first == {"a1", "b1"}  # the seed decides which run goes first
    assert _sequence("mmns", rankings, {"b1"}, 3) == _sequence("mmns", rankings, {"b1"}, 3)


def _random_case(rng: random.Random):
    docs = [f"d{i}" for i in range(rng.randint(1, 30))]
    rankings = {f"run{r}": rng.sample(docs, rng.randint(0, len(docs))) for r in range(rng.randint(1, 5))}
    pool_order = rng.sample(docs, len(docs))
    labels = {doc: rng.random() < 0.3 for doc in docs}
    return rankings, pool_order, labels


@pytest.mark.parametrize("order", ORDERS)
def test_serving_the_top_priority_and_revealing_its_label_gives_the_whole_sequence(order):
    rng = random.Random(f"consistency:{order}")
    for case in range(60):
        rankings, pool_order, labels = _random_case(rng)
        expected = judging_sequence(order, rankings, labels, pool_order=pool_order, seed=case)
        judged, served = {}, []
        while len(judged) < len(pool_order):
            scores = priorities(order, rankings, judged, pool_order=pool_order, seed=case)
            assert set(scores) == set(pool_order) - set(judged)
            top = max(scores, key=scores.get)
            assert sum(1 for value in scores.values() if value == scores[top]) == 1  # no tie at the top
            served.append(top)
            judged[top] = labels[top]
        assert served == expected


def test_a_document_judged_out_of_order_is_credited_to_a_run_that_retrieved_it():
    # Two raters at once: the second one judges a3, A's third document, while a1 is still on the first one's screen.
    # a3 was next for no run: it is credited to A (the best run retrieving it), so A's relevant a3 keeps A ahead.
    rankings = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2"]}
    seed = _seed_where("A", "B")
    scores = priorities("mmns", rankings, {"a3": True}, pool_order=["a1", "a2", "a3", "b1", "b2"], seed=seed)
    assert "a3" not in scores
    assert max(scores, key=scores.get) == "a1"
    scores = priorities("mmns", rankings, {"a3": False}, pool_order=["a1", "a2", "a3", "b1", "b2"], seed=seed)
    assert max(scores, key=scores.get) == "b1"


def test_bad_input_is_refused_with_a_message_that_names_it():
    with pytest.raises(ValueError, match="unknown judging order 'best'"):
        judging_sequence("best", {}, {}, pool_order=[], seed=0)
    with pytest.raises(ValueError, match="ranks 'x', which is not in the pool order"):
        priorities("mtf", {"A": ["x"]}, {}, pool_order=["y"], seed=0)
    with pytest.raises(ValueError, match="lists a document twice"):
        priorities("pool", {}, {}, pool_order=["y", "y"], seed=0)


def test_the_orders_are_pure_logic_importing_them_loads_no_django():
    root = Path(__file__).resolve().parents[2]
    code = ("import sys, judgments.lib.judging_order\n"
            "assert not [n for n in sys.modules if n == 'django' or n.startswith('django.')], 'django imported'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
