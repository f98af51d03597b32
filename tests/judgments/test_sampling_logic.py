"""Query sampling without a database: tiers worked out by hand, windows, reproducibility, and the weights'
unbiasedness checked against the known answer of a synthetic log over thousands of seeds."""

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from judgments.lib.sampling import (
    DEFAULT_QUOTAS,
    TIERS,
    Boundaries,
    Quota,
    assign_tiers,
    draw_sample,
    query_traffic,
    shortfalls,
    traffic_curve,
    traffic_window,
)

END = date(2026, 10, 31)


def daily(rows: list[tuple], segments: tuple[str, ...] = ()) -> pa.Table:
    """A daily table from (query, *segment values, day, count) tuples."""
    columns = list(zip(*rows)) if rows else [[] for _ in range(3 + len(segments))]
    return pa.table({
        "query": pa.array(columns[0], pa.string()),
        **{name: pa.array(columns[1 + i], pa.string()) for i, name in enumerate(segments)},
        "day": pa.array(columns[-2], pa.date32()),
        "count": pa.array(columns[-1], pa.int64()),
    })


def traffic_frame(counts: dict[str, int]) -> pd.DataFrame:
    return query_traffic(daily([(query, END, count) for query, count in counts.items()]))


# T = 100: a 50, b 20, c 10, d 8, e 5, f 3, g 2, h 1, i 1 (h before i: equal traffic goes by query text).
KNOWN = {"i": 1, "a": 50, "c": 10, "b": 20, "e": 5, "d": 8, "g": 2, "f": 3, "h": 1}


def tiers_of(tiered: pd.DataFrame) -> dict[str, list[str]]:
    return {tier: tiered.loc[tiered["tier"] == tier, "query"].tolist() for tier in TIERS}


# ---------------------------------------------------------------------------------------------- tiers


def test_tiers_by_rank_cut_at_the_given_ranks():
    tiered = assign_tiers(traffic_frame(KNOWN), Boundaries.parse("rank:2,5"))

    assert tiers_of(tiered) == {"head": ["a", "b"], "torso": ["c", "d", "e"], "tail": ["f", "g", "h", "i"]}
    assert tiered["rank"].tolist() == list(range(1, 10))
    assert tiered["share"].tolist() == [0.5, 0.2, 0.1, 0.08, 0.05, 0.03, 0.02, 0.01, 0.01]
    assert tiered["cumulative_share"].tolist() == pytest.approx([0.5, 0.7, 0.8, 0.88, 0.93, 0.96, 0.98, 0.99, 1.0])


def test_quotas_that_cannot_be_filled_are_named_with_the_reason():
    tiered = assign_tiers(traffic_frame(KNOWN), Boundaries.parse("rank:2,500"))
    quotas = {"head": Quota(2, "traffic"), "torso": Quota(10, "uniform"), "tail": Quota(3, "uniform")}
    sample = draw_sample(tiered, quotas, seed=1, exclude={"c"})

    assert shortfalls(sample.summary) == [
        "The torso quota asks for 10 queries but 6 were drawn: the torso holds only 7 queries, "
        "1 of them already in the project's query sets.",
        "The tail quota asks for 3 queries but 0 were drawn: no query falls in the tail with these tier boundaries. "
        "Move the boundaries (or set them by share of impressions) to give it queries.",
    ]
    assert shortfalls(draw_sample(assign_tiers(traffic_frame(KNOWN), Boundaries.parse("rank:2,5")), quotas, seed=1).summary) == [
        "The torso quota asks for 10 queries but 3 were drawn: the torso holds only 3 queries."]


def test_tiers_by_share_include_the_query_that_crosses_each_boundary():
    # c brings the head to exactly 80%: head. f crosses 95% (93% -> 96%): torso. g starts past 95%: tail.
    tiered = assign_tiers(traffic_frame(KNOWN), Boundaries.parse("share:0.8,0.95"))

    assert tiers_of(tiered) == {"head": ["a", "b", "c"], "torso": ["d", "e", "f"], "tail": ["g", "h", "i"]}


def test_share_boundaries_are_exact_fractions_not_floats():
    # 0.7 * 10 is 7.000000000000001 in floating point; the head must still stop at exactly 70%.
    tiered = assign_tiers(traffic_frame({"w": 4, "x": 3, "y": 2, "z": 1}), Boundaries.parse("share:0.7,0.9"))

    assert tiers_of(tiered) == {"head": ["w", "x"], "torso": ["y"], "tail": ["z"]}


def test_a_giant_query_can_leave_the_torso_empty():
    tiered = assign_tiers(traffic_frame({"giant": 96, "a": 2, "b": 1, "c": 1}), Boundaries.parse("share:0.8,0.95"))

    assert tiers_of(tiered) == {"head": ["giant"], "torso": [], "tail": ["a", "b", "c"]}


# --------------------------------------------------------------------------------------------- traffic


def test_the_window_counts_its_first_day_and_not_the_day_before():
    table = daily([("end", END, 1), ("first day", END - timedelta(days=89), 1),
                   ("day before", END - timedelta(days=90), 1), ("after", END + timedelta(days=1), 1)])

    chosen = query_traffic(table, end=END)
    newest = query_traffic(table)

    assert sorted(chosen["query"]) == ["end", "first day"]
    assert chosen.attrs["window"] == (END - timedelta(days=89), END)
    assert sorted(newest["query"]) == ["after", "end"]
    assert traffic_window(table) == (END - timedelta(days=88), END + timedelta(days=1))
    assert sorted(query_traffic(table, window_days=None)["query"]) == ["after", "day before", "end", "first day"]
    assert sorted(query_traffic(table, window_days=1, end=END)["query"]) == ["end"]


def test_a_window_longer_than_the_calendar_counts_every_day():
    table = daily([("old", date(1, 1, 2), 1), ("new", END, 1)])

    assert traffic_window(table, window_days=10**12) == (date.min, END)
    assert sorted(query_traffic(table, window_days=10**12)["query"]) == ["new", "old"]


def test_a_log_without_times_is_counted_whole_and_has_no_window():
    table = daily([("a", None, 3), ("b", None, 1), ("a", None, 2)])

    traffic = query_traffic(table, window_days=90, end=END)

    assert traffic[["query", "traffic"]].values.tolist() == [["a", 5], ["b", 1]]
    assert traffic.attrs["window"] is None
    assert traffic["first_seen"].tolist() == [None, None] and traffic["last_seen"].tolist() == [None, None]


def test_traffic_is_summed_per_query_with_first_and_last_day_and_main_segment_values():
    table = daily([
        ("x", "en", "mobile", END - timedelta(days=3), 2),
        ("x", "de", "desktop", END - timedelta(days=1), 2),
        ("x", "de", "mobile", END, 1),
        ("y", "fr", "mobile", END - timedelta(days=2), 5),
        ("z", "en", "mobile", END, 5),
    ], segments=("lang", "device"))

    traffic = query_traffic(table, ("lang", "device"))

    assert traffic.columns.tolist() == ["query", "stratum", "traffic", "first_seen", "last_seen", "lang", "device"]
    assert traffic.to_dict("records") == [
        {"query": "x", "stratum": "", "traffic": 5, "first_seen": END - timedelta(days=3), "last_seen": END,
         "lang": "de", "device": "mobile"},
        {"query": "y", "stratum": "", "traffic": 5, "first_seen": END - timedelta(days=2),
         "last_seen": END - timedelta(days=2), "lang": "fr", "device": "mobile"},
        {"query": "z", "stratum": "", "traffic": 5, "first_seen": END, "last_seen": END, "lang": "en", "device": "mobile"},
    ]


def test_stratifying_makes_one_unit_per_query_and_stratum_value():
    table = daily([("x", "en", END, 4), ("x", "de", END, 1), ("y", "de", END, 2)], segments=("lang",))

    traffic = query_traffic(table, ("lang",), stratify_by="lang")

    assert traffic[["query", "stratum", "traffic", "lang"]].values.tolist() == [
        ["x", "en", 4, "en"], ["y", "de", 2, "de"], ["x", "de", 1, "de"]]
    with pytest.raises(ValueError, match="'market' is not a segment column"):
        query_traffic(table, stratify_by="market")


# -------------------------------------------------------------------------------------------- sampling


def zipf_log(n: int = 5000, seed: int = 3) -> tuple[pd.DataFrame, np.ndarray]:
    """`n` queries with Zipf traffic (s = 1.05) named in rank order, and a per-query value y that rises with
    traffic (popular queries do better), with noise."""
    traffic = np.maximum(1, np.rint(200_000 / np.arange(1, n + 1) ** 1.05)).astype(np.int64)
    rng = np.random.default_rng(seed)
    y = np.clip(0.2 + 0.08 * np.log(traffic) + rng.normal(0, 0.15, n), 0, 1)
    frame = pd.DataFrame({"query": [f"q{i:05d}" for i in range(n)], "stratum": "", "traffic": traffic,
                          "first_seen": None, "last_seen": None})
    return frame, y


@pytest.mark.parametrize("method", ["uniform", "traffic"])
def test_weighted_estimates_are_unbiased_over_many_seeds(method):
    frame, y = zipf_log()
    tiered = assign_tiers(frame, Boundaries.parse("rank:40,1000"))
    quotas = {"head": Quota(20, method), "torso": Quota(30, method), "tail": Quota(20, method)}
    traffic = frame["traffic"].to_numpy()
    truth = (traffic * y).sum() / traffic.sum()
    tier_truth = tiered.groupby("tier")["traffic"].sum()

    estimates, tier_sums = [], []
    for seed in range(2000):
        sample = draw_sample(tiered, quotas, seed)
        chosen = sample.queries
        estimates.append((chosen["weight"] * y[chosen["rank"] - 1]).sum() / traffic.sum())
        tier_sums.append(sample.summary.set_index("tier")["weight_sum"])

    estimates = np.array(estimates)
    error = estimates.std(ddof=1) / np.sqrt(len(estimates))
    assert error < 0.005 * truth  # precise enough for the check below to mean something
    assert abs(estimates.mean() - truth) < 4 * error
    sums = pd.DataFrame(tier_sums)
    for tier in TIERS:
        spread = sums[tier].std(ddof=1) / np.sqrt(len(sums))
        assert abs(sums[tier].mean() - tier_truth[tier]) <= 4 * spread + 1e-6 * tier_truth[tier]


def test_traffic_sampling_includes_each_query_with_its_probability():
    # n = 4 over T = 120: 60 is certain (4 * 60 / 120 = 2), then 25 (3 * 25 / 60 = 1.25); the last two draws
    # go in proportion to traffic over the remaining 35: pi = 2 t / 35.
    counts = {"a": 60, "b": 25, "c": 10, "d": 8, "e": 5, "f": 4, "g": 3, "h": 2, "i": 2, "j": 1}
    tiered = assign_tiers(traffic_frame(counts), Boundaries.parse("rank:10,20"))
    expected = {query: 1.0 if query in "ab" else 2 * count / 35 for query, count in counts.items()}
    draws = 2000

    seen = dict.fromkeys(counts, 0)
    for seed in range(draws):
        sample = draw_sample(tiered, {"head": Quota(4, "traffic")}, seed)
        assert len(sample.queries) == 4
        for row in sample.queries.itertuples():
            seen[row.query] += 1
            assert row.inclusion_probability == pytest.approx(expected[row.query])
            assert row.weight == pytest.approx(row.traffic / expected[row.query])

    assert sum(expected.values()) == pytest.approx(4)
    assert seen["a"] == seen["b"] == draws
    for query, probability in expected.items():
        spread = np.sqrt(probability * (1 - probability) / draws)
        assert abs(seen[query] / draws - probability) <= 4.5 * spread


def test_certainty_units_weigh_their_own_traffic_and_the_rest_share_theirs():
    sample = draw_sample(assign_tiers(traffic_frame({"a": 60, "b": 25, "c": 10, "d": 8, "e": 5, "f": 4, "g": 3,
                                                     "h": 2, "i": 2, "j": 1}), Boundaries.parse("rank:10,20")),
                         {"head": Quota(4, "traffic")}, seed=5)

    weights = dict(zip(sample.queries["query"], sample.queries["weight"]))
    assert weights.pop("a") == 60 and weights.pop("b") == 25
    assert list(weights.values()) == [35 / 2, 35 / 2]
    head = sample.summary.set_index("tier").loc["head"]
    assert (head["sampled"], head["certainty"], head["weight_sum"]) == (4, 2, 120)


def test_uniform_sampling_gives_every_query_the_same_chance():
    frame, _ = zipf_log(50)
    tiered = assign_tiers(frame, Boundaries.parse("rank:10,20"))

    sample = draw_sample(tiered, {"head": Quota(4), "torso": Quota(5), "tail": Quota(6)}, seed=11)

    by_tier = sample.queries.groupby("tier")
    assert by_tier["inclusion_probability"].unique().to_dict() == {"head": [0.4], "tail": [0.2], "torso": [0.5]}
    assert (sample.queries["weight"] == sample.queries["traffic"] / sample.queries["inclusion_probability"]).all()


def test_the_same_seed_draws_the_same_sample_and_another_seed_another():
    frame, _ = zipf_log(2000)
    tiered = assign_tiers(frame, Boundaries.parse("share:0.8,0.95"))

    first = draw_sample(tiered, DEFAULT_QUOTAS, seed=42)
    again = draw_sample(tiered.sample(frac=1, random_state=1), DEFAULT_QUOTAS, seed=42)
    other = draw_sample(tiered, DEFAULT_QUOTAS, seed=43)
    fresh = draw_sample(tiered, DEFAULT_QUOTAS, seed=None)

    pd.testing.assert_frame_equal(first.queries, again.queries)
    pd.testing.assert_frame_equal(first.summary, again.summary)
    assert set(first.queries["query"]) != set(other.queries["query"])
    assert 0 <= fresh.seed < 2**63
    pd.testing.assert_frame_equal(draw_sample(tiered, DEFAULT_QUOTAS, seed=fresh.seed).queries, fresh.queries)


def test_excluded_queries_are_never_drawn_and_are_counted():
    frame, _ = zipf_log(60)
    tiered = assign_tiers(frame, Boundaries.parse("rank:10,30"))
    excluded = {"q00000", "q00001", "q00002", "q00015", "no such query"}

    sample = draw_sample(tiered, {"head": Quota(7), "torso": Quota(20), "tail": Quota(5)}, seed=1, exclude=excluded)

    assert not excluded & set(sample.queries["query"])
    summary = sample.summary.set_index("tier")
    assert summary["excluded"].to_dict() == {"head": 3, "torso": 1, "tail": 0}
    assert summary["sampled"].to_dict() == {"head": 7, "torso": 19, "tail": 5}
    assert summary.loc["head", "excluded_impressions"] == frame["traffic"][:3].sum()
    assert summary.loc["torso", "weight_sum"] == tiered.loc[tiered["tier"] == "torso", "traffic"].sum() - frame["traffic"][15]


def test_a_stratum_smaller_than_its_quota_is_taken_whole():
    tiered = assign_tiers(traffic_frame({"a": 5, "b": 3, "c": 1}), Boundaries.parse("rank:1,2"))

    sample = draw_sample(tiered, {"head": Quota(10), "torso": Quota(10, "traffic"), "tail": Quota(10)}, seed=3)

    assert sample.queries[["query", "tier", "inclusion_probability", "weight"]].values.tolist() == [
        ["a", "head", 1.0, 5.0], ["b", "torso", 1.0, 3.0], ["c", "tail", 1.0, 1.0]]
    assert sample.summary["sampled"].tolist() == [1, 1, 1]


@pytest.mark.parametrize("method", ["uniform", "traffic"])
def test_a_quota_of_zero_draws_nothing_from_its_tier(method):
    tiered = assign_tiers(traffic_frame(KNOWN), Boundaries.parse("rank:2,5"))

    sample = draw_sample(tiered, {"head": Quota(1), "torso": Quota(0, method), "tail": Quota(1)}, seed=3)

    assert sorted(sample.queries["tier"]) == ["head", "tail"]
    assert sample.summary["sampled"].tolist() == [1, 0, 1]


def test_a_new_language_is_its_own_stratum_with_its_own_tiers_and_quotas():
    english = [(f"en{i:03d}", "en", END, 1000 // (i + 1)) for i in range(200)]
    japanese = [("ramen", "ja", END, 3), ("sushi", "ja", END, 2), ("tempura", "ja", END, 1)]
    boundaries = Boundaries.parse("rank:2,20")
    quotas = {"head": Quota(1), "torso": Quota(5), "tail": Quota(5)}

    without = draw_sample(assign_tiers(query_traffic(daily(english, ("lang",)), ("lang",), stratify_by="lang"),
                                       boundaries), quotas, seed=9)
    tiered = assign_tiers(query_traffic(daily(english + japanese, ("lang",)), ("lang",), stratify_by="lang"), boundaries)
    sample = draw_sample(tiered, quotas, seed=9)

    japan = tiered[tiered["stratum"] == "ja"]
    assert japan[["query", "rank", "tier"]].values.tolist() == [["ramen", 1, "head"], ["sushi", 2, "head"],
                                                               ["tempura", 3, "torso"]]
    assert sample.summary[["tier", "stratum", "queries_in_log", "sampled"]].values.tolist() == [
        ["head", "en", 2, 1], ["torso", "en", 18, 5], ["tail", "en", 180, 5],
        ["head", "ja", 2, 1], ["torso", "ja", 1, 1], ["tail", "ja", 0, 0]]
    assert sample.boundaries_rank == {"en": (2, 20), "ja": (2, 3)}
    pd.testing.assert_frame_equal(sample.queries[sample.queries["stratum"] == "en"].reset_index(drop=True),
                                  without.queries)


def test_the_sample_lists_what_the_form_and_the_chart_need():
    frame, _ = zipf_log(500)
    sample = draw_sample(assign_tiers(frame, Boundaries.parse("share:0.8,0.95")), DEFAULT_QUOTAS, seed=1)

    assert sample.queries.columns.tolist() == ["query", "stratum", "tier", "traffic", "share", "rank", "weight",
                                               "inclusion_probability", "first_seen", "last_seen"]
    assert sample.summary.columns.tolist() == ["tier", "stratum", "queries_in_log", "impressions", "impressions_share",
                                               "excluded", "excluded_impressions", "quota", "sampled", "certainty",
                                               "method", "weight_min", "weight_max", "weight_sum"]
    assert sample.summary["impressions"].sum() == frame["traffic"].sum()
    assert sample.summary["impressions_share"].sum() == pytest.approx(1)
    assert sample.queries["tier"].tolist() == sorted(sample.queries["tier"], key=TIERS.index)


def test_the_traffic_curve_is_thinned_to_log_spaced_ranks():
    frame, _ = zipf_log(5000)

    curve = traffic_curve(assign_tiers(frame, Boundaries.parse("rank:100,1000")), max_points=50)

    ranks = [rank for rank, _ in curve]
    assert ranks[0] == 1 and ranks[-1] == 5000 and len(ranks) <= 50
    assert ranks == sorted(set(ranks))
    assert all(traffic == frame["traffic"][rank - 1] for rank, traffic in curve)
    assert traffic_curve(frame.iloc[:0]) == []


# ------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize("text", ["rank:500,5000", "share:0.8,0.95", "rank:1,2", "share:0.5,0.99"])
def test_boundaries_read_back_what_they_write(text):
    assert str(Boundaries.parse(text)) == text
    assert Boundaries.parse(f"  {text.upper().replace(',', ' , ')} ") == Boundaries.parse(text)


@pytest.mark.parametrize(("text", "message"), [
    ("", "look like 'rank:500,5000'"),
    ("500,5000", "look like 'rank:500,5000'"),
    ("percent:1,2", "look like 'rank:500,5000'"),
    ("rank:500", "give two boundaries"),
    ("rank:1,2,3", "give two boundaries"),
    ("rank:5000,500", "must increase"),
    ("rank:500,500", "must increase"),
    ("rank:0,10", "whole numbers >= 1"),
    ("rank:1.5,10", "two whole numbers separated by a comma"),
    ("share:0.95,0.8", "must increase"),
    ("share:0.8,1", "between 0 and 1"),
    ("share:0,0.5", "between 0 and 1"),
    ("share:80%,95%", "numbers between 0 and 1 separated by a comma"),
])
def test_bad_boundaries_are_refused_with_a_clear_message(text, message):
    with pytest.raises(ValueError, match=message):
        Boundaries.parse(text)


def test_quotas_are_checked():
    with pytest.raises(ValueError, match="whole number >= 0"):
        Quota(-1)
    with pytest.raises(ValueError, match="one of uniform, traffic"):
        Quota(5, "random")
    with pytest.raises(ValueError, match="not body"):
        draw_sample(assign_tiers(traffic_frame({"a": 1}), Boundaries.parse("rank:1,2")), {"body": Quota(1)}, seed=1)
    assert 50 <= DEFAULT_QUOTAS["head"].n <= 100 and 100 <= DEFAULT_QUOTAS["torso"].n <= 200
    assert 50 <= DEFAULT_QUOTAS["tail"].n <= 100
