"""The semantic judge's GPU figure (issue #29, item 3): documents a second for sentence-transformers' ``encode``
(float32 and float16) and for the fast path (`judgments/judges/torch_encoder.py`, float16), on one machine in
one run, and how far float16 moves the vectors. Installs nothing, reads nothing from the network: the model comes
from a folder made by ``benchmarks/export_minilm.py`` (float16 safetensors, 44 MB).

    .venv/bin/python benchmarks/export_minilm.py                     # here: writes benchmarks/data/minilm-fp16/
    python benchmarks/gpu_embed.py                                   # on the GPU machine (torch, sentence-
                                                                     # transformers, tokenizers present)
    .venv-torch/bin/python benchmarks/gpu_embed.py --docs 64         # a dry run on the CPU

Documents: 200 words each from a seeded Zipf-like vocabulary (as ``benchmarks/judges.py``: about 260 word pieces,
cut to the model's 256). Each path is warmed up on 256 documents first (fewer in a dry run), then timed once over
all of them (CUDA synchronised before and after). The fp16-vs-fp32 figures compare the fast path's float16 vectors with
sentence-transformers' float32 ones from the same weights: the largest 1 - cosine between a document's two
vectors, and the largest change of a cosine between two documents (over the first 1,000). Target: the fast path at
least 10,000 documents a second on an H200 and 5 times ``encode``'s; the cosines within 1e-3. The last line of
output is JSON.
"""

import argparse
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

TARGET_DOCS_PER_SECOND, TARGET_SPEEDUP, TARGET_COSINE = 10_000, 5.0, 1e-3
WARM_UP = 256


def documents(n: int, words: int, seed: int = 29) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, k)) for k in rng.integers(2, 11, 5_000)]
    zipf = 1 / np.arange(1, len(vocabulary) + 1)
    zipf /= zipf.sum()
    return [" ".join(vocabulary[i] for i in rng.choice(len(vocabulary), words, p=zipf)).capitalize() + "."
            for _ in range(n)]


def timed(torch, device: str, function, texts: list[str]) -> tuple[float, np.ndarray]:
    function(texts[:min(WARM_UP, max(8, len(texts) // 8))])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    vectors = np.asarray(function(texts), dtype=np.float32)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=ROOT / "benchmarks" / "data" / "minilm-fp16")
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--device", default="auto", help="auto (cuda when there is one), cpu, cuda")
    parser.add_argument("--batch-size", type=int, default=32, help="sentence-transformers encode's batch size")
    options = parser.parse_args()
    if not (options.model / "modules.json").is_file():
        raise SystemExit(f"no model at {options.model}: run `.venv/bin/python benchmarks/export_minilm.py` first "
                         f"and carry benchmarks/data/minilm-fp16 to this machine")

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    from judgments.judges.torch_encoder import FastEncoder

    device = ("cuda" if torch.cuda.is_available() else "cpu") if options.device == "auto" else options.device
    texts = documents(options.docs, options.words)
    model = SentenceTransformer(str(options.model), device=device, local_files_only=True,
                                model_kwargs={"dtype": torch.float32})
    max_length = model.max_seq_length
    pieces = [min(len(ids), max_length) for ids in model.tokenizer(texts[:1000])["input_ids"]]

    def encode(batch: list[str]) -> np.ndarray:
        return model.encode(batch, batch_size=options.batch_size, show_progress_bar=False, convert_to_numpy=True)

    rows = {}
    seconds, st32 = timed(torch, device, encode, texts)
    rows["sentence-transformers encode, float32"] = seconds
    model.half()
    seconds, _st16 = timed(torch, device, encode, texts)
    rows["sentence-transformers encode, float16"] = seconds
    fast = FastEncoder(copy.deepcopy(model[0].auto_model), options.model / "tokenizer.json", max_length=max_length,
                       device=device, dtype="float16")
    seconds, fast16 = timed(torch, device, fast.encode, texts)
    rows["fast path, float16"] = seconds

    per_second = {name: len(texts) / value for name, value in rows.items()}
    encode_best = max(per_second["sentence-transformers encode, float32"],
                      per_second["sentence-transformers encode, float16"])
    fast_per_second = per_second["fast path, float16"]
    own = 1 - np.sum(fast16 * st32, axis=1)
    sample = slice(0, 1000)
    pairwise = np.abs(fast16[sample] @ fast16[sample].T - st32[sample] @ st32[sample].T)
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "CPU"

    print(f"{len(texts):,} documents of {options.words} words ({np.mean(pieces):.0f} word pieces on average, cut to "
          f"{max_length}) on {device} ({gpu}); torch {torch.__version__}, sentence-transformers "
          f"{sentence_transformers.__version__}\n")
    print("| path | seconds | docs/s |\n|---|---:|---:|")
    for name, value in rows.items():
        print(f"| {name} | {value:.2f} | {per_second[name]:,.0f} |")
    speedup = fast_per_second / encode_best
    print(f"\nfast path: {speedup:.1f}x encode's best; float16 against float32: 1 - cosine at most {own.max():.1e}, "
          f"cosines between documents moved by at most {pairwise.max():.1e}")
    print(json.dumps({
        "device": device, "gpu": gpu, "docs": len(texts), "words": options.words,
        "mean_word_pieces": round(float(np.mean(pieces)), 1), "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__, "st_encode_batch_size": options.batch_size,
        "st_fp32_docs_per_s": round(per_second["sentence-transformers encode, float32"], 1),
        "st_fp16_docs_per_s": round(per_second["sentence-transformers encode, float16"], 1),
        "fast_fp16_docs_per_s": round(fast_per_second, 1), "speedup_vs_encode": round(speedup, 2),
        "max_one_minus_cosine_fp16_vs_fp32": float(own.max()), "max_pairwise_cosine_diff": float(pairwise.max()),
        "target_met": bool(fast_per_second >= TARGET_DOCS_PER_SECOND and speedup >= TARGET_SPEEDUP
                           and pairwise.max() < TARGET_COSINE and own.max() < TARGET_COSINE),
    }))


if __name__ == "__main__":
    main()
