"""ROUGE in the answer metrics equals rouge-score's own RougeScorer, and the fast normalisation path equals
UltraRAG's regular expressions, on thousands of random texts (#16)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.engine.answers import _normalize_text_regex, normalize_text, score_answer, score_answers

WORDS = ("the a an of in on and to was is by Paris paris running runs runner ran generously generous "
         "happiness happy connection connected connecting 1972 14th U.S. don't it's well-known "
         "state-of-the-art snake_case caf\u00e9 na\u00efve \u00fcber \u5317\u4eac \u041c\u043e\u0441\u043a\u0432\u0430 "
         "x y z go goes going gone studies studying cats cat's").split()


def random_text(rng: random.Random, most: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, most))]
    text = " ".join(words)
    if rng.random() < 0.2:
        text = text.replace(" ", rng.choice([",", ";", " - ", "\t", ".  "]))
    return text


def test_rouge_equals_rouge_scorer_on_thousands_of_random_pairs():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rng = random.Random(16)
    references, predictions, expected = {}, {}, {}
    for i in range(3000):
        refs = [random_text(rng, 15) for _ in range(rng.randint(1, 3))]
        prediction = random_text(rng, 60)
        if rng.random() < 0.3:  # share a run of words with a reference
            prediction += " " + refs[0]
        scores = [scorer.score(normalize_text(r), normalize_text(prediction)) for r in refs]
        expected[str(i)] = [max(s[k].fmeasure for s in scores) for k in ("rouge1", "rouge2", "rougeL")]
        references[str(i)], predictions[str(i)] = refs, prediction
    per_query = score_answers(references, predictions, ["rouge-1", "rouge-2", "rouge-l"])
    differ = [q for q in expected
              if [per_query["rouge-1"][q], per_query["rouge-2"][q], per_query["rouge-l"][q]] != expected[q]]
    assert differ == []  # exactly equal, not approximately


def test_the_unicode_tokenizer_only_changes_rouge_where_rouge_score_drops_characters():
    rng = random.Random(7)
    for _ in range(500):
        refs, prediction = [random_text(rng, 10)], random_text(rng, 30)
        if all(ch.isascii() for ch in prediction + refs[0]):
            assert score_answer(prediction, refs, tokenizer="unicode") == score_answer(prediction, refs)


alphabet = st.sampled_from(list("aent h_'`\u2018\u2019\u00b4.,-\t\n\x00\x07\x1c\x1f\x7f\u00e9\u0130\u212a\u03a3\u5317") +
                           ["the", "an", "a", "The", "AN", "True", "False"])


@settings(max_examples=1500, deadline=None)
@given(text=st.lists(alphabet, max_size=20).map("".join) | st.sampled_from(["True", "False"]))
def test_the_fast_normalisation_equals_ultrarags_regular_expressions(text):
    assert normalize_text(text) == _normalize_text_regex(text)


@pytest.mark.parametrize("text", ["a\x07the", "the\x00a", "an\x1cthe", "x\x7fan", "\u0130the", "the\u212a"])
def test_control_and_special_characters_take_the_regular_expression_path(text):
    assert normalize_text(text) == _normalize_text_regex(text)
