"""The numpy encoder's batching (texts sorted by length, equal lengths attended together, batches spread over the
workers) changes no vector: against each text encoded alone, and against sentence-transformers itself."""

import json
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from judgments.judges import minilm

ROOT = Path(__file__).resolve().parents[2]
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"
WORDS = ("the retrieval system ranks documents for each query and people judge whether they answer it well or not "
         "at all while the model reads every word of the page in order to find what matters most").split()

SENTENCE_TRANSFORMERS = """
import json, sys, tempfile, zipfile
from sentence_transformers import SentenceTransformer
folder = tempfile.mkdtemp()
zipfile.ZipFile(sys.argv[1]).extractall(folder)
model = SentenceTransformer(folder, device="cpu")
print(json.dumps(model.encode(json.load(sys.stdin), batch_size=8).tolist()))
"""


@pytest.fixture(scope="module")
def encoder(semantic_available):
    return minilm.load()


def texts_of_lengths(encoder, rng: random.Random, words: int, count: int) -> list[str]:
    """`count` different texts of `words` common words each: one word piece a word, so all of one length."""
    texts = [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(count)]
    assert len({len(ids) for ids in encoder.token_ids(texts)}) == 1
    return texts


def documents(rng: random.Random, count: int) -> list[str]:
    """Documents of about 200 words in sentences: lengths differing below 256 word pieces, and the first cut at 256."""
    made = []
    for n in range(count):
        words = [rng.choice(WORDS) for _ in range(260 if n == 0 else 180 + 7 * n)]
        made.append(". ".join(" ".join(words[i:i + 12]).capitalize() for i in range(0, len(words), 12)) + ".")
    return made


def test_texts_of_one_length_attended_together_get_the_vectors_each_gets_alone(encoder):
    rng = random.Random(29)
    texts = (texts_of_lengths(encoder, rng, 6, 30) + texts_of_lengths(encoder, rng, 40, 12)
             + documents(rng, 5) + ["", "What is RAG?"])
    rng.shuffle(texts)

    together = encoder.encode(texts)
    alone = np.vstack([encoder.encode([text]) for text in texts])

    assert together.shape == (len(texts), 384) and together.dtype == np.float32
    assert np.abs(together - alone).max() < 1e-6


def test_one_worker_or_two_and_any_batch_size_give_the_same_vectors(encoder, monkeypatch):
    texts = documents(random.Random(7), 9) + texts_of_lengths(encoder, random.Random(8), 10, 20)
    default = encoder.encode(texts)
    monkeypatch.setattr(minilm, "WORKERS", 1)
    monkeypatch.setattr(minilm, "BATCH_TOKENS", 300)
    assert np.abs(encoder.encode(texts) - default).max() < 1e-6


def test_vectors_equal_sentence_transformers_on_documents_and_runs_of_short_texts(encoder):
    if not TORCH_PYTHON.exists():
        pytest.skip("no .venv-torch (Python 3.11 with torch and sentence-transformers; make test builds it)")
    rng = random.Random(15)
    texts = documents(rng, 6) + texts_of_lengths(encoder, rng, 8, 16) + ["Crème brûlée, served cold!"]
    result = subprocess.run([str(TORCH_PYTHON), "-c", SENTENCE_TRANSFORMERS, str(minilm.model_zip())],
                            input=json.dumps(texts), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    expected = np.array(json.loads(result.stdout.splitlines()[-1]), dtype=np.float32)

    lengths = [len(ids) for ids in encoder.token_ids(texts[:6])]
    assert max(lengths) == 256 and len(set(lengths)) > 2  # one text cut, the others of differing lengths
    assert np.abs(encoder.encode(texts) - expected).max() < 1e-5
