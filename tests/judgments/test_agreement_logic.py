"""Agreement statistics without a database, checked against independent oracles.

Oracles: scikit-learn's ``cohen_kappa_score``, the ``krippendorff`` package, statsmodels' ``fleiss_kappa``,
and published worked examples: Krippendorff (2011) "Computing Krippendorff's Alpha-Reliability" (4 coders,
12 units), the Fleiss (1971) example as worked on Wikipedia's "Fleiss' kappa" page (10 subjects, 14 raters),
Gwet's *Handbook of Inter-Rater Reliability* (4th ed., 2014) data sets with the values Gwet's irrCAC package
gives for them, and Gwet's (2008) closed form for two raters and two categories.
"""

import subprocess
import sys
import warnings
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from judgments.lib.agreement import (
    CONSENSUS_COLUMNS,
    DISAGREEMENT_COLUMNS,
    DRIFT_COLUMNS,
    GROUP_COLUMNS,
    NO_ITEMS,
    ONE_LABEL,
    RATER_COLUMNS,
    UNEQUAL_RATERS,
    Statistic,
    UndefinedStatistic,
    band,
    bootstrap_ci,
    bootstrap_values,
    cohen_kappa,
    confusion,
    consensus,
    disagreements,
    drift,
    fleiss_kappa,
    fleiss_kappa_table,
    gwet_ac1,
    krippendorff_alpha,
    mean_pairwise_kappa,
    pairwise,
    per_grade_agreement,
    per_item_group_alpha,
    percent_agreement,
    prepare,
    rater_vs_consensus,
    summary,
)

ROOT = Path(__file__).resolve().parents[2]
GRADED = (0, 1, 2, 3)
BINARY = (0, 1)


@contextmanager
def quiet():
    """sklearn and krippendorff warn when they divide 0 by 0; that NaN is what the tests compare."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def long(matrix, raters=None) -> pd.DataFrame:
    """Judgments from reliability data: one row per rater, one column per item, None for no grade."""
    raters = raters or [f"r{index}" for index in range(len(matrix))]
    rows = [(item, rater, grade) for rater, grades in zip(raters, matrix)
            for item, grade in enumerate(grades) if grade is not None and not np.isnan(grade)]
    return pd.DataFrame(rows, columns=["item", "rater", "grade"]).astype({"grade": int})


def two_raters(a, b) -> pd.DataFrame:
    return long([list(a), list(b)], raters=["ann", "bob"])


def from_table(table) -> pd.DataFrame:
    """Judgments from an (items x labels) table of counts, one anonymous rater per grade."""
    rows = [(item, f"{item}-{k}-{copy}", label) for item, counts in enumerate(table)
            for label, (k, count) in enumerate(enumerate(counts)) for copy in range(count)]
    return pd.DataFrame(rows, columns=["item", "rater", "grade"])


def to_reliability_data(frame: pd.DataFrame) -> np.ndarray:
    return frame.pivot(index="rater", columns="item", values="grade").to_numpy(dtype=float)


def noisy_raters(n_items: int, n_raters: int, labels, seed: int, noise: float = 0.3) -> pd.DataFrame:
    """Every rater grades every item: the item's true grade, or with probability `noise` a random one."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(labels, size=n_items)
    matrix = [np.where(rng.random(n_items) < noise, rng.choice(labels, size=n_items), truth)
              for _ in range(n_raters)]
    return long([m.tolist() for m in matrix])


# Krippendorff (2011), p. 3 ("C. Nominal data, any number of observers, missing data"): 4 observers, 12 units.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
# Gwet (2014), Handbook, 4th ed., p. 120 (irrCAC's cac.raw4raters): the same 12 units; unit 12 differs.
GWET_4_RATERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, None],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, 3],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
# Gwet (2014), after p. 125 (irrCAC's cac.raw5obser): 5 observers, 15 units, 0-3 scale, missing grades.
GWET_5_OBSERVERS = [
    [1, 1, 2, None, 0, 0, 1, 1, 2, 2, None, 0, 1, 3, 1],
    [1, 1, 3, 0, 0, 0, 0, None, 2, 1, 1, 0, 2, 3, 1],
    [2, 0, 3, 0, 0, 0, 2, 2, 2, 1, 0, 0, 2, 2, 1],
    [None, 1, 3, None, None, None, None, 0, None, 1, 0, 0, 2, 2, None],
    [2, None, None, 0, 0, 0, 1, None, 2, None, None, None, None, 3, 1],
]
# Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
FLEISS_WIKIPEDIA = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]


# --------------------------------------------------------------------------------------------- Cohen's kappa


def test_cohen_kappa_equals_sklearn_unweighted_linear_and_quadratic_on_random_data():
    rng = np.random.default_rng(7)
    compared = 0
    for case in range(300):
        scale = [(0, 1), (0, 1, 2), (0, 1, 2, 3), (1, 2, 3, 4, 5), (0, 1, 3)][case % 5]
        used = rng.choice(scale, size=rng.integers(1, len(scale) + 1), replace=False)  # some labels never occur
        n = int(rng.integers(1, 40))
        a = rng.choice(used, size=n)
        b = np.where(rng.random(n) < 0.6, a, rng.choice(used, size=n))
        for weights in (None, "linear", "quadratic"):
            with quiet():
                expected = cohen_kappa_score(a, b, labels=list(scale), weights=weights)
            ours = cohen_kappa(a, b, scale, weights)
            if np.isnan(expected):
                assert ours is None
            else:
                assert ours == pytest.approx(expected, abs=1e-12)
                compared += 1
    assert compared > 600


def test_kappa_runs_over_the_full_scale_even_when_only_some_grades_occur():
    a = [0, 1, 1, 0, 1, 0, 0, 1]
    b = [0, 1, 0, 0, 1, 1, 0, 1]

    full = cohen_kappa(a, b, GRADED, "quadratic")

    assert full == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic"))
    assert cohen_kappa(a, b, GRADED) == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3]))
    assert confusion(a, b, GRADED).shape == (4, 4)


def test_kappa_is_none_when_both_raters_always_give_the_same_single_label():
    assert cohen_kappa([2, 2, 2], [2, 2, 2], GRADED) is None
    assert cohen_kappa([2, 2, 2], [2, 2, 2], GRADED, "quadratic") is None
    with pytest.raises(UndefinedStatistic, match="chance"):
        cohen_kappa([2, 2, 2], [2, 2, 2], GRADED, strict=True)
    # One rater constant, the other not: defined (and 0), as in sklearn.
    assert cohen_kappa([1, 1, 1, 1], [1, 0, 1, 0], BINARY) == pytest.approx(0.0)


def test_kappa_of_no_items_is_none():
    assert cohen_kappa([], [], BINARY) is None


def test_the_confusion_matrix_has_rater_a_in_rows_in_scale_order():
    matrix = confusion([0, 0, 3, 2], [1, 0, 3, 3], GRADED)

    assert matrix.tolist() == [[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]]


def test_per_grade_agreement_counts_both_one_and_specific_agreement():
    # a: 1 1 1 0 0 2 ; b: 1 1 0 0 1 2  -> label 1: a 3, b 3, both 2 -> 4/6.
    per_grade = per_grade_agreement([1, 1, 1, 0, 0, 2], [1, 1, 0, 0, 1, 2], GRADED)

    by_label = {row["label"]: row for row in per_grade}
    assert by_label[1] == {"label": 1, "a": 3, "b": 3, "both": 2, "one": 2, "specific_agreement": pytest.approx(4 / 6)}
    assert by_label[0]["specific_agreement"] == pytest.approx(2 * 1 / (2 + 2))
    assert by_label[2]["specific_agreement"] == 1.0
    assert by_label[3] == {"label": 3, "a": 0, "b": 0, "both": 0, "one": 0, "specific_agreement": None}


def test_grades_off_the_scale_are_refused():
    with pytest.raises(ValueError, match="not on the scale"):
        cohen_kappa([0, 4], [0, 1], GRADED)
    with pytest.raises(ValueError, match="not on the scale"):
        krippendorff_alpha(two_raters([0, 5], [0, 1]), GRADED)


def test_a_scale_needs_two_distinct_labels():
    with pytest.raises(ValueError, match="two labels"):
        cohen_kappa([1], [1], (1,))
    with pytest.raises(ValueError, match="distinct"):
        cohen_kappa([1], [1], (1, 1))


def test_a_rater_grading_an_item_twice_is_refused():
    frame = pd.DataFrame({"item": ["q1/d1", "q1/d1"], "rater": ["ann", "ann"], "grade": [1, 0]})

    with pytest.raises(ValueError, match="'ann' graded item 'q1/d1' more than once"):
        krippendorff_alpha(frame, BINARY)


# --------------------------------------------------------------------------------------------- Krippendorff


def test_alpha_reproduces_krippendorffs_worked_example():
    frame = long(KRIPPENDORFF_2011)
    labels = (1, 2, 3, 4, 5)

    assert round(krippendorff_alpha(frame, labels, "nominal"), 3) == 0.743
    assert round(krippendorff_alpha(frame, labels, "ordinal"), 3) == 0.815
    assert round(krippendorff_alpha(frame, labels, "interval"), 3) == 0.849
    assert round(krippendorff_alpha(frame, labels, "ratio"), 3) == 0.797


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_equals_the_krippendorff_package_on_random_data_with_missing_grades(level):
    rng = np.random.default_rng({"nominal": 1, "ordinal": 2, "interval": 3, "ratio": 4}[level])
    compared = 0
    for case in range(150):
        labels = [(0, 1), (0, 1, 2, 3), (1, 2, 3, 4, 5), (0, 2, 5)][case % 4]
        used = rng.choice(labels, size=rng.integers(1, len(labels) + 1), replace=False)
        n_raters, n_items = int(rng.integers(2, 6)), int(rng.integers(2, 30))
        data = rng.choice(used, size=(n_raters, n_items)).astype(float)
        data[rng.random(data.shape) < 0.35] = np.nan
        frame = long(data.tolist())
        if not (frame.groupby("item").size() >= 2).any():
            assert krippendorff_alpha(frame, labels, level) is None
            continue
        with np.errstate(all="ignore"):
            expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=list(labels))
        ours = krippendorff_alpha(frame, labels, level)
        if np.isnan(expected):
            assert ours is None
        else:
            assert ours == pytest.approx(expected, abs=1e-10)
            compared += 1
    assert compared > 75


def test_alpha_is_none_when_every_grade_is_one_label():
    frame = long([[2, 2, 2], [2, 2, None], [None, 2, 2]])

    assert krippendorff_alpha(frame, GRADED, "ordinal") is None
    with pytest.raises(UndefinedStatistic, match="chance"):
        krippendorff_alpha(frame, GRADED, strict=True)


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="level of measurement"):
        krippendorff_alpha(two_raters([0, 1], [0, 1]), BINARY, "cardinal")


def test_the_ratio_level_refuses_negative_grades_and_summary_leaves_it_out_for_them():
    with pytest.raises(ValueError, match="absolute zero"):
        krippendorff_alpha(two_raters([-1, 1], [1, 1]), (-1, 0, 1), "ratio")
    stats = summary(two_raters([-1, 1, 0], [1, 1, 0]), (-1, 0, 1), scale_kind="graded", resamples=10)["statistics"]
    assert "alpha_interval" in stats and "alpha_ratio" not in stats


# --------------------------------------------------------------------------------------------- Fleiss


def test_fleiss_kappa_reproduces_the_fleiss_1971_worked_example():
    assert round(fleiss_kappa_table(FLEISS_WIKIPEDIA), 3) == 0.210
    assert round(fleiss_kappa(from_table(FLEISS_WIKIPEDIA), (0, 1, 2, 3, 4)), 3) == 0.210


def test_fleiss_kappa_equals_statsmodels_on_random_tables():
    rng = np.random.default_rng(11)
    for case in range(100):
        n_raters, n_items, q = int(rng.integers(2, 8)), int(rng.integers(2, 25)), int(rng.integers(2, 6))
        matrix = rng.choice(rng.integers(0, q, size=int(rng.integers(1, q + 1))), size=(n_raters, n_items))
        frame = long(matrix.tolist())
        table = np.stack([np.bincount(matrix[:, item], minlength=q) for item in range(n_items)])
        with np.errstate(all="ignore"):
            expected = statsmodels_fleiss_kappa(table)
        ours = fleiss_kappa(frame, tuple(range(q)))
        if np.isnan(expected):
            assert ours is None
        else:
            assert ours == pytest.approx(expected, abs=1e-12)


def test_fleiss_kappa_is_none_unless_every_item_has_the_same_number_of_grades():
    frame = long([[0, 1, 1, 0], [0, 1, 0, 0], [1, None, 0, 0]])

    assert fleiss_kappa(frame, BINARY) is None
    with pytest.raises(UndefinedStatistic) as raised:
        fleiss_kappa(frame, BINARY, strict=True)
    assert str(raised.value) == UNEQUAL_RATERS


def test_fleiss_kappa_ignores_items_with_a_single_grade():
    frame = long([[0, 1, 1, 0, 1], [0, 1, 0, 0, None]])

    assert fleiss_kappa(frame, BINARY) == pytest.approx(statsmodels_fleiss_kappa([[2, 0], [0, 2], [1, 1], [2, 0]]))


# --------------------------------------------------------------------------------------------- Gwet's AC1


def test_ac1_reproduces_gwets_four_rater_example():
    # Handbook p. 120: p_a = 0.818, AC1 = 0.775. Gwet's chance agreement also counts unit 12, graded once
    # (p_e = 0.1903, AC1 = 0.7754); here single grades never count (p_e = 0.1914, AC1 = 0.7752).
    frame = long(GWET_4_RATERS)

    assert percent_agreement(frame) == pytest.approx(9 / 11)
    assert round(gwet_ac1(frame, (1, 2, 3, 4, 5)), 3) == 0.775


def test_ac1_reproduces_gwets_five_observer_example_with_missing_grades():
    # irrCAC's gwet.ac1.raw on cac.raw5obser: p_a = 0.616, AC1 = 0.497 (every unit has two grades or more).
    frame = long(GWET_5_OBSERVERS)

    assert percent_agreement(frame) == pytest.approx(0.616, abs=5e-4)
    assert gwet_ac1(frame, GRADED) == pytest.approx(0.497, abs=5e-4)


def test_ac1_reproduces_gwets_two_abstractor_example():
    # Handbook, 100 pregnancies classified by 2 abstractors into 3 types: AC1 = 0.849.
    table = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
    a = [row for row, counts in enumerate(table) for column, count in enumerate(counts) for _ in range(count)]
    b = [column for counts in table for column, count in enumerate(counts) for _ in range(count)]

    assert gwet_ac1(two_raters(a, b), (0, 1, 2)) == pytest.approx(0.849, abs=5e-4)


def test_ac1_for_two_raters_and_two_labels_is_gwets_closed_form():
    # Gwet (2008), two raters: p_e = 2 pi (1 - pi), pi = (n_1. + n_.1) / 2n.
    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 60))
        a = rng.integers(0, 2, n)
        b = np.where(rng.random(n) < 0.7, a, 1 - a)
        p_a = np.mean(a == b)
        pi = (a.sum() + b.sum()) / (2 * n)
        p_e = 2 * pi * (1 - pi)

        assert gwet_ac1(two_raters(a, b), BINARY) == pytest.approx((p_a - p_e) / (1 - p_e), abs=1e-12)


def test_ac1_counts_every_label_of_the_scale_in_its_chance_agreement():
    frame = two_raters([0, 1, 1, 0, 1], [0, 1, 0, 0, 1])
    # pi = (0.5, 0.5, 0, 0): p_e = 0.5 / 3 on four labels, 0.5 on two.
    assert gwet_ac1(frame, GRADED) == pytest.approx((0.8 - 0.5 / 3) / (1 - 0.5 / 3))
    assert gwet_ac1(frame, BINARY) == pytest.approx((0.8 - 0.5) / 0.5)


# --------------------------------------------------------------------------------------------- percent agreement


def test_percent_agreement_averages_each_items_share_of_agreeing_pairs():
    # item 0: 3 raters, 1 of 3 pairs agree; item 1: 2 raters agree; item 2: graded once, ignored.
    frame = long([[0, 1, 2], [0, 1, None], [1, None, None]])

    assert percent_agreement(frame) == pytest.approx((1 / 3 + 1) / 2)


def test_statistics_ignore_items_with_a_single_grade():
    base = long(KRIPPENDORFF_2011[:2])
    extra = pd.concat([base, pd.DataFrame({"item": [100, 101], "rater": ["r0", "r9"], "grade": [5, 1]})])

    for function in (percent_agreement, lambda f: krippendorff_alpha(f, (1, 2, 3, 4, 5), "ordinal"),
                     lambda f: gwet_ac1(f, (1, 2, 3, 4, 5)), lambda f: fleiss_kappa(f, (1, 2, 3, 4, 5))):
        assert function(extra) == function(base)


# --------------------------------------------------------------------------------------------- degenerate inputs


def test_a_single_rater_has_no_agreement_and_summary_says_why():
    frame = long([[0, 1, 1, 0]])

    report = summary(frame, BINARY, scale_kind="binary", resamples=50)

    assert report["n_items"] == 0 and report["n_items_single"] == 4 and report["raters"] == []
    for entry in report["statistics"].values():
        assert entry["value"] is None and entry["low"] is None and entry["high"] is None
        assert entry["reason"] == NO_ITEMS
    assert percent_agreement(frame) is None
    assert pairwise(frame, BINARY) == []


def test_raters_with_no_shared_items_have_no_pairwise_kappa():
    # ann and bob each share items with cid, never with each other.
    frame = pd.DataFrame({"item": [1, 1, 2, 2], "rater": ["ann", "cid", "bob", "cid"], "grade": [1, 1, 0, 1]})

    pairs = pairwise(frame, BINARY)

    assert [(p.rater_a, p.rater_b) for p in pairs] == [("ann", "cid"), ("bob", "cid")]
    assert pairwise(frame[frame.rater != "cid"], BINARY) == []
    with pytest.raises(UndefinedStatistic, match=NO_ITEMS):
        mean_pairwise_kappa(frame[frame.rater != "cid"], BINARY, strict=True)


def test_summary_reports_undefined_statistics_with_their_reason():
    frame = long([[1, 1, 1], [1, 1, 1]])

    stats = summary(frame, BINARY, scale_kind="binary", resamples=20)["statistics"]

    assert stats["percent_agreement"]["value"] == 1.0
    assert stats["alpha_nominal"] == {"value": None, "low": None, "high": None, "band": "undefined",
                                      "reason": ONE_LABEL, "undefined_resamples": 20}
    assert stats["fleiss_kappa"]["reason"] == ONE_LABEL
    assert stats["mean_pairwise_kappa"]["value"] is None
    # AC1 stays defined: its chance agreement is below 1 whenever the scale has two labels.
    assert stats["gwet_ac1"]["value"] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------- pairwise


def test_pairwise_gives_every_pairs_kappas_as_sklearn_does():
    frame = long(GWET_5_OBSERVERS, raters=["o1", "o2", "o3", "o4", "o5"])
    wide = frame.pivot(index="item", columns="rater", values="grade")

    pairs = pairwise(frame, GRADED)

    assert len(pairs) == 10
    for pair in pairs:
        both = wide[[pair.rater_a, pair.rater_b]].dropna()
        a, b = both[pair.rater_a].astype(int), both[pair.rater_b].astype(int)
        assert pair.n_items == len(both)
        assert pair.confusion.tolist() == confusion(a, b, GRADED).tolist()
        assert pair.percent_agreement == pytest.approx(np.mean(a.to_numpy() == b.to_numpy()))
        for attribute, weights in (("kappa", None), ("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
            with quiet():
                expected = cohen_kappa_score(a, b, labels=list(GRADED), weights=weights)
            value = getattr(pair, attribute)
            assert value is None if np.isnan(expected) else value == pytest.approx(expected)
        assert pair.per_grade == per_grade_agreement(a, b, GRADED)


def test_mean_pairwise_kappa_weighs_pairs_by_their_shared_items():
    frame = long(GWET_5_OBSERVERS, raters=["o1", "o2", "o3", "o4", "o5"])
    pairs = [p for p in pairwise(frame, GRADED) if p.kappa_quadratic is not None]
    expected = sum(p.kappa_quadratic * p.n_items for p in pairs) / sum(p.n_items for p in pairs)

    assert mean_pairwise_kappa(frame, GRADED, "quadratic") == pytest.approx(expected)


def test_with_two_raters_the_mean_pairwise_kappa_is_their_kappa():
    frame = noisy_raters(200, 2, GRADED, seed=5)
    wide = frame.pivot(index="item", columns="rater", values="grade")

    assert mean_pairwise_kappa(frame, GRADED, "linear") == pytest.approx(
        cohen_kappa_score(wide["r0"], wide["r1"], labels=list(GRADED), weights="linear"))


# --------------------------------------------------------------------------------------------- bands


@pytest.mark.parametrize("value, name", [
    (-0.01, "poor"), (0.0, "slight"), (0.2, "slight"), (0.21, "fair"), (0.40, "fair"), (0.41, "moderate"),
    (0.6, "moderate"), (0.61, "substantial"), (0.8, "substantial"), (0.81, "almost perfect"), (1.0, "almost perfect"),
    (None, "undefined"),
])
def test_values_are_named_on_the_landis_and_koch_scale(value, name):
    assert band(value) == name


# --------------------------------------------------------------------------------------------- bootstrap


def kappa_062(n_items: int, seed: int) -> pd.DataFrame:
    """Two raters on a binary scale with kappa near 0.62: the second copies the first 81% of the time."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n_items) < 0.5).astype(int)
    b = np.where(rng.random(n_items) < 0.81, a, 1 - a)
    return two_raters(a, b)


def test_the_bootstrap_interval_is_reproducible_with_a_seed():
    frame = kappa_062(200, seed=1)
    alpha = Statistic("krippendorff_alpha", BINARY)

    first = bootstrap_ci(frame, alpha, resamples=300, seed=4)

    assert bootstrap_ci(frame, alpha, resamples=300, seed=4) == first
    assert bootstrap_ci(frame, alpha, resamples=300, seed=5) != first


def test_the_bootstrap_interval_contains_the_estimate_and_narrows_with_more_items():
    alpha = Statistic("krippendorff_alpha", BINARY)
    small, large = kappa_062(40, seed=2), kappa_062(4000, seed=2)

    small_low, small_high = bootstrap_ci(small, alpha)
    large_low, large_high = bootstrap_ci(large, alpha)

    assert small_low <= alpha(small) <= small_high
    assert large_low <= alpha(large) <= large_high
    assert 0.55 < alpha(large) < 0.69
    assert (large_high - large_low) < (small_high - small_low) / 5


def test_a_statistic_and_a_plain_callable_see_the_same_resamples():
    frame = long(GWET_5_OBSERVERS)
    for statistic in (Statistic("krippendorff_alpha", GRADED, level="ordinal"), Statistic("gwet_ac1", GRADED),
                      Statistic("percent_agreement", GRADED),
                      Statistic("mean_pairwise_kappa", GRADED, weights="linear")):
        fast = bootstrap_values(frame, statistic, resamples=60, seed=9)
        slow = bootstrap_values(frame, lambda judgments: statistic(judgments), resamples=60, seed=9)

        np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-12)


def test_the_bootstrap_moves_all_grades_of_an_item_together():
    frame = long(GWET_5_OBSERVERS)
    originals = {frozenset(zip(group.rater, group.grade)) for _, group in frame.groupby("item")}
    seen = []

    def record(judgments):
        seen.append(judgments)
        return 0.0

    bootstrap_values(frame, record, resamples=5, seed=0)

    assert len(seen) == 5
    for judgments in seen:
        assert judgments["item"].nunique() == 15
        assert all(frozenset(zip(group.rater, group.grade)) in originals for _, group in judgments.groupby("item"))


def test_each_resample_is_the_seeded_draw_of_the_items_graded_twice_as_the_krippendorff_package_scores_it():
    # Resamples draw positions among the items graded at least twice, in item order, from default_rng(seed);
    # items graded alike by the same raters are summed as one class, which must not change any resample.
    frame = pd.concat([long(GWET_5_OBSERVERS), pd.DataFrame({"item": [15], "rater": ["r0"], "grade": [3]})], ignore_index=True)
    matrix = to_reliability_data(frame)[:, :15]  # item 15 has a single grade: never drawn
    draws = np.random.default_rng(7).integers(0, 15, size=(40, 15))
    with quiet():
        expected = [krippendorff.alpha(reliability_data=matrix[:, draw], level_of_measurement="ordinal", value_domain=list(GRADED))
                    for draw in draws]

    ours = bootstrap_values(frame, Statistic("krippendorff_alpha", GRADED, level="ordinal"), resamples=40, seed=7)

    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-12)


def test_with_two_raters_every_resample_is_bit_identical_to_recomputing_it_from_the_resampled_judgments():
    # Two grades an item make every summed term a whole number or a half: sums per class are exact.
    frame = kappa_062(300, seed=6)
    for statistic in (Statistic("krippendorff_alpha", BINARY), Statistic("gwet_ac1", BINARY), Statistic("percent_agreement", BINARY),
                      Statistic("fleiss_kappa", BINARY), Statistic("mean_pairwise_kappa", BINARY)):
        fast = bootstrap_values(frame, statistic, resamples=50, seed=2)
        slow = bootstrap_values(frame, lambda judgments: statistic(judgments), resamples=50, seed=2)

        assert np.array_equal(fast, slow)


def test_fleiss_kappa_resamples_stay_defined_when_items_share_a_rater_count():
    values = bootstrap_values(from_table(FLEISS_WIKIPEDIA), Statistic("fleiss_kappa", (0, 1, 2, 3, 4)), resamples=50)

    assert not np.isnan(values).any()


def test_bootstrap_arguments_are_checked():
    frame = kappa_062(20, seed=0)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_ci(frame, Statistic("gwet_ac1", BINARY), resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(frame, Statistic("gwet_ac1", BINARY), level=1.5)


# --------------------------------------------------------------------------------------------- summary


def test_summary_of_a_graded_scale_has_ordinal_and_interval_alpha_and_quadratic_kappa():
    frame = noisy_raters(300, 3, GRADED, seed=8)

    report = summary(frame, GRADED, scale_kind="graded", resamples=200, seed=1)

    assert report["n_items"] == 300 and report["n_judgments"] == 900 and report["raters"] == ["r0", "r1", "r2"]
    assert report["n_pairs"] == 3 and report["labels"] == [0, 1, 2, 3]
    stats = report["statistics"]
    assert list(stats) == ["percent_agreement", "fleiss_kappa", "alpha_ordinal", "alpha_interval", "alpha_ratio", "gwet_ac1",
                           "mean_pairwise_kappa"]
    data = to_reliability_data(frame)
    assert stats["alpha_ordinal"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=list(GRADED)))
    assert stats["alpha_interval"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="interval", value_domain=list(GRADED)))
    assert stats["alpha_ratio"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ratio", value_domain=list(GRADED)))
    assert stats["mean_pairwise_kappa"]["value"] == pytest.approx(mean_pairwise_kappa(frame, GRADED, "quadratic"))
    for name, entry in stats.items():
        assert entry["low"] <= entry["value"] <= entry["high"]
        assert entry["band"] == (None if name == "percent_agreement" else band(entry["value"]))
        assert entry["reason"] is None and entry["undefined_resamples"] == 0
    assert stats["alpha_ordinal"]["low"] == bootstrap_ci(
        frame, Statistic("krippendorff_alpha", GRADED, level="ordinal"), resamples=200, seed=1)[0]


def test_summary_of_a_binary_scale_has_nominal_alpha_and_unweighted_kappa():
    frame = kappa_062(500, seed=3)

    stats = summary(frame, BINARY, scale_kind="binary", resamples=100)["statistics"]

    assert list(stats) == ["percent_agreement", "fleiss_kappa", "alpha_nominal", "gwet_ac1", "mean_pairwise_kappa"]
    wide = frame.pivot(index="item", columns="rater", values="grade")
    assert stats["mean_pairwise_kappa"]["value"] == pytest.approx(cohen_kappa_score(wide["ann"], wide["bob"]))
    assert stats["fleiss_kappa"]["value"] == pytest.approx(
        statsmodels_fleiss_kappa(np.stack([(wide == 0).sum(axis=1), (wide == 1).sum(axis=1)], axis=1)))


def test_summary_checks_the_scale_kind():
    with pytest.raises(ValueError, match="scale kind"):
        summary(kappa_062(10, seed=0), BINARY, scale_kind="ordinal")
    with pytest.raises(ValueError, match="binary scale has two labels"):
        summary(kappa_062(10, seed=0), GRADED, scale_kind="binary")


# --------------------------------------------------------------------------------------------- consensus


def judged(grades_per_item: dict) -> pd.DataFrame:
    rows = [(item, f"r{index}", grade)
            for item, grades in grades_per_item.items() for index, grade in enumerate(grades)]
    return pd.DataFrame(rows, columns=["item", "rater", "grade"])


def labels_by(rule: str, grades_per_item: dict, labels=GRADED) -> dict:
    frame = consensus(judged(grades_per_item), labels, rule)
    return dict(zip(frame["item"], frame["label"].tolist()))


def test_majority_takes_the_most_frequent_grade_and_ties_go_to_the_lower():
    assert labels_by("majority", {"a": (3, 3, 1), "b": (1, 3), "c": (0, 2, 2, 0, 3), "d": (2,)}) == {
        "a": 3, "b": 1, "c": 0, "d": 2}


def test_mean_rounds_to_the_nearest_scale_value_half_up():
    assert labels_by("mean", {"a": (1, 2), "b": (0, 1, 1), "c": (0, 0, 1), "d": (0, 3), "e": (3, 3, 2, 2)}) == {
        "a": 2, "b": 1, "c": 0, "d": 2, "e": 3}
    # With gaps in the scale, the nearest value: a mean of 2 lies half way between 1 and 3.
    assert labels_by("mean", {"a": (1, 3), "b": (0, 1, 1)}, labels=(0, 1, 3)) == {"a": 3, "b": 1}


def test_median_rounds_down_when_it_falls_between_two_scale_values():
    assert labels_by("median", {"a": (1, 2), "b": (0, 3), "c": (0, 1, 3), "d": (3, 3, 2, 2), "e": (1,)}) == {
        "a": 1, "b": 1, "c": 1, "d": 2, "e": 1}
    assert labels_by("median", {"a": (0, 3)}, labels=(0, 3)) == {"a": 0}


def test_min_top3_takes_the_lowest_of_the_three_highest_grades():
    assert labels_by("min_top3", {"a": (3, 3, 2, 0), "b": (3, 3, 3, 0), "c": (1, 0), "d": (2,), "e": (0, 1, 3, 2)}) == {
        "a": 2, "b": 3, "c": 0, "d": 2, "e": 1}


def test_consensus_lists_every_item_with_its_grades_and_spread():
    frame = consensus(judged({"a": (3, 0, 2), "b": (1,)}), GRADED, "majority")

    assert list(frame.columns) == list(CONSENSUS_COLUMNS)
    assert frame.to_dict("records") == [
        {"item": "a", "label": 0, "n_grades": 3, "spread": 3, "grades": (0, 2, 3)},
        {"item": "b", "label": 1, "n_grades": 1, "spread": 0, "grades": (1,)},
    ]
    with pytest.raises(ValueError, match="consensus rule"):
        consensus(judged({"a": (1,)}), GRADED, "mode")


def test_disagreements_lists_items_whose_grades_differ_by_the_margin_widest_first():
    frame = judged({"a": (0, 1), "b": (0, 3, 1), "c": (2, 2), "d": (1, 3), "e": (3,)})

    queue = disagreements(frame, margin=2)

    assert list(queue.columns) == list(DISAGREEMENT_COLUMNS)
    assert queue.to_dict("records") == [
        {"item": "b", "n_grades": 3, "spread": 3, "low": 0, "high": 3, "grades": (0, 1, 3),
         "raters": ("r0", "r2", "r1")},
        {"item": "d", "n_grades": 2, "spread": 2, "low": 1, "high": 3, "grades": (1, 3), "raters": ("r0", "r1")},
    ]
    assert disagreements(frame, margin=1)["item"].tolist() == ["b", "d", "a"]
    assert disagreements(frame, margin=4).empty
    with pytest.raises(ValueError, match="margin"):
        disagreements(frame, margin=0)


# --------------------------------------------------------------------------------------------- raters


def test_rater_vs_consensus_flags_a_rater_who_grades_one_point_high():
    rng = np.random.default_rng(12)
    truth = rng.integers(0, 4, 400)
    matrix = [np.where(rng.random(400) < 0.2, rng.integers(0, 4, 400), truth) for _ in range(3)]
    matrix.append(np.minimum(truth + 1, 3))
    frame = long([m.tolist() for m in matrix], raters=["ann", "bob", "cid", "dan"])

    table = rater_vs_consensus(frame, GRADED)

    assert list(table.columns) == list(RATER_COLUMNS)
    assert table.iloc[0]["rater"] == "dan" and table["out_of_line"].tolist() == [True, False, False, False]
    dan = table.set_index("rater").loc["dan"]
    assert dan["bias"] > 0.5 and dan["n_items"] == 400
    assert (table.set_index("rater").drop("dan")["bias"].abs() < 0.4).all()


def test_rater_bias_is_the_mean_difference_from_the_other_raters_mean():
    frame = long([[0, 1, 3], [1, 1, 1], [2, 1, None]], raters=["ann", "bob", "cid"])

    table = rater_vs_consensus(frame, GRADED).set_index("rater")

    # ann: 0 - 1.5, 1 - 1, 3 - 1  -> mean (-1.5 + 0 + 2) / 3
    assert table.loc["ann", "bias"] == pytest.approx((-1.5 + 0 + 2) / 3)
    assert table.loc["cid", "bias"] == pytest.approx(((2 - 0.5) + 0) / 2)
    # Others' majority: ann vs (1,2)->1, (1,1)->1, (1)->1 : agrees once.
    assert table.loc["ann", "agreement"] == pytest.approx(1 / 3)
    assert table.loc["cid", "n_items"] == 2


def test_with_two_raters_nobody_is_singled_out():
    table = rater_vs_consensus(kappa_062(100, seed=1), BINARY)

    assert not table["out_of_line"].any()
    assert table["bias"].sum() == pytest.approx(0.0)
    assert table["kappa"].nunique() == 1


# --------------------------------------------------------------------------------------------- groups and drift


def test_alpha_per_query_is_each_querys_own_alpha_worst_first():
    frame = noisy_raters(60, 3, GRADED, seed=21, noise=0.5)
    groups = {item: f"q{item % 4}" for item in range(60)}
    groups[60] = "q-empty"
    frame = pd.concat([frame, pd.DataFrame({"item": [60], "rater": ["r0"], "grade": [2]})], ignore_index=True)

    table = per_item_group_alpha(frame, groups, GRADED, "ordinal")

    assert list(table.columns) == list(GROUP_COLUMNS)
    assert table["group"].tolist()[-1] == "q-empty" and table["alpha"].tolist()[-1] is None
    alphas = table["alpha"].tolist()[:-1]
    assert alphas == sorted(alphas)
    for row in table.iloc[:-1].itertuples():
        subset = frame[frame["item"].map(groups) == row.group]
        assert row.n_items == 15 and row.n_judgments == 45
        assert row.alpha == pytest.approx(krippendorff.alpha(
            reliability_data=to_reliability_data(subset), level_of_measurement="ordinal", value_domain=list(GRADED)))


def test_alpha_per_query_needs_a_group_for_every_item():
    with pytest.raises(ValueError, match="no group"):
        per_item_group_alpha(judged({"a": (1, 1), "b": (0, 1)}), {"a": "q1"}, BINARY)


def test_drift_gives_agreement_per_week_of_each_items_last_grade():
    monday = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    rows = [
        # Week of 2 March: two items graded alike.
        ("a", "ann", 1, monday), ("a", "bob", 1, monday + timedelta(days=1)),
        ("b", "ann", 0, monday), ("b", "bob", 0, monday + timedelta(days=2)),
        # Item c: first grade in week 1, second in week 3, so it counts in week 3; d disagrees in week 3.
        ("c", "ann", 1, monday + timedelta(days=3)), ("c", "bob", 0, monday + timedelta(days=15)),
        ("d", "ann", 1, monday + timedelta(days=14)), ("d", "bob", 1, monday + timedelta(days=16)),
        ("e", "ann", 1, monday + timedelta(days=16)),  # graded once: ignored
    ]
    frame = pd.DataFrame(rows, columns=["item", "rater", "grade", "time"])

    table = drift(frame, BINARY)

    assert list(table.columns) == list(DRIFT_COLUMNS)
    assert table["start"].tolist() == [date(2026, 3, 2), date(2026, 3, 9), date(2026, 3, 16)]
    assert table["end"].tolist() == [date(2026, 3, 8), date(2026, 3, 15), date(2026, 3, 22)]
    assert table["n_items"].tolist() == [2, 0, 2]
    assert table["n_judgments"].tolist() == [4, 0, 4]
    assert table["percent_agreement"].tolist() == [1.0, None, 0.5]
    week3 = frame[frame["item"].isin(["c", "d"])]
    assert table["alpha"].tolist()[2] == pytest.approx(krippendorff_alpha(week3, BINARY))
    week1 = frame[frame["item"].isin(["a", "b"])]
    assert table["alpha"].tolist()[0] == pytest.approx(krippendorff_alpha(week1, BINARY))


def test_drift_needs_times():
    with pytest.raises(ValueError, match="time"):
        drift(judged({"a": (1, 1)}), BINARY)


# --------------------------------------------------------------------------------------------- input forms


def with_times_and_queries(frame: pd.DataFrame) -> pd.DataFrame:
    start = pd.Timestamp("2026-03-02", tz="UTC")
    return frame.assign(time=[start + pd.Timedelta(hours=5 * row) for row in range(len(frame))],
                        query=[f"q{item % 7}" for item in frame["item"]])


def pair_fields(results) -> list[dict]:
    return [{**vars(result), "confusion": result.confusion.tolist()} for result in results]


def test_prepared_judgments_give_every_function_the_results_of_the_judgments_themselves():
    frame = with_times_and_queries(pd.concat([noisy_raters(120, 3, GRADED, seed=4),
                                              pd.DataFrame({"item": [500], "rater": ["r1"], "grade": [2]})], ignore_index=True))
    coded = prepare(frame, GRADED)
    groups = dict(zip(frame["item"], frame["query"]))

    assert summary(coded, GRADED, scale_kind="graded", resamples=30, seed=1) == summary(
        frame, GRADED, scale_kind="graded", resamples=30, seed=1)
    assert pair_fields(pairwise(coded, GRADED)) == pair_fields(pairwise(frame, GRADED))
    pd.testing.assert_frame_equal(per_item_group_alpha(coded, groups, GRADED, "ordinal"),
                                  per_item_group_alpha(frame, groups, GRADED, "ordinal"))
    pd.testing.assert_frame_equal(rater_vs_consensus(coded, GRADED, rule="mean"), rater_vs_consensus(frame, GRADED, rule="mean"))
    pd.testing.assert_frame_equal(drift(coded, GRADED, level="interval"), drift(frame, GRADED, level="interval"))
    pd.testing.assert_frame_equal(consensus(coded, GRADED, "median"), consensus(frame, GRADED, "median"))
    pd.testing.assert_frame_equal(disagreements(coded, 2), disagreements(frame, 2))
    assert krippendorff_alpha(coded, GRADED, "ratio") == krippendorff_alpha(frame, GRADED, "ratio")
    assert percent_agreement(coded) == percent_agreement(frame)


def test_alpha_per_query_takes_the_groups_as_a_series_indexed_by_item():
    frame = with_times_and_queries(noisy_raters(90, 3, GRADED, seed=11, noise=0.5))
    as_series = frame.drop_duplicates("item").set_index("item")["query"]

    pd.testing.assert_frame_equal(per_item_group_alpha(frame, as_series, GRADED, "ordinal"),
                                  per_item_group_alpha(frame, dict(zip(frame["item"], frame["query"])), GRADED, "ordinal"))


def test_judgments_prepared_on_one_scale_are_refused_on_another():
    coded = prepare(noisy_raters(20, 2, GRADED, seed=1), GRADED)

    with pytest.raises(ValueError, match="prepared on the scale"):
        krippendorff_alpha(coded, (0, 1, 2, 3, 4))
    with pytest.raises(ValueError, match="prepared on the scale"):
        summary(coded, (0, 1), scale_kind="binary")


def test_judgments_can_be_parallel_arrays():
    frame = long(KRIPPENDORFF_2011)
    arrays = {column: frame[column].to_numpy() for column in ("item", "rater", "grade")}

    assert krippendorff_alpha(arrays, (1, 2, 3, 4, 5)) == krippendorff_alpha(frame, (1, 2, 3, 4, 5))


def test_the_module_imports_nothing_from_django():
    code = ("import sys, judgments.lib.agreement; "
            "assert not [m for m in sys.modules if m.startswith('django')], 'django imported'")

    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
