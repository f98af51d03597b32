"""Answer metrics (#16): UltraRAG's normalisation and each measure on hand-made cases, a property test
against a plain-Python reading of the formulas, aggregates, weights, UltraRAG's output shape, comparisons."""

import math
import re
import string
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine.answers import (
    ANSWER_MEASURES, Answer, aggregate, compare_answers, normalize_text, parse_answer_measures, score_answer,
    score_answers, ultrarag_output)
from evaluation.engine.errors import UnknownMeasureError


# ------------------------------------------------------------------------------------- normalisation

@pytest.mark.parametrize("text, expected", [
    ("True", "yes"),
    ("False", "no"),
    ("true", "true"),  # only the exact strings
    ("True story", "true story"),
    (" True", "true"),  # the whole string, before any stripping
    ("snake_case_name", "snake case name"),
    ("Don't STOP", "don t stop"),  # punctuation becomes a space, it is not deleted
    ("U.S.A.", "u s"),  # "a" left alone by the punctuation step is then an article
    ("The cat and a dog, an owl", "cat and dog owl"),
    ("theatre another", "theatre another"),  # articles are whole words only
    ("‘quoted’ it´s `tick`", "quoted it s tick"),
    ("“curly double”", "“curly double”"),  # not in UltraRAG's list
    ("  many \t\n spaces  ", "many spaces"),
    ("", ""),
    ("___", ""),
    ("Élan Vital", "élan vital"),
    ("北京, 中国", "北京 中国"),
])
def test_normalize_text_follows_ultrarag_step_by_step(text, expected):
    assert normalize_text(text) == expected


# -------------------------------------------------------------------------------------- each measure

def one(prediction, references, measure, **options):
    return score_answer(prediction, references, [measure], **options)[measure]


def test_acc_is_a_normalised_substring_match():
    assert one("The capital is Paris.", ["paris"], "acc") == 1.0
    assert one("Parisian food", ["paris"], "acc") == 1.0  # a substring, not a word
    assert one("London", ["paris", "lyon"], "acc") == 0.0


def test_acc_is_0_for_an_empty_prediction_but_an_empty_reference_hits_anything_else():
    assert one("", ["paris"], "acc") == 0.0
    assert one("!!!", [""], "acc") == 0.0  # normalises to ""
    assert one("anything at all", ["the"], "acc") == 1.0  # "the" normalises to "": UltraRAG's quirk


def test_em_and_stringem():
    assert one("The Eiffel Tower!", ["eiffel tower", "tour eiffel"], "em") == 1.0
    assert one("Eiffel", ["eiffel tower"], "em") == 0.0
    assert one("Eiffel Tower", ["eiffel tower", "Eiffel-Tower", "tour eiffel", "the eiffel tower"],
               "stringem") == 0.75  # the hyphen becomes a space
    assert one("", [""], "em") == 1.0  # both empty after normalisation


def test_booleans_match_yes_and_no():
    assert one("True", ["yes"], "em") == 1.0
    assert one("yes", ["True"], "em") == 1.0
    assert one("False", ["no"], "em") == 1.0
    assert one("True.", ["yes"], "em") == 0.0  # not the whole string: "true"


def test_coverem_needs_every_token_of_one_reference():
    assert one("Barack Obama was the president", ["obama barack"], "coverem") == 1.0
    assert one("Barack was the president", ["barack obama", "michelle obama"], "coverem") == 0.0
    assert one("", ["a"], "coverem") == 1.0  # a reference with no token is covered by anything


def test_f1_is_the_best_multiset_token_f1():
    # pred tokens: new york city (3); ref "new york" (2): overlap 2 -> p 2/3, r 1 -> 0.8
    assert one("New York City", ["new york", "big apple"], "f1") == pytest.approx(0.8)
    # multiset: "la la" against "la": overlap 1, p 1/2, r 1
    assert one("la la", ["la"], "f1") == pytest.approx(2 / 3)
    assert one("", ["x"], "f1") == 0.0
    assert one("x", [""], "f1") == 0.0


def test_rouge_uses_the_stemmer_and_the_normalised_texts():
    # stems: runner, were, run against runner, run: p 2/3, r 1
    assert one("The runners were running", ["runner runs"], "rouge-1") == pytest.approx(0.8)
    assert one("The runners were running", ["runner runs"], "f1") == 0.0  # f1 does not stem
    assert one("don't", ["don t"], "rouge-2") == 1.0
    assert one("a b c d", ["a c"], "rouge-l") == one("b c d", ["c"], "rouge-l")


def test_several_references_take_the_best():
    values = score_answer("paris france", ["london", "paris", "france paris"])
    assert values["em"] == 0.0 and values["acc"] == 1.0 and values["coverem"] == 1.0
    assert values["f1"] == 1.0 and values["rouge-1"] == 1.0 and values["stringem"] == 0.0


def test_non_latin_text_ultrarag_quirks_and_the_unicode_tokenizer():
    default = score_answer("北京是中国的首都", ["北京"])
    assert default["acc"] == 1.0  # a substring
    assert default["f1"] == 0.0 and default["coverem"] == 0.0  # one whitespace token each
    assert default["rouge-1"] == default["rouge-2"] == default["rouge-l"] == 0.0  # rouge-score keeps [a-z0-9]
    unicode = score_answer("北京是中国的首都", ["北京"], tokenizer="unicode")
    assert unicode["coverem"] == 1.0
    assert unicode["f1"] == pytest.approx(2 * (2 / 8) * 1 / (2 / 8 + 1))
    assert unicode["rouge-1"] == pytest.approx(0.4) and unicode["rouge-2"] == pytest.approx(0.25)
    russian = score_answer("Москва — столица России", ["столица"], tokenizer="unicode")
    assert russian["rouge-1"] == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))  # the dash is not a token
    assert score_answer("Москва — столица России", ["столица"])["rouge-1"] == 0.0
    hindi = score_answer("भारत की राजधानी दिल्ली है", ["दिल्ली"], tokenizer="unicode")
    assert hindi["coverem"] == 1.0 and hindi["f1"] == pytest.approx(2 * 0.2 / 1.2)  # vowel signs stay in words


def test_unicode_tokenizer_gives_the_default_values_on_ascii_text():
    for pred, refs in [("The runners were running fast.", ["runner runs", "fast"]),
                       ("don't stop 42 times", ["stop 42", "times"])]:
        assert score_answer(pred, refs, tokenizer="unicode") == score_answer(pred, refs)


printable_words = st.lists(st.sampled_from(list(string.printable) + ["paris", "the", "running", "42"]), max_size=30)


@settings(max_examples=400, deadline=None)
@given(prediction=printable_words.map("".join), reference=printable_words.map("".join))
def test_on_any_printable_ascii_text_the_unicode_tokenizer_gives_the_default_values(prediction, reference):
    """What the docs promise, over every printable ASCII character (letters, digits, punctuation, whitespace)."""
    assert score_answer(prediction, [reference], tokenizer="unicode") == score_answer(prediction, [reference])


def test_an_ascii_control_character_splits_a_word_only_for_the_unicode_tokenizer():
    """The one ASCII difference, as the docs state it: f1 and coverem's default tokens are whitespace-separated
    words, and a control character is neither whitespace nor punctuation; ROUGE drops it either way."""
    default = score_answer("paris\x01france", ["paris"])
    unicode = score_answer("paris\x01france", ["paris"], tokenizer="unicode")
    assert default["coverem"] == 0.0 and default["f1"] == 0.0
    assert unicode["coverem"] == 1.0 and unicode["f1"] == pytest.approx(2 / 3)
    assert unicode["rouge-1"] == default["rouge-1"] == pytest.approx(2 / 3)


def test_a_reference_list_that_is_empty_scores_0():
    assert set(score_answer("x", []).values()) == {0.0}


def test_unknown_measure_and_tokenizer():
    with pytest.raises(UnknownMeasureError, match="did you mean rouge-1"):
        parse_answer_measures(["rouge-11"])
    assert parse_answer_measures(["EM,f1", "rouge1", "em"]) == ["em", "f1", "rouge-1"]
    assert parse_answer_measures(["all"]) == list(ANSWER_MEASURES)
    with pytest.raises(ValueError, match="unknown tokenizer"):
        score_answer("x", ["x"], tokenizer="cjk")


# ---------------------------------------------------------------- property test against the formulas

def ref_normalize(text):
    if text == "True":
        text = "yes"
    elif text == "False":
        text = "no"
    text = text.replace("_", " ").lower()
    text = "".join(" " if ch in string.punctuation + "‘’´`" else ch for ch in text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def ref_measures(prediction, references):
    p = ref_normalize(prediction)
    refs = [ref_normalize(r) for r in references]
    p_tokens = p.split()

    def f1(r):
        r_tokens = r.split()
        if not p_tokens or not r_tokens:
            return 0.0
        same = sum(min(c, Counter(r_tokens)[t]) for t, c in Counter(p_tokens).items())
        if same == 0:
            return 0.0
        precision, recall = same / len(p_tokens), same / len(r_tokens)
        return 2 * precision * recall / (precision + recall)

    return {
        "acc": 1.0 if p != "" and any(r in p for r in refs) else 0.0,
        "em": 1.0 if p in refs else 0.0,
        "stringem": refs.count(p) / len(refs) if refs else 0.0,
        "coverem": 1.0 if any(set(r.split()) <= set(p_tokens) for r in refs) else 0.0,
        "f1": max([f1(r) for r in refs], default=0.0),
    }


words = st.sampled_from(["the", "a", "an", "True", "False", "Paris", "paris", "don't", "it’s", "snake_case",
                         "U.S.", "x", "x-y", "42", "`q`", "´", "Café", "北京", "", " ", "theatre", "an_apple"])
texts = st.lists(words, max_size=8).map(" ".join) | words


@settings(max_examples=400, deadline=None)
@given(prediction=texts, references=st.lists(texts, min_size=1, max_size=4))
def test_the_token_and_string_measures_match_a_plain_reading_of_the_formulas(prediction, references):
    ours = score_answer(prediction, references, ["acc", "em", "stringem", "coverem", "f1"])
    expected = ref_measures(prediction, references)
    assert ours.keys() == expected.keys()
    for measure, value in expected.items():
        assert ours[measure] == pytest.approx(value, abs=1e-12), measure


@settings(max_examples=150, deadline=None)
@given(prediction=texts, references=st.lists(texts, min_size=1, max_size=3))
def test_rouge_equals_rouge_scores_own_scorer_on_the_normalised_texts(prediction, references):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [scorer.score(normalize_text(r), normalize_text(prediction)) for r in references]
    ours = score_answer(prediction, references, ["rouge-1", "rouge-2", "rouge-l"])
    assert ours["rouge-1"] == max(s["rouge1"].fmeasure for s in scores)
    assert ours["rouge-2"] == max(s["rouge2"].fmeasure for s in scores)
    assert ours["rouge-l"] == max(s["rougeL"].fmeasure for s in scores)


# -------------------------------------------------------------------------- many queries, aggregates

REFERENCES = {"q1": ["Paris"], "q2": ["Berlin", "the German capital"], "q3": ["Rome"], "q4": []}
PREDICTIONS = {"q1": Answer("Paris", ("d1",)), "q2": "It is Berlin", "q9": "ignored", "q4": "x"}


def test_score_answers_leaves_out_queries_without_a_prediction_unless_all_queries():
    per_query = score_answers(REFERENCES, PREDICTIONS, ["em", "acc"])
    assert per_query == {"em": {"q1": 1.0, "q2": 0.0, "q4": 0.0}, "acc": {"q1": 1.0, "q2": 1.0, "q4": 0.0}}
    every = score_answers(REFERENCES, PREDICTIONS, ["em"], all_queries=True)
    assert list(every["em"]) == ["q1", "q2", "q3", "q4"] and every["em"]["q3"] == 0.0


def test_progress_hears_the_end():
    heard = []
    score_answers(REFERENCES, PREDICTIONS, ["em"], progress=lambda done, total: heard.append((done, total)))
    assert heard[-1] == (3, 3)


def test_aggregate_plain_and_weighted():
    per_query = {"em": {"q1": 1.0, "q2": 0.0, "q4": 0.0}}
    assert aggregate(per_query) == {"em": pytest.approx(1 / 3)}
    assert aggregate(per_query, {"q1": 2.0, "q2": 1.0, "q4": 1.0}) == {"em": pytest.approx(0.5)}
    with pytest.raises(ValueError, match="no weight for 1 queries"):
        aggregate(per_query, {"q1": 1.0, "q2": 1.0})
    with pytest.raises(ValueError, match="finite"):
        aggregate(per_query, {"q1": -1.0, "q2": 1.0, "q4": 1.0})
    assert math.isnan(aggregate({"em": {}})["em"])


def test_ultrarag_output_shape():
    per_query = score_answers({"0": ["a b"], "1": ["c"]}, {"0": "a b", "1": "d"}, ["em", "f1"])
    out = ultrarag_output(per_query)
    assert list(out) == ["em", "f1", "avg_em", "avg_f1"]
    assert out["em"] == [1.0, 0.0] and out["avg_em"] == 0.5 and out["avg_f1"] == 0.5


def test_ultrarag_output_matches_ultrarag_compute_metrics_on_its_own_example():
    gt = [["14 December 1972 UTC", "December 1972"], ["Bobby Scott", "Bob Russell"]]
    pred = ["December 14, 1973", "The documents do not provide information about the author of the lyrics to "
                                 "\"He Ain't Heavy, He's My Brother.\""]
    refs = {str(i): g for i, g in enumerate(gt)}
    preds = {str(i): p for i, p in enumerate(pred)}
    out = ultrarag_output(score_answers(refs, preds))
    assert out["acc"] == [0.0, 0.0] and out["em"] == [0.0, 0.0] and out["coverem"] == [0.0, 0.0]
    # "14 december 1972 utc" shares 14 and december with "december 14 1973": p 2/3, r 2/4
    assert out["f1"] == [pytest.approx(4 / 7), 0.0]
    assert out["avg_f1"] == pytest.approx(2 / 7)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_parallel_scoring_gives_the_same_values():
    refs = {f"q{i}": [f"answer {i % 7}", "the same"] for i in range(2500)}
    preds = {f"q{i}": f"the answer is {i % 5} the same" for i in range(2500)}
    heard = []
    assert score_answers(refs, preds, processes=2, progress=lambda *a: heard.append(a)) == score_answers(refs, preds)
    assert heard[0] == (2000, 2500) and heard[-1] == (2500, 2500)


def test_compare_answers_has_the_run_comparison_shape():
    refs = {f"q{i}": [f"answer {i}"] for i in range(30)}
    good = {f"q{i}": f"answer {i}" for i in range(30)}
    bad = {f"q{i}": f"answer {i}" if i < 5 else "no idea" for i in range(30)}
    result = compare_answers(refs, bad, {"good": good}, ["em", "f1"], resamples=500, seed=1,
                             weights={q: 1.0 for q in refs}, baseline_name="bad")
    assert result["baseline"] == "bad" and result["n_queries"] == 30
    [em, f1] = result["comparisons"]["good"]
    assert em["measure"] == "em" and em["A_mean"] == 1.0 and em["B_mean"] == pytest.approx(5 / 30)
    assert em["wins"] == 25 and em["ties"] == 5 and em["significant_corrected"]
    assert {"p_value", "t_p_value", "ci_low", "ci_high", "p_corrected", "missing_a", "missing_b"} <= em.keys()
    assert result["means"]["good"]["em"] == 1.0 and result["weighted"]["bad"]["em"] == pytest.approx(5 / 30)


def test_answers_too_long_for_rouge_l_are_refused_with_their_query():
    from evaluation.engine.answers import MAX_LCS_CELLS, AnswerTooLong

    words = [f"w{i}" for i in range(2100)]
    refs = {"q1": ["short"], "q2": [" ".join(reversed(words))]}
    preds = {"q1": "short", "q2": " ".join(words + words)}
    assert 2100 * 4200 > MAX_LCS_CELLS
    with pytest.raises(AnswerTooLong, match="query 'q2': rouge-l would compare 2,100 with 4,200 shared tokens"):
        score_answers(refs, preds, ["rouge-l"])
    # the linear measures score it
    assert score_answers(refs, preds, ["f1", "rouge-1", "rouge-2"])["rouge-1"]["q2"] == pytest.approx(2 / 3)
