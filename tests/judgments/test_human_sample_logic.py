"""A round's sample for raters, drawn without a database: allocation worked by hand, seeds, and the sample's
inclusion probabilities checked against n / N over many seeds."""

from collections import Counter

import pytest

from judgments.lib.sampling import _allocate, draw_human_sample

IDS = [f"q{i:02d}" for i in range(20)]


def test_a_plain_sample_has_n_distinct_queries_of_the_set_sorted():
    draw = draw_human_sample(IDS, 7, seed=3)
    assert len(draw.query_ids) == 7 == len(set(draw.query_ids))
    assert set(draw.query_ids) <= set(IDS)
    assert draw.query_ids == sorted(draw.query_ids)
    assert draw.allocation == {"": 7} and draw.tier_shares == {}


def test_the_same_seed_gives_the_same_sample_whatever_the_order_of_the_ids():
    assert draw_human_sample(IDS, 5, seed=11).query_ids == draw_human_sample(list(reversed(IDS)), 5, seed=11).query_ids
    assert draw_human_sample(IDS, 5, seed=11).query_ids != draw_human_sample(IDS, 5, seed=12).query_ids


def test_every_query_is_drawn_with_probability_n_over_the_set_size():
    hits = Counter(q for seed in range(4000) for q in draw_human_sample(IDS, 5, seed=seed).query_ids)
    # 4000 draws of 5 of 20: each query expects 1000 hits, sd sqrt(4000 * 0.25 * 0.75) = 27.4; 5 sd either side.
    assert all(abs(hits[q] - 1000) < 137 for q in IDS)


def test_allocation_is_proportional_with_largest_remainders():
    # n = 10 over 12 / 5 / 3 of 20: exact quotas 6, 2.5, 1.5; floors 6, 2, 1 leave one; remainders tie at 0.5,
    # and the tie goes to the larger tier (torso).
    assert _allocate(10, {"head": 12, "torso": 5, "tail": 3}) == {"head": 6, "torso": 3, "tail": 1}
    # n = 7 over 10 / 6 / 4: quotas 3.5, 2.1, 1.4; floors 3, 2, 1 leave one, to head (0.5 is the largest remainder).
    assert _allocate(7, {"head": 10, "torso": 6, "tail": 4}) == {"head": 4, "torso": 2, "tail": 1}


def test_every_non_empty_tier_gets_one_query_when_n_allows():
    # n = 3 over 18 / 1 / 1: quotas 2.7, 0.15, 0.15 give 3, 0, 0; the two small tiers each take one from head.
    assert _allocate(3, {"head": 18, "tail": 1, "torso": 1}) == {"head": 1, "tail": 1, "torso": 1}
    # n = 2 over three tiers cannot give each one: plain largest remainders (2.7 -> 2 of 2 for head).
    assert _allocate(2, {"head": 18, "tail": 1, "torso": 1}) == {"head": 2, "tail": 0, "torso": 0}


def test_a_tiered_sample_draws_its_allocation_within_each_tier_and_keeps_the_shares():
    tiers = {q: "head" if i < 12 else "torso" if i < 17 else "tail" for i, q in enumerate(IDS)}
    draw = draw_human_sample(IDS, 10, seed=5, tiers=tiers)
    assert draw.allocation == {"head": 6, "torso": 3, "tail": 1}
    assert Counter(tiers[q] for q in draw.query_ids) == Counter(draw.allocation)
    assert draw.tier_shares == {"head": 0.6, "torso": 0.25, "tail": 0.15}


def test_a_query_without_a_tier_is_in_the_blank_tier():
    draw = draw_human_sample(IDS, 4, seed=1, tiers={q: "head" for q in IDS[:10]})
    assert draw.tier_shares == {"head": 0.5, "": 0.5}
    assert draw.allocation == {"head": 2, "": 2}


def test_adding_a_tier_leaves_the_other_tiers_draws_alone():
    head = {q: "head" for q in IDS[:10]}
    first = draw_human_sample(IDS[:10], 4, seed=9, tiers=head)
    second = draw_human_sample(IDS, 8, seed=9, tiers={**head, **{q: "tail" for q in IDS[10:]}})
    assert first.query_ids == [q for q in second.query_ids if q in head]


@pytest.mark.parametrize("n", [0, 21])
def test_a_size_outside_the_set_is_refused_with_the_sizes(n):
    with pytest.raises(ValueError, match=f"between 1 and the set's 20 queries; it is {n}"):
        draw_human_sample(IDS, n, seed=1)


def test_repeated_ids_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        draw_human_sample(["a", "a", "b"], 1, seed=1)
