"""The sentence-transformers backend and its fast path, on torch's CPU device in .venv-torch: the same vectors as
SentenceTransformer.encode and the numpy encoder, and float16 cosines within 1e-3 of float32."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judgments.judges import SemanticJudge, minilm

from .conftest import context
from .torch_env import run_in_torch_env

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "data" / "judges" / "minilm_reference.json"
PAIR = ("RAG pairs retrieval with generation for more accurate answers.",
        "RAG combines retrieval with generation for better accuracy")

SCRIPT = """
import copy, json, os, sys
from judgments.judges import SemanticJudge, JudgeContext
from judgments.judges.embedders import SentenceTransformersEmbedder, make_embedder
from judgments.judges.torch_encoder import FastEncoder
from judgments.lib.scales import BINARY

given = json.load(sys.stdin)
texts = given["texts"]
auto = make_embedder("sentence-transformers", model_path=given["model_zip"])  # device "auto": no CUDA here
model = auto.sentence_transformer()
reference = model.encode(texts, batch_size=32, show_progress_bar=False)  # sentence-transformers' own pipeline


def fast(dtype):
    # Small chunks and batches, so that sorting, several batches per chunk and several chunks are all exercised.
    encoder = FastEncoder(copy.deepcopy(model[0].auto_model), auto.folder / "tokenizer.json",
                          max_length=auto.max_length, device="cpu", dtype=dtype, batch_tokens=600, chunk_texts=3)
    return encoder.encode(texts)


half = "float16"
try:
    v16 = fast("float16")
except RuntimeError as problem:  # an op torch's CPU lacks in half precision
    half, v16 = "bfloat16", fast("bfloat16")
fast_embedder = SentenceTransformersEmbedder("cpu", model_path=given["model_zip"], fast=True)
judge = SemanticJudge({"backend": "sentence-transformers"}, embedder=auto)
verdict = judge.judge(JudgeContext("q", given["pair"][0], BINARY, references=(given["pair"][1],)))
print(json.dumps({
    "device": auto.device, "describe": auto.describe(), "fast_describe": fast_embedder.describe(),
    "cache_model": auto.cache_model, "folder": str(auto.folder), "offline": os.environ.get("HF_HUB_OFFLINE"),
    "reference": reference.tolist(), "encode": auto.encode(texts).tolist(), "fast32": fast("float32").tolist(),
    "fast_embedder": fast_embedder.encode(texts).tolist(), "half": half, "fast16": v16.tolist(),
    "judge": judge.describe()["embedder"], "score": verdict.score,
}))
"""


@pytest.fixture(scope="module")
def torch_side(semantic_available, tmp_path_factory):
    texts = [sentence["text"] for sentence in json.loads(REFERENCE.read_text(encoding="utf-8"))["sentences"]]
    texts += ["Short.", "A medium sentence about evaluating search engines with graded relevance judgments.",
              " ".join(["word"] * 300)]
    cache = tmp_path_factory.mktemp("models")
    found = run_in_torch_env(SCRIPT, {"texts": texts, "model_zip": str(minilm.model_zip()), "pair": PAIR},
                             env={"VERDICT_MODEL_CACHE": str(cache)})
    return texts, cache, {key: np.array(value) if isinstance(value, list) else value for key, value in found.items()}


def test_the_backend_runs_on_the_cpu_offline_from_the_packaged_model(torch_side):
    _texts, cache, found = torch_side
    assert found["device"] == "cpu" and found["offline"] == "1"
    assert Path(found["folder"]).parent == cache and (Path(found["folder"]) / "model.safetensors").is_file()
    assert found["describe"] == {"backend": "sentence-transformers", "model": "sentence-transformers/all-MiniLM-L6-v2",
                                 "max_length": 256, "device": "cpu", "path": "encode", "dtype": "float32"}
    assert found["fast_describe"]["path"] == "fast" and found["fast_describe"]["dtype"] == "float32"
    assert found["cache_model"] == "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2"
    assert found["judge"] == found["describe"]


def test_the_fast_path_in_float32_equals_sentence_transformers_and_the_numpy_encoder(torch_side):
    texts, _cache, found = torch_side
    numpy_vectors = minilm.load().encode(texts)

    assert found["fast32"].shape == (len(texts), 384)
    assert np.abs(found["fast32"] - found["reference"]).max() < 1e-5
    assert np.abs(found["fast32"] - numpy_vectors).max() < 1e-5
    assert np.abs(found["fast_embedder"] - found["reference"]).max() < 1e-5
    assert np.abs(found["encode"] - numpy_vectors).max() < 1e-5
    assert np.allclose(np.linalg.norm(found["fast32"], axis=1), 1, atol=1e-6)


def test_half_precision_cosines_are_within_1e_3_of_float32(torch_side):
    _texts, _cache, found = torch_side
    assert found["half"] == "float16"  # torch's CPU runs every op of the model in float16
    low, full = found["fast16"], found["fast32"]
    assert np.abs(low @ low.T - full @ full.T).max() < 1e-3
    assert (np.sum(low * full, axis=1) > 1 - 1e-3).all()
    assert np.abs(low - full).max() > 0  # it did run in half precision


def test_the_semantic_judge_scores_a_pair_as_with_the_numpy_backend(torch_side, semantic_available):
    _texts, _cache, found = torch_side
    numpy_score = SemanticJudge().judge(context(PAIR[0], PAIR[1])).score
    assert found["score"] == pytest.approx(numpy_score, abs=1e-5)


def test_the_gpu_benchmark_runs_on_the_cpu_from_the_float16_export(semantic_available, tmp_path):
    folder = tmp_path / "minilm-fp16"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_minilm.py"), "--to", str(folder)], check=True,
                   capture_output=True)
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    run = ("import runpy, sys; sys.argv = ['gpu_embed.py', '--docs', '8', '--model', sys.argv[1]]; "
           "runpy.run_path('benchmarks/gpu_embed.py', run_name='__main__')")
    found = run_in_torch_env(run, {}, args=[str(folder)])

    assert size < 64 << 20  # what a device run carries
    assert found["device"] == "cpu" and found["docs"] == 8 and found["mean_word_pieces"] == 256
    assert found["fast_fp16_docs_per_s"] > 0 and found["st_fp32_docs_per_s"] > 0
    assert found["max_pairwise_cosine_diff"] < 1e-3 and found["max_one_minus_cosine_fp16_vs_fp32"] < 1e-3
