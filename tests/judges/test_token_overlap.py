"""The token-overlap judge on Evret's documented behaviour (evret 0.0.3's TokenOverlapJudge), worked by hand."""

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgments.judges import (EMPTY_DOCUMENT, NO_REFERENCES, JudgeSettingsError, TokenOverlapJudge, make_judge)
from judgments.judges.overlap import STOPWORDS, token_weight, tokens

from .conftest import BINARY, GRADED, context

# 20 content words, none a stopword (10 of 8 letters or more): past Evret's default min_tokens of 15.
LONG_ANSWER = ("retrieval augmented generation grounds large language model answers using passages fetched external "
               "indexes decoding responses citing sources reduces hallucination markedly")


def score(judge, document, *references, **kwargs):
    return judge.judge(context(document, *references, **kwargs)).score


def test_equal_texts_after_normalising_case_and_spaces_score_one():
    verdict = TokenOverlapJudge().judge(context("  Paris is   the capital ", "paris is the capital"))

    assert (verdict.grade, verdict.score) == (1, 1.0)
    assert "equal" in verdict.rationale


def test_a_negation_on_one_side_only_is_not_relevant_even_when_the_reference_is_a_substring():
    judge = TokenOverlapJudge()

    assert score(judge, "The vaccine is not approved for children.", "the vaccine is approved for children") == 0.0
    assert score(judge, "Approved without conditions", "approved") == 0.0
    assert score(judge, "It is not approved, never was.", "not approved") == 1.0  # both sides negated


def test_cant_is_not_a_negation_because_it_tokenises_to_can_and_t():
    judge = TokenOverlapJudge()

    # "can't" is in Evret's list, but [a-z0-9]+ makes it "can" + "t": the substring step still fires.
    assert score(judge, "You can't renew it online; you can renew it at the desk.", "you can renew it") == 1.0
    assert score(judge, "You cannot renew it online; you can renew it at the desk.", "you can renew it") == 0.0


def test_either_text_inside_the_other_is_relevant():
    judge = TokenOverlapJudge()

    assert score(judge, "Yes: the answer is 42, as computed.", "the answer is 42") == 1.0
    assert score(judge, "the answer", "the answer is 42") == 1.0


def test_short_answers_below_min_tokens_match_only_exactly_or_as_a_substring():
    judge = TokenOverlapJudge()  # min_tokens 15
    reference = "Marie Curie discovered polonium and radium"

    verdict = judge.judge(context("Polonium and radium were discovered by Marie Curie.", reference))
    assert (verdict.grade, verdict.score) == (0, 0.0)
    assert "5 shared content tokens, fewer than 15" in verdict.rationale
    # The same pair with min_tokens 3: all 5 content tokens shared, weights 1.35 (polonium), 1, 1, 1, 1.
    assert score(TokenOverlapJudge(min_tokens=3), "Polonium and radium were discovered by Marie Curie.",
                 reference) == pytest.approx(1.0)


@given(st.text(max_size=200))
def test_tokens_are_evrets_regular_expression_on_the_lower_cased_text(text):
    assert [t.decode() for t in tokens(text.lower())] == re.findall(r"[a-z0-9]+", text.lower())


def test_digits_weigh_more_short_tokens_less_and_long_tokens_more():
    assert [token_weight(t) for t in ("2024", "42", "ab", "cat", "question", "x7")] == [1.5, 1.5, 0.75, 1.0, 1.35, 0.75]


def test_the_weighted_overlap_with_a_digit_token_worked_by_hand():
    judge = TokenOverlapJudge(min_tokens=2, query_boost=False)
    # Reference content tokens: treaty(1) signed(1) 1648(1.5) westphalia(1.35) ended(1) war(1) = 6.85
    # Document shares treaty, signed, 1648: (1 + 1 + 1.5) / 6.85; no two shared tokens adjacent in the text.
    value = score(judge, "Signed in 1648 by many states, the treaty was long.",
                  "The treaty signed 1648 in Westphalia ended the war")
    assert value == pytest.approx(3.5 / 6.85)
    # Without the digits the shared weight is 2 / 5.35: a document with the year scores higher.
    assert score(judge, "Signed by many states, the treaty was long.",
                 "The treaty signed in Westphalia ended the war") == pytest.approx(2 / 5.35)


def test_the_phrase_bonus_counts_the_longest_run_of_reference_tokens_in_the_document():
    judge = TokenOverlapJudge(min_tokens=2, query_boost=False)
    reference = "solar panels convert sunlight electricity efficiently"  # 6 content tokens
    weight = 1 + 1 + 1 + 1.35 + 1.35 + 1.35
    # "convert sunlight electricity" appear as three consecutive content tokens: bonus 0.05 x 2.
    three = score(judge, "Panels that convert sunlight electricity well.", reference)
    assert three == pytest.approx((1 + 1 + 1.35 + 1.35) / weight + 0.10)
    # The same shared tokens, never two in a row: no bonus.
    none = score(judge, "Electricity: panels sunlight, convert!", reference)
    assert none == pytest.approx((1 + 1 + 1.35 + 1.35) / weight)


def test_the_query_boost_adds_a_tenth_when_a_shared_token_is_a_query_word():
    reference = "solar panels convert sunlight electricity efficiently"
    document = "Electricity: panels sunlight, convert!"
    base = score(TokenOverlapJudge(min_tokens=2, query_boost=False), document, reference, query="how do panels work")
    boosted = score(TokenOverlapJudge(min_tokens=2), document, reference, query="how do panels work")
    unrelated = score(TokenOverlapJudge(min_tokens=2), document, reference, query="wind turbines")

    assert boosted == pytest.approx(base + 0.1)
    assert unrelated == pytest.approx(base)


def test_the_query_boost_adds_to_the_score_and_does_not_relax_the_threshold():
    reference = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa " \
                "quebec romeo sierra tango"
    document = "kilo juliet india hotel golf foxtrot echo delta charlie bravo alpha"  # reversed: no phrase bonus
    judge = TokenOverlapJudge(min_tokens=2, overlap_ratio=0.7)
    verdict = judge.judge(context(document, reference, query="alpha"))
    # 11 shared of 20 tokens, all of weight 1 but 'november' (1.35): 11 / 20.35 = 0.54, plus the boost 0.1 = 0.64,
    # below 0.7. The seed's rule (relevant at 0.75 x 0.7 = 0.525) would have called it relevant.
    assert verdict.score == pytest.approx(11 / 20.35 + 0.1)
    assert verdict.grade == 0


def test_scores_are_clamped_to_one():
    judge = TokenOverlapJudge(min_tokens=2)
    verdict = judge.judge(context("cats chase mice quickly every night", "mice cats chase quickly", query="cats"))
    # everything shared (1.0) + phrase bonus 0.05 + query boost 0.1 -> clamped
    assert verdict.score == 1.0


def test_defaults_and_long_answers_reach_the_overlap_step():
    document = "Today " + LONG_ANSWER.replace(" citing sources reduces hallucination markedly", "") + " at scale."
    verdict = TokenOverlapJudge().judge(context(document, LONG_ANSWER))

    # Reference weight 10 x 1.35 + 10 x 1 = 23.5; shared: 15 tokens, exactly min_tokens, all but citing, sources,
    # reduces (1 each), hallucination and markedly (1.35 each); four in a row give the largest phrase bonus, 0.15.
    assert verdict.grade == 1
    assert verdict.score == pytest.approx((23.5 - 3 - 2 * 1.35) / 23.5 + 0.15)
    assert "15 shared content tokens" in verdict.rationale


def test_stopwords_are_settable_and_evrets_list_is_the_default():
    assert {"the", "not", "no", "of"} <= STOPWORDS and "rag" not in STOPWORDS
    reference = "the of and to in"  # stopwords only: nothing to overlap by default
    assert score(TokenOverlapJudge(min_tokens=2), "to the end of it and in", reference) == 0.0
    assert score(TokenOverlapJudge(min_tokens=2, stopwords=[]), "to the end of it and in", reference) > 0.6
    with pytest.raises(JudgeSettingsError, match="stopwords"):
        TokenOverlapJudge(stopwords=["The"])


def test_a_document_is_relevant_when_it_matches_any_reference_and_scores_the_best():
    verdict = TokenOverlapJudge().judge(context("Paris is the capital of France.", "Lyon", "the capital of france"))

    assert (verdict.grade, verdict.score) == (1, 1.0)
    assert "reference 2 of 2" in verdict.rationale


def test_a_relevant_pair_gets_the_highest_grade_of_a_graded_scale_or_the_grade_set():
    pair = context("the answer is 42", "the answer is 42", scale=GRADED)

    assert TokenOverlapJudge().judge(pair).grade == 3
    assert TokenOverlapJudge(relevant_grade=2).judge(pair).grade == 2
    assert TokenOverlapJudge(relevant_grade=2).judge(context("nothing alike", "the answer", scale=GRADED)).grade == 0
    with pytest.raises(JudgeSettingsError, match="relevant_grade: 2 is not a grade"):
        TokenOverlapJudge(relevant_grade=2).judge(context("x", "x", scale=BINARY))


def test_no_references_and_empty_documents_are_could_not_judge_never_a_zero():
    judge = TokenOverlapJudge()
    none = judge.judge(context("Some document"))
    blank = judge.judge(context("Some document", "  ", ""))
    empty = judge.judge(context("   ", "an answer"))

    assert (none.outcome, none.grade, none.problem) == ("could_not_judge", None, NO_REFERENCES)
    assert blank.problem == NO_REFERENCES
    assert (empty.grade, empty.problem) == (None, EMPTY_DOCUMENT)


def test_settings_are_validated_with_the_setting_named():
    for bad, message in [({"min_tokens": 0}, "min_tokens: must be at least 1"),
                         ({"overlap_ratio": 0}, "overlap_ratio: must be > 0"),
                         ({"overlap_ratio": 1.5}, "overlap_ratio"),
                         ({"query_boost": 1}, "query_boost: must be true or false"),
                         ({"min_tokens": True}, "min_tokens: must be a whole number"),
                         ({"min_tokens": "3"}, "min_tokens: must be a whole number"),
                         ({"overlap_ratio": float("nan")}, "finite"),
                         ({"threshold": 0.5}, "unknown setting")]:
        with pytest.raises(JudgeSettingsError, match=message):
            make_judge("token_overlap", bad)


def test_batches_tokenise_each_reference_once_and_reach_20000_pairs_a_second():
    references = ("the treaty of westphalia was signed in 1648 ending the thirty years war in europe",
                  "peace of westphalia 1648")
    documents = [f"document {n}: the peace treaties signed in osnabrueck and muenster in 1648 ended the thirty "
                 f"years war and the eighty years war, number {n} of many" * 3 for n in range(4000)]
    pairs = [context(document, *references, query="peace of westphalia") for document in documents]
    judge = TokenOverlapJudge(min_tokens=5)
    started = time.perf_counter()
    verdicts = judge.batch_judge(pairs)
    seconds = time.perf_counter() - started

    assert len(verdicts) == 4000 and all(v.outcome == "judged" for v in verdicts)
    # The benchmark's target is 20,000 pairs/s; under a loaded test machine, ask for a quarter of it here.
    assert len(pairs) / seconds > 5000
