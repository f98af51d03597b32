"""The semantic judge with the real packaged model: embeddings equal sentence-transformers', known pairs."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judgments.judges import (EMPTY_DOCUMENT, NO_REFERENCES, JudgeSettingsError, JudgeUnavailable, SemanticJudge,
                              availability)
from judgments.judges import minilm
from judgments.lib.scales import Grade, make_scale

from .conftest import BINARY, GRADED, context

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "data" / "judges" / "minilm_reference.json"


@pytest.fixture(scope="module")
def encoder(semantic_available):
    return minilm.load()


def test_embeddings_equal_sentence_transformers_within_1e_5(encoder):
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = [sentence["text"] for sentence in data["sentences"]]
    expected = np.array([sentence["embedding"] for sentence in data["sentences"]])

    together = encoder.encode(texts)
    one_by_one = np.vstack([encoder.encode([text]) for text in texts])

    assert data["max_seq_length"] == encoder.max_seq_length == 256
    assert max(sentence["word_pieces"] for sentence in data["sentences"]) > 256  # truncation is covered
    assert np.abs(together - expected).max() < 1e-5
    assert np.abs(one_by_one - expected).max() < 1e-5
    assert together.dtype == np.float32 and np.allclose(np.linalg.norm(together, axis=1), 1, atol=1e-6)


def test_long_texts_are_cut_to_256_word_pieces(encoder):
    text = " ".join(["retrieval evaluation"] * 400)
    assert len(encoder.token_ids([text])[0]) == 256
    assert np.allclose(encoder.encode([text]), encoder.encode([text + " and something else entirely"]), atol=1e-6)


def test_the_model_is_read_from_the_packages_zip_without_importing_the_package(semantic_available):
    code = ("import sys; from judgments.judges import minilm; minilm.load(); "
            "assert 'all_minilm_l6_v2' not in sys.modules; print(minilm.model_zip().name)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "model.zip\n"  # no banner, no extraction message


def test_a_paraphrase_is_relevant_and_an_unrelated_text_is_not(encoder):
    judge = SemanticJudge()
    reference = "RAG combines retrieval with generation for better accuracy"
    close = judge.judge(context("RAG pairs retrieval with generation for more accurate answers.", reference))
    far = judge.judge(context("The recipe needs two eggs, flour and a pinch of salt.", reference))

    assert (close.grade, far.grade) == (1, 0)
    assert close.score >= 0.75 > far.score
    assert far.score < 0.2
    assert "reference 1 of 1" in close.rationale and "relevant at 0.75" in close.rationale


def test_the_score_is_the_best_cosine_over_the_references(encoder):
    judge = SemanticJudge()
    document = "Paris is the capital and largest city of France."
    both = judge.judge(context(document, "Bananas are yellow fruit.", "The capital of France is Paris."))
    alone = judge.judge(context(document, "The capital of France is Paris."))

    assert both.score == pytest.approx(alone.score, abs=1e-6)
    assert "reference 2 of 2" in both.rationale


def test_graded_mode_maps_similarity_bands_onto_the_scale(encoder):
    judge = SemanticJudge(mode="graded", bands=[0.2, 0.5, 0.8])
    reference = "The Eiffel Tower is in Paris."
    documents = ["Stock markets fell sharply on Monday.", "Paris has many museums and monuments.",
                 "The Eiffel Tower is a landmark in Paris.", "The Eiffel Tower is in Paris."]
    verdicts = judge.batch_judge([context(d, reference, scale=GRADED) for d in documents])
    expected = [int(np.searchsorted([0.2, 0.5, 0.8], v.score, side="right")) for v in verdicts]

    assert [v.grade for v in verdicts] == expected
    assert verdicts[0].grade == 0 and verdicts[-1].grade == 3
    assert verdicts[-1].rationale.startswith("Grade 3 (Perfect)") and "0.8 and above" in verdicts[-1].rationale


def test_default_bands_run_evenly_from_0_35_to_the_threshold():
    judge = SemanticJudge(mode="graded", threshold=0.8)
    assert judge.bands(GRADED) == pytest.approx([0.35, 0.575, 0.8])
    assert judge.bands(BINARY) == [0.8]
    five = make_scale("custom", [Grade(v, str(v)) for v in range(5)])
    assert judge.bands(five) == pytest.approx([0.35, 0.5, 0.65, 0.8])


def test_binary_mode_on_a_graded_scale_gives_the_relevant_grade(encoder):
    pair = context("The capital of France is Paris.", "The capital of France is Paris.", scale=GRADED)
    assert SemanticJudge().judge(pair).grade == 3
    assert SemanticJudge(relevant_grade=2).judge(pair).grade == 2


def test_no_references_and_empty_documents_are_could_not_judge(encoder):
    verdicts = SemanticJudge().batch_judge([context("a document"), context("", "a reference"),
                                            context("a document", "a document")])
    assert [v.problem for v in verdicts] == [NO_REFERENCES, EMPTY_DOCUMENT, None]
    assert verdicts[2].score == pytest.approx(1.0, abs=1e-6)


def test_settings_are_validated():
    for bad, message in [({"threshold": 1.5}, "threshold"), ({"mode": "fuzzy"}, "mode: must be one of"),
                         ({"bands": [0.5, 0.4]}, "must rise strictly"), ({"bands": [2.0]}, "between -1 and 1"),
                         ({"bands": []}, "list of numbers")]:
        with pytest.raises(JudgeSettingsError, match=message):
            SemanticJudge(bad)
    with pytest.raises(JudgeSettingsError, match="needs 3 lower bounds"):
        SemanticJudge(mode="graded", bands=[0.5, 0.7]).check_scale(GRADED)
    assert SemanticJudge().describe()["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_without_its_packages_the_judge_is_unavailable_with_the_install_command(monkeypatch):
    real = minilm.importlib.util.find_spec
    monkeypatch.setattr(minilm.importlib.util, "find_spec",
                        lambda name, *args: None if name == "tokenizers" else real(name, *args))
    monkeypatch.setattr(minilm, "_loaded", None)
    found = availability("semantic")

    assert not found.available and "tokenizers" in found.reason and "make judges" in found.install
    with pytest.raises(JudgeUnavailable, match="make judges"):
        SemanticJudge().judge(context("doc", "ref"))
