"""Measure names: canonical strings round-trip, every alias spelling parses to the same measure."""

import pytest

from evaluation.engine import Measure, UnknownMeasureError, evaluate, parse_measure, parse_measures, read_qrels, \
    read_run
from evaluation.engine.measures import registered_measures


@pytest.mark.parametrize("measure", registered_measures(), ids=str)
def test_every_registered_measure_parses_back_from_its_canonical_string(measure):
    assert parse_measure(measure.canonical) == measure
    assert parse_measure(measure.canonical).canonical == measure.canonical


@pytest.mark.parametrize("spelling, canonical", [
    ("ndcg_cut.10", "nDCG@10"), ("ndcg_cut_10", "nDCG@10"), ("nDCG@10", "nDCG@10"), ("ndcg@10", "nDCG@10"),
    ("P.5", "P@5"), ("P_5", "P@5"), ("P@10", "P@10"), ("P(rel=2)@5", "P(rel=2)@5"), ("AP", "AP"), ("map", "AP"),
    ("MAP", "AP"), ("map_cut.10", "AP@10"), ("AP@10", "AP@10"), ("mrr", "RR"), ("recip_rank", "RR"),
    ("RR@10", "RR@10"), ("R@100", "R@100"), ("recall@10", "R@10"), ("recall.100", "R@100"),
    ("Judged@10", "Judged@10"), ("ndcg.1=1,2=3", "nDCG(gains={1:1,2:3})"), ("nDCG(gains={2:3,1:1})", "nDCG(gains={1:1,2:3})"),
    ("iprec_at_recall.0.10", "IPrec@0.1"), ("IPrec@0.1", "IPrec@0.1"), ("success.1", "Success@1"),
    ("set_F", "SetF"), ("num_q", "NumQ"), ("NumRet(rel=1)", "NumRelRet(rel=1)"), ("gm_map", "GMAP"),
    ("unj.5", "Unjudged@5"), ("rbp", "RBP"), ("rbp.p=0.8", "RBP(p=0.8)"), ("ERR@10", "ERR@10"),
    ("HitRate@10", "HitRate@10"), ("Rprec_mult.0.2", "Rprec(mult=0.2)"), ("infAP", "infAP"), ("bpref", "Bpref"),
    ("Judged", "Judged"), ("judged@5", "Judged@5"), ("UnjudgedShare@50", "UnjudgedShare@50"), ("unjudgedshare", "UnjudgedShare"),
    ("ERR(max=3)@10", "ERR(max=3)@10"), ("err(max=3.0)@10", "ERR(max=3)@10"),
])
def test_each_alias_spelling_parses_to_the_canonical_measure(spelling, canonical):
    assert parse_measure(spelling).canonical == canonical


@pytest.mark.parametrize("spelling, canonical", [
    ("utility.2,-1,0,0", "Utility(coefficients=2,-1,0,0)"), ("relstring.20", "RelString(len=20)"),
    ("11pt_avg..25,.5", "11pt_avg(recalls=0.25,0.5)"), ("G.1=0.5,2=3", "G(gains={1:0.5,2:3})"),
    ("rbp_resid.p=0.5", "RBPResid(p=0.5)"), ("Rndcg", "RnDCG"), ("ndcg_rel", "nDCGRel"), ("binG", "BinG"),
])
def test_trec_evals_parameter_lists_round_trip_through_the_canonical_string(spelling, canonical):
    measure = parse_measure(spelling)
    assert measure.canonical == canonical
    assert parse_measure(canonical) == measure


def test_a_measure_given_twice_keeps_its_first_parameter_list_as_trec_eval():
    from evaluation.engine.measures import first_trec_lists

    assert first_trec_lists(["P.5", "P.10"]) == ["P.5"]
    assert first_trec_lists(["recall.100", "nDCG@10", "recall.1000"]) == ["recall.100", "nDCG@10"]
    expanded = first_trec_lists(["all_trec", "P.5"])
    assert "P.5" in expanded and "P" not in expanded and "relstring" in expanded


def test_trec_eval_comma_lists_and_bare_families_expand():
    assert [m.canonical for m in parse_measures("P.5,10")] == ["P@5", "P@10"]
    assert [m.canonical for m in parse_measures(["success"])] == ["Success@1", "Success@5", "Success@10"]
    assert [m.canonical for m in parse_measures(["unj"])] == ["Unjudged@5", "Unjudged@10", "Unjudged@20"]


def test_an_unknown_name_lists_close_matches():
    with pytest.raises(UnknownMeasureError) as info:
        parse_measure("nDGC@10")
    assert "nDCG" in str(info.value)


def test_a_family_that_needs_a_cutoff_says_so():
    with pytest.raises(UnknownMeasureError, match="needs a cutoff"):
        parse_measure("HitRate")
    with pytest.raises(UnknownMeasureError, match="use parse_measures"):
        parse_measure("P")  # trec_eval's bare P means nine cutoffs


def test_custom_ndcg_gains_override_the_grades():
    qrels = read_qrels(b"q 0 a 1\nq 0 b 2\n")
    run = read_run(b"q Q0 a 1 2 r\nq Q0 b 2 1 r\n")
    default = evaluate(qrels, run, ["nDCG", "nDCG(gains={1:1,2:1})"]).aggregate
    assert default["nDCG(gains={1:1,2:1})"] == pytest.approx(1.0)
    assert default["nDCG"] < 1.0


def test_a_measure_level_rel_overrides_the_evaluation_level():
    qrels = read_qrels(b"q 0 a 1\nq 0 b 2\n")
    run = read_run(b"q Q0 a 1 2 r\nq Q0 b 2 1 r\n")
    result = evaluate(qrels, run, ["P@2", "P(rel=2)@2"]).aggregate
    assert result == {"P@2": 1.0, "P(rel=2)@2": 0.5}


def test_measures_compare_by_canonical_string():
    assert Measure("P", cutoff=5) == parse_measure("P.5") and len({parse_measure("P_5"), parse_measure("P@5")}) == 1


@pytest.mark.parametrize("text", ["ERR(max=0)@10", "ERR(max=2.5)@10", "ERR(max=-1)@10"])
def test_errs_max_grade_must_be_a_whole_number_of_at_least_one(text):
    with pytest.raises(UnknownMeasureError, match="ERR's max is the scale's top grade"):
        parse_measure(text)
