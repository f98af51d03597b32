"""The automatic judges' speed, against the issue's targets (#15), on the 2-core machine.

    make bench-judges        (or: .venv/bin/python benchmarks/judges.py [--repeat 3] [--semantic-pairs 64]
                              [--peer-python .venv-torch/bin/python] [--cases overlap semantic encoder llm])

Cases:
  * token overlap: 100 queries x 500 documents of 200 words, two reference answers per query (10 and 30
    words), Evret's defaults                                                     -> at least 20,000 pairs/s
  * semantic: documents of 200 words (about 260 word pieces, cut to the model's 256), one reference per query,
    binary mode, all-MiniLM-L6-v2 with the built-in numpy encoder, a new judge each run (nothing from its cache):
    reported, with the GFLOP/s achieved (#29 dropped #15's 200 pairs/s on 2 cores: the CPU bounds any encoder
    to about 30 a second; the target is the encoder's, against torch, below)
  * encoder, numpy against torch on the same cores: the built-in encoder's ``encode`` and the peer's
    SentenceTransformer.encode (batch size 32, torch.set_num_threads(2)) on the same 200-word documents, two
    kinds (the generated words above, cut to 256 word pieces, and English-like text of 200 common words, about
    220 pieces, lengths varying), their runs interleaved in one script run so that other load hits both alike;
    the peer is a process kept alive between runs. Also the encoder with one 2-thread BLAS instead of two
    workers of one thread each                         -> numpy at least 0.8x torch's documents a second
  * LLM: 2,000 distinct pairs against the fake OpenAI-compatible server answering in 100 ms, 16 requests in
    flight                                             -> at most 16 s, and no pair asked twice
    then the same 2,000 pairs again: every one from the cache, no request
  * embedding cache (--cases cache): the semantic judge over 100 queries x 50 documents drawn from 2,000 distinct
    ones, twice with one cache: the share of texts read from the cache in each run (the second: 100%). The
    encoder is a stand-in that hashes each text (the hit rate depends on the texts alone, and the numpy
    encoder would take minutes over 2,000 documents here)
  * GPU (--cases gpu): benchmarks/gpu_embed.py in .venv-torch when its torch sees a CUDA device (the model exported
    by benchmarks/export_minilm.py first); else "not measured: no GPU available"

  * LLM over workers (--cases llm-workers; PostgreSQL BENCH_DATABASE_URL and Redis BENCH_JUDGES_REDIS_URL, db 14):
    a judge run of 20,000 pairs as the app runs it (a job split into chunks of 200, real Celery workers on Redis,
    the endpoint's limits in Redis) against the fake server answering in 100 ms, 16 requests in flight per
    worker, with one worker and with two; requests a minute set above what two workers need
                                                           -> two workers at least 1.8x the pairs/s of one,
                                                              no pair asked twice, the budget never exceeded
    then a short run of 600 pairs on two workers with a budget of 1,200 requests a minute (20 a second), far below
    what they could do: the server's most requests in one second and in any minute -> at most 20 and 1,200
    (run once each: --repeat does not apply)

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
from judgments.judges import minilm  # noqa: E402
from judgments.lib.outbound import Policy  # noqa: E402
from judgments.lib.scales import BINARY, GRADED  # noqa: E402

TARGET_OVERLAP_PAIRS_PER_SECOND = 20_000
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
    minilm.load()
    # A new judge each time: a judge keeps the vectors it made (its embedding cache), and a repeat would read them.
    seconds, cpu, _ = median_run(lambda: SemanticJudge().batch_judge(pairs), repeat)
    encoder = minilm.load()
    pieces = [min(len(ids), encoder.max_seq_length) for ids in encoder.token_ids([p.document for p in pairs])]
    flops = sum(minilm.flops_per_text(n) for n in pieces)
    return {"pairs": len(pairs), "seconds": seconds, "cpu": cpu, "per_second": len(pairs) / seconds,
            "mean_pieces": float(np.mean(pieces)), "gflop_per_pair": flops / len(pairs) / 1e9,
            "gflops": flops / seconds / 1e9}


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
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"})
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


WORKER_PAIRS, WORKER_QUERIES = 20_000, 1_000
TARGET_WORKER_RATIO = 1.8
THROUGHPUT_RPM = 60_000  # 1,000 a second: above the 320 a second two workers can ask (2 x 16 / 0.1 s)
LOW_RPM, LOW_PAIRS = 1_200, 600


def _bench_project():
    """The benchmark's project (kept in the benchmark database): a round of 20,000 pairs, 1,000 queries x 20
    documents of about 150 words, each pair's prompt distinct."""
    from django.contrib.auth import get_user_model

    from judgments.lib.scales import GRADED
    from judgments.models import Document, Pool, PoolPair, Project, Query, QueryCollection, Round, RoundItem
    from judgments.ops import actions

    lead = get_user_model().objects.get_or_create(username="bench-judges-lead")[0]
    project = Project.objects.filter(slug="bench-llm-workers").first()
    if project and RoundItem.objects.filter(round__project=project).count() == WORKER_PAIRS:
        return project, lead, project.rounds.get()
    if project:
        Round.objects.filter(project=project).delete()
        project.delete()
    project = actions.create_project(name="bench-llm-workers", creator=lead, description="benchmarks/judges.py")
    rng = np.random.default_rng(29)
    words = vocabulary(rng)
    zipf = 1 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    per_query = WORKER_PAIRS // WORKER_QUERIES
    collection = QueryCollection.objects.create(project=project, name="queries")
    Query.objects.bulk_create([Query(collection=collection, query_id=f"q{i}", text=text(rng, words, 4, zipf), weight=1.0)
                               for i in range(WORKER_QUERIES)], batch_size=5000)
    Document.objects.bulk_create([Document(project=project, doc_id=f"d{i}", fields={"body": text(rng, words, 150, zipf)})
                                  for i in range(WORKER_PAIRS)], batch_size=2000)
    query_pk = dict(collection.queries.values_list("query_id", "pk"))
    document_pk = dict(project.documents.values_list("doc_id", "pk"))
    pool = Pool.objects.create(project=project, name="pool", query_set=collection)
    pairs = [(f"q{i // per_query}", f"d{i}") for i in range(WORKER_PAIRS)]
    PoolPair.objects.bulk_create([PoolPair(pool=pool, query_id=query_pk[q], doc_id=d, document_id=document_pk[d], best_rank=1,
                                           n_systems=1, priority=0.0) for q, d in pairs], batch_size=5000)
    pair_pk = {(p.query_id, p.doc_id): p.pk for p in pool.pairs.all()}
    guidelines = actions.save_guidelines(project, "# Rules\nGrade how well the document answers the query.", author=lead)[0]
    round = Round.objects.create(project=project, name="bench round", pool=pool, guidelines=guidelines, scale=GRADED.to_json(),
                                 status=Round.Status.OPEN, overlap_share=0)
    RoundItem.objects.bulk_create([RoundItem(round=round, pair_id=pair_pk[(query_pk[q], d)], query_id=query_pk[q],
                                             document_id=document_pk[d], priority=0.0) for q, d in pairs], batch_size=5000)
    return project, lead, round


def llm_workers_case(workers: int, pairs: int, requests_per_minute: int) -> dict:
    """One judge run of `pairs` pairs through the app's job with `workers` real Celery workers (see the docstring):
    its seconds (the job's start to its end, as the database recorded them) and the fake server's counts."""
    import redis
    from bench_django import DATABASE_URL, setup_django

    redis_url = os.environ.get("BENCH_JUDGES_REDIS_URL", "redis://127.0.0.1:6379/14")
    os.environ["CELERY_BROKER_URL"] = redis_url  # this process queues the job there
    setup_django()
    from judgments.models import LLMEndpoint, LLMReply, RoundJudge
    from judgments.ops import automatic
    from judgments.ops.jobs import Job

    project, lead, round = _bench_project()
    redis.Redis.from_url(redis_url).flushdb()
    environment = {**os.environ, "DATABASE_URL": DATABASE_URL, "CELERY_BROKER_URL": redis_url, "DEBUG": "true",
                   "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8", "LOG_LEVEL": "WARNING", "MEDIA_ROOT": "/tmp/bench-judges-media"}
    with ServerProcess() as server:
        LLMEndpoint.objects.update_or_create(project=project, defaults={
            "base_url": server.base_url, "model": "fake", "max_in_flight": 64, "requests_per_minute": requests_per_minute,
            "tokens_per_minute": 0})
        RoundJudge.objects.filter(round=round).delete()
        LLMReply.objects.filter(project=project, model="fake").delete()  # nothing from the cache: every pair is asked
        judge = automatic.add_judge(round, name="gpt", kind="llm", settings={"concurrency": LLM_CONCURRENCY,
                                                                            "max_retries": 0})
        logs = [Path(f"/tmp/bench-judges-worker-{n}.log") for n in range(workers)]
        processes = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo",
                                       "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                                       "-n", f"bench{n}@%h"], cwd=ROOT, env=environment, stdout=log.open("w"),
                                      stderr=subprocess.STDOUT) for n, log in enumerate(logs)]
        try:
            deadline = time.monotonic() + 60
            while not all("ready." in log.read_text() for log in logs):
                if time.monotonic() > deadline:
                    sys.exit(f"the workers did not start: see {logs}")
                time.sleep(0.2)
            choice = automatic.PairChoice("all") if pairs >= WORKER_PAIRS else automatic.PairChoice("sample", pairs, 0)
            job = automatic.start_run(judge, choice, user=lead)
            while True:
                job.refresh_from_db()
                if job.is_finished:
                    break
                time.sleep(0.5)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=30)
        stats = server.stats()
    if job.state == Job.State.FAILED:
        sys.exit(f"the run failed: {job.error}")
    seconds = (job.finished_at - job.started_at).total_seconds()
    chunk_workers = len(set(job.chunks.values_list("worker", flat=True)))
    return {"workers": workers, "pairs": pairs, "seconds": seconds, "per_second": pairs / seconds,
            "judged": job.result["judged"], "asked": stats["requests"], "asked_twice": stats["requests"] - stats["distinct"],
            "max_in_flight": stats["max_in_flight"], "max_per_second": stats["max_per_second"],
            "max_per_minute": stats["max_per_minute"], "chunk_workers": chunk_workers}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--semantic-pairs", type=int, default=64)
    parser.add_argument("--peer-python", default=str(TORCH_PYTHON) if TORCH_PYTHON.exists() else None,
                        help="a Python with sentence-transformers and torch, for the peer rows "
                             "(default: .venv-torch/bin/python when it is there)")
    parser.add_argument("--worker-pairs", type=int, default=WORKER_PAIRS, help="pairs of the llm-workers runs (at most 20,000)")
    parser.add_argument("--cases", nargs="+", default=["overlap", "semantic", "encoder", "llm", "cache", "gpu"],
                        help="overlap, semantic, encoder, llm, cache, gpu, llm-workers (needs PostgreSQL and Redis)")
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
              f"reported (the target is the encoder's, against torch: below) |")
        semantic_note = (f"semantic: {found['gflop_per_pair']:.2f} GFLOP per document, {found['gflops']:.1f} GFLOP/s "
                         f"achieved on {os.cpu_count()} cores: the CPU bounds what any encoder does here")
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
    if "cache" in options.cases:
        found = embedding_cache_case()
        for run, name in ((found["first"], "first run"), (found["second"], "the same pairs again")):
            again = run is found["second"]
            outcome = f"{verdict(run['embedded'] == 0 and run['hit_rate'] == 1)} (100%): " if again else ""
            print(f"| semantic, embedding cache, {CACHE_QUERIES} queries x {CACHE_DOCUMENTS} documents drawn from "
                  f"{CACHE_DISTINCT:,} ({found['documents']:,} used), {name} | {found['pairs']:,} | {run['seconds']:.2f} | "
                  f"{run['cpu']:.2f} | {found['pairs'] / run['seconds']:,.0f} | {outcome}hit rate {run['hit_rate']:.1%} "
                  f"({run['embedded']:,} texts embedded, {run['cached']:,} read from the cache) |")
    if "llm-workers" in options.cases:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        n = options.worker_pairs
        one, two = llm_workers_case(1, n, THROUGHPUT_RPM), llm_workers_case(2, n, THROUGHPUT_RPM)
        for found in (one, two):
            limit = THROUGHPUT_RPM / 60
            print(f"| LLM run in the app, {found['workers']} Celery worker{'s' if found['workers'] > 1 else ''} (Redis), "
                  f"fake endpoint 100 ms, {LLM_CONCURRENCY} in flight each | {found['pairs']:,} | {found['seconds']:.1f} | | "
                  f"{found['per_second']:,.0f} | {found['judged']:,} judged, {found['asked_twice']} asked twice, "
                  f"at most {found['max_per_second']} a second ({verdict(found['max_per_second'] <= limit)}: "
                  f"budget {THROUGHPUT_RPM:,} a minute = {limit:,.0f} a second) |")
        ratio = two["per_second"] / one["per_second"]
        ok = ratio >= TARGET_WORKER_RATIO and one["asked_twice"] == two["asked_twice"] == 0 and \
            one["judged"] == two["judged"] == n
        print(f"| LLM run: two workers against one | | | | {ratio:.2f}x | {verdict(ok)} (>= {TARGET_WORKER_RATIO}x, "
              f"no pair asked twice) |")
        low = llm_workers_case(2, LOW_PAIRS, LOW_RPM)
        ok = low["max_per_second"] <= LOW_RPM / 60 and low["max_per_minute"] <= LOW_RPM and low["asked_twice"] == 0
        print(f"| LLM run, 2 workers, budget {LOW_RPM:,} requests a minute | {low['pairs']:,} | {low['seconds']:.1f} | | "
              f"{low['per_second']:,.1f} | {verdict(ok)} (server saw at most {low['max_per_second']} in a second, "
              f"<= {LOW_RPM // 60}; {low['max_per_minute']:,} in any minute, <= {LOW_RPM:,}) |")
        workers_note = (f"LLM over workers: chunks taken by {one['chunk_workers']} and {two['chunk_workers']} worker(s); "
                        f"at most {one['max_in_flight']} and {two['max_in_flight']} requests in flight")
    print()
    if "gpu" in options.cases:
        print(gpu_line())
    if "llm-workers" in options.cases:
        print(workers_note)
    if "semantic" in options.cases:
        print(semantic_note)
    if "encoder" in options.cases and options.peer_python:
        print("\n".join(encoder_notes(encoder_found)))
    if "llm" in options.cases:
        print(llm_note)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
