"""The automatic judges' speed, against the issue's targets (#15), on the 2-core machine.

    make bench-judges        (or: .venv/bin/python benchmarks/judges.py [--repeat 3] [--semantic-pairs 64]
                              [--peer-python .venv-torch/bin/python] [--cases overlap semantic encoder llm])

Cases:
  * token overlap: 100 queries x 500 documents of 200 words, two reference answers per query (10 and 30
    words), Evret's defaults                                                     -> at least 20,000 pairs/s
  * semantic: documents of 200 words (about 260 word pieces, cut to the model's 256), one reference per query,
    binary mode, all-MiniLM-L6-v2 with the built-in numpy encoder                 -> at least 200 pairs/s
    peer (--peer-python, a Python that has sentence-transformers and torch; .venv-torch/bin/python when it is
    there): the same documents encoded by SentenceTransformer.encode, batch size 32
  * encoder, numpy against torch on the same cores: the built-in encoder's ``encode`` and the peer's
    SentenceTransformer.encode (batch size 32, torch.set_num_threads(2)) on the same 200-word documents, two
    kinds (the generated words above, cut to 256 word pieces, and English-like text of 200 common words, about
    220 pieces, lengths varying), their runs interleaved in one script run so that other load hits both alike;
    the peer is a process kept alive between runs. Also the encoder with one 2-thread BLAS instead of two
    workers of one thread each                         -> numpy at least 0.8x torch's documents a second
  * LLM: 2,000 distinct pairs against the fake OpenAI-compatible server answering in 100 ms, 16 requests in
    flight                                             -> at most 16 s, and no pair asked twice
    then the same 2,000 pairs again: every one from the cache, no request

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

from judgments.judges import JudgeContext, LLMJudge, MemoryCache, SemanticJudge, TokenOverlapJudge, usage  # noqa: E402
from judgments.outbound import Policy  # noqa: E402
from judgments.judges import minilm  # noqa: E402
from judgments.scales import BINARY, GRADED  # noqa: E402

TARGET_OVERLAP_PAIRS_PER_SECOND = 20_000
TARGET_SEMANTIC_PAIRS_PER_SECOND = 200
TARGET_LLM_SECONDS = 16.0
LLM_PAIRS, LLM_LATENCY, LLM_CONCURRENCY = 2_000, 0.1, 16
WORDS = 200
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"


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
import json, sys, time, zipfile, tempfile
from sentence_transformers import SentenceTransformer
texts = json.load(sys.stdin)
folder = tempfile.mkdtemp()
zipfile.ZipFile(sys.argv[2]).extractall(folder)
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
    result = subprocess.run([python, "-c", PEER, str(repeat), str(minilm.model_zip())], input=json.dumps(texts),
                            capture_output=True, text=True, check=True)
    seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return {"pairs": len(texts), "seconds": seconds, "per_second": len(texts) / seconds}


ENGLISH = """the of and to a in is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so no will more can who its out up about into
them than only other new some time could these two may first then do any like my now over such our man me even most
made after also did many before must through back years where much your way well down should because each just
those people how too little state good very make world still own see men work long get here between both life being
under never day same another know while last might us great old year off come since against go came right used take
three states himself few house use during without again place around however home small found thought went say part
once general high upon school every does got united left number course war until always away something fact though
water less public put think almost hand enough far took head yet government system better set told nothing night end
why called didn't eyes find going look asked later knew point next program city business give group toward young
days let room president side social given present several order national possible rather second face per among form
important often things looking early white case john become large big need four within felt children along saw best
church ever least power development light thing seemed family interest want members mind country area others done
turned although open god service problem certain kind began different door thus help sense means whole matter
perhaps itself york times law human line above name example action company hands local show whether five history
gave today either act feet across taken past quite anything seen having death experience body word half really
week car field words already information tell together college shall money period held keep sure real probably free
seems political cannot behind miss question air office making brought whose special major heard problems federal
became study ago moment available known result street economic boy position reason change south board individual job
society areas west close turn love community true court force full seem wife future age voice center woman control
common policy necessary following front sometimes six girl clear further land able feel mother music party provide
university effect level stood military""".split()


def english_documents(n: int, seed: int = 29) -> list[str]:
    """200 common English words in sentences of 6 to 20, Zipf-like frequencies: about 220 word pieces, so that
    lengths vary below the model's 256 (where the generated words above are all cut to 256)."""
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, len(ENGLISH) + 1)
    weights /= weights.sum()
    documents = []
    for _ in range(n):
        words = rng.choice(ENGLISH, WORDS, p=weights).tolist()
        cuts = np.cumsum(rng.integers(6, 21, WORDS))
        sentences = [" ".join(words[a:b]) for a, b in zip(np.concatenate(([0], cuts)), cuts) if a < WORDS]
        documents.append(" ".join(sentence.capitalize() + rng.choice([".", ".", ".", ",", "?"])
                                  for sentence in sentences))
    return documents


TARGET_ENCODER_RATIO = 0.8
ENCODER_PEER = """
import json, sys, tempfile, time, zipfile
import torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(int(sys.argv[2]))
folder = tempfile.mkdtemp()
zipfile.ZipFile(sys.argv[1]).extractall(folder)
model = SentenceTransformer(folder, device="cpu")
model.encode(["warm up"])
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    texts = json.loads(line)
    started, cpu = time.perf_counter(), time.process_time()
    vectors = model.encode(texts, batch_size=32)
    print(json.dumps({"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu,
                      "vectors": vectors.tolist()}), flush=True)
"""


class EncoderPeer:
    """sentence-transformers in a process of its own, kept alive so that its runs can alternate with ours."""

    def __init__(self, python: str, threads: int) -> None:
        self.process = subprocess.Popen([python, "-c", ENCODER_PEER, str(minilm.model_zip()), str(threads)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.about = json.loads(self.process.stdout.readline())

    def encode(self, texts: list[str]) -> dict:
        self.process.stdin.write(json.dumps(texts) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def __enter__(self) -> "EncoderPeer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def encoder_case(python: str, repeat: int, n: int) -> dict:
    """numpy and torch on the same documents, runs interleaved (which goes first alternates): median wall and CPU
    seconds of each, the median of each repeat's torch/numpy wall ratio, the load average around each kind's runs,
    and the largest difference between the vectors."""
    encoder = minilm.load()
    cores = min(2, os.cpu_count() or 1)
    numpy_ways = {"numpy": (minilm.WORKERS, minilm.BLAS_THREADS), "numpy, 1 worker x 2 BLAS threads": (1, cores)}
    kinds = {"generated words": [pair.document for pair in semantic_documents(n)],
             "English-like": english_documents(n)}
    found = {}
    with EncoderPeer(python, cores) as peer:
        for kind, texts in kinds.items():
            runs: dict[str, list] = {way: [] for way in (*numpy_ways, "torch")}
            loads = []
            encoder.encode(texts[:8])
            for r in range(repeat):
                loads.append(os.getloadavg()[0])
                for way in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    if way == "torch":
                        answer = peer.encode(texts)
                        runs[way].append((answer["seconds"], answer["cpu"]))
                        torch_vectors = np.array(answer["vectors"], dtype=np.float32)
                        continue
                    minilm.WORKERS, minilm.BLAS_THREADS = numpy_ways[way]
                    started, cpu = time.perf_counter(), time.process_time()
                    vectors = encoder.encode(texts)
                    runs[way].append((time.perf_counter() - started, time.process_time() - cpu))
                    minilm.WORKERS, minilm.BLAS_THREADS = numpy_ways["numpy"]
            pieces = [len(ids) for ids in encoder.token_ids(texts)]
            loads.append(os.getloadavg()[0])
            found[kind] = {"docs": len(texts), "pieces": (min(pieces), float(np.mean(pieces)), max(pieces)),
                           "loads": (min(loads), max(loads)),
                           "difference": float(np.abs(vectors - torch_vectors).max()),
                           "ways": {way: {"seconds": statistics.median(t for t, _ in times),
                                          "cpu": statistics.median(c for _, c in times),
                                          "all": [round(len(texts) / t, 1) for t, _ in times],
                                          # a repeat's runs are next to each other: their ratio saw the same load
                                          "ratio": statistics.median(t / mine for (t, _), (mine, _) in
                                                                     zip(runs["torch"], times))}
                                    for way, times in runs.items()}}
    return {"torch": peer.about["torch"], "threads": peer.about["threads"], "kinds": found}


def encoder_rows(found: dict) -> list[str]:
    rows = []
    for kind, case in found["kinds"].items():
        low, mean, high = case["pieces"]
        for way, run in case["ways"].items():
            rate = case["docs"] / run["seconds"]
            if way == "torch":
                label = f"peer: sentence-transformers + torch {found['torch']} CPU, {found['threads']} threads"
                target = ""
            else:
                label = f"encoder: {way}"
                target = (f"{verdict(run['ratio'] >= TARGET_ENCODER_RATIO)} ({run['ratio']:.2f}x torch, the median "
                          f"of the repeats' ratios; >= {TARGET_ENCODER_RATIO}x; "
                          f"{case['ways']['torch']['cpu'] / run['cpu']:.2f}x per CPU-second)")
            rows.append(f"| {label}, {kind} ({mean:.0f} word pieces, {low}-{high}) | {case['docs']:,} | "
                        f"{run['seconds']:.2f} | {run['cpu']:.2f} | {rate:,.1f} | {target} |")
    return rows


def encoder_notes(found: dict) -> list[str]:
    notes = []
    for kind, case in found["kinds"].items():
        rates = "; ".join(f"{way} {run['all']}" for way, run in case["ways"].items())
        notes.append(f"encoder, {kind}: documents/s run by run: {rates}; 1-minute load average "
                     f"{case['loads'][0]:.2f} to {case['loads'][1]:.2f}; numpy's vectors within "
                     f"{case['difference']:.1e} of torch's")
    return notes


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


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--semantic-pairs", type=int, default=64)
    parser.add_argument("--peer-python", default=str(TORCH_PYTHON) if TORCH_PYTHON.exists() else None,
                        help="a Python with sentence-transformers and torch, for the peer rows "
                             "(default: .venv-torch/bin/python when it is there)")
    parser.add_argument("--cases", nargs="+", default=["overlap", "semantic", "encoder", "llm"])
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
    if "encoder" in options.cases:
        if options.peer_python:
            encoder_found = encoder_case(options.peer_python, options.repeat, options.semantic_pairs)
            print("\n".join(encoder_rows(encoder_found)))
        else:
            print("| encoder: numpy against torch | | | | | not measured: no Python with torch (make test builds "
                  ".venv-torch, or --peer-python) |")
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
    print()
    if "semantic" in options.cases:
        print(semantic_note)
    if "encoder" in options.cases and options.peer_python:
        print("\n".join(encoder_notes(encoder_found)))
    if "llm" in options.cases:
        print(llm_note)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
