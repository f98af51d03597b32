"""The docs' layout for more than one machine (docs/operators/production.md), on loopback: nginx (Debian's package)
balancing two gunicorn nodes round robin, two Celery workers, one beat, PostgreSQL, Redis (broker, cache, sessions,
the API's rate counts) and an S3 bucket (moto's server). Each node, worker and beat is a machine: a working folder of
its own (its cwd, TMPDIR, HOME, MEDIA_ROOT, VERDICT_VAR_DIR) and the process it runs there, started as the Dockerfile
and docker-compose.yml start theirs, with production settings (DEBUG off, a real SECRET_KEY, the same on every
machine). They share nothing else.

Through the balancer: a rater grades on both nodes with one session; a run uploaded through one node is imported on
one worker and evaluated on the other; the round's qrels have one ETag on both nodes, and each answers 304 to it; the
API's rate limit counts requests across nodes; a worker killed with -9 mid-job has its job queued again and finished by
the other; and the machines' folders end with nothing in them but their logs.

Which node answered a request is read from the balancer's access log ($upstream_addr), found by a header each request
carries. What differs from machines of their own: one host name (the workers are told apart by their Celery node names,
their pids by their process trees), and JOB_STALE_AFTER_SECONDS=30, API_RATE_LIMIT=10 so that the test is short.
"""

import http.client
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.api.test_rate_limit import early_in_a_minute
from tests.factory import trec_run
from tests.s3 import CREDENTIALS, free_port, make_bucket

from .client import Reply, SiteClient
from .compose import command_argv, load_compose, read_dockerfile
from .conftest import REDIS_URL
from .test_make_run import answers

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
NGINX = Path("/usr/sbin/nginx")
HOST = "verdict.example.com"
NODES, WORKERS = ("node-1", "node-2"), ("worker-1", "worker-2")
API_RATE_LIMIT, JOB_STALE_AFTER_SECONDS = 10, 30
# The round every test works on: q1's pairs are graded when the cluster starts, the rest are left to the rater.
PAIRS = {f"q{q}": [f"d{q}{d}" for d in range(1, 5)] for q in range(1, 4)}
SETUP = """
import json
from api.models import ApiToken, Scope
from judgments.ops import grading
from tests.factory import PASSWORD, Role, add_member, make_project, make_round, make_user
lead, rater = make_user("lena"), make_user("ravi")
project = make_project(lead)
add_member(project, rater, Role.RATER)
round = make_round(project, lead, [rater], PAIRS)
for item in round.items.filter(query__query_id="q1").select_related("document"):
    grading.record(item, rater, grading.Verdict(grade=int(item.document.doc_id[-1]) % 4))
tokens = {use: ApiToken.issue(user=lead, project=project, name=use, scope=Scope.WRITE)[1] for use in ("qrels", "rate", "runs")}
print(json.dumps({"slug": project.slug, "round": str(round.uuid), "password": PASSWORD, "tokens": tokens}))
"""
# A job long enough to be killed halfway: the worker self-check waiting `pause` seconds after each of its 3 steps.
START_SELFCHECK = """
from judgments.ops.jobs import start_job
from judgments.models import Project
project = Project.objects.get(slug=SLUG)
print(start_job(kind="selfcheck", project=project, owner=project.memberships.get(role="lead").user, params={"pause": 3}).uuid)
"""


@dataclass
class Machine:
    """A machine of the cluster: a working folder of its own and the process it runs there."""

    name: str
    folder: Path
    env: dict[str, str]
    process: subprocess.Popen | None = None

    @classmethod
    def make(cls, base: Path, name: str, shared: dict[str, str]) -> "Machine":
        folder = base / name
        for place in ("tmp", "home", "log"):
            (folder / place).mkdir(parents=True)
        own = {"TMPDIR": folder / "tmp", "HOME": folder / "home", "MEDIA_ROOT": folder / "media", "VERDICT_VAR_DIR": folder / "var"}
        return cls(name, folder, {**shared, **{key: str(path) for key, path in own.items()}})

    @property
    def log(self) -> Path:
        return self.folder / "log" / f"{self.name}.log"

    def start(self, argv: list[str]) -> None:
        # A session of its own, so that a signal to its group reaches gunicorn's and celery's child processes.
        with self.log.open("a") as log:
            self.process = subprocess.Popen(argv, cwd=self.folder, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def run(self, argv: list[str]) -> str:
        """A command run to its end here, as an operator would (migrate, a shell script); its output."""
        with self.log.open("a") as log:
            done = subprocess.run(argv, cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=log, text=True,
                                  timeout=300)
        assert done.returncode == 0, f"{argv[:3]} failed on {self.name}:\n{self.log.read_text()[-3000:]}"
        return done.stdout

    def shell(self, script: str, **names) -> str:
        """A script run by `manage.py shell` here, with `names` defined first; the last line it prints."""
        code = "".join(f"{name} = {value!r}\n" for name, value in names.items()) + script
        return self.run(["python", str(ROOT / "manage.py"), "shell", "-c", code]).strip().splitlines()[-1]

    def pids(self) -> set[int]:
        """Its process and their children (gunicorn's workers, celery's pool)."""
        found, todo = set(), [self.process.pid]
        while todo:
            pid = todo.pop()
            found.add(pid)
            try:
                todo += [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
            except FileNotFoundError:
                pass
        return found

    def stop(self, how: int = signal.SIGTERM) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, how)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class Job:
    state: str
    worker: str
    attempts: int
    error: str
    uuid: str


@dataclass
class Cluster:
    machines: dict[str, Machine]
    balancer: Machine
    port: int
    upstreams: dict[str, str]  # "127.0.0.1:port" -> node
    certificate: Path
    database: object  # a psycopg connection to the cluster's database
    bucket: object
    slug: str
    round: str
    password: str
    tokens: dict[str, str]
    workers_host: str = field(default_factory=socket.gethostname)

    def browser(self, **headers: str) -> SiteClient:
        """A browser, through the balancer over HTTPS; each request carries a trace id the balancer logs."""
        context = ssl.create_default_context(cafile=self.certificate)
        return SiteClient(HOST, lambda: http.client.HTTPSConnection("127.0.0.1", self.port, timeout=60, context=context),
                          lambda: {"X-Trace": uuid.uuid4().hex, **headers})

    def api(self, token: str) -> SiteClient:
        return self.browser(Authorization=f"Bearer {self.tokens[token]}")

    def node_of(self, reply: Reply) -> str:
        """The node that answered, from the balancer's access log (written once the answer is sent)."""
        trace = reply.sent["X-Trace"]
        deadline = time.monotonic() + 10
        while not (found := re.search(rf"^{trace} (\S+) ", (self.balancer.folder / "access.log").read_text(), re.MULTILINE)):
            assert time.monotonic() < deadline, f"request {trace} is not in the balancer's log"
            time.sleep(0.05)
        return self.upstreams[found.group(1)]

    def job(self, job_uuid: str) -> Job:
        row = self.database.execute("SELECT state, worker, attempts, error FROM judgments_job WHERE uuid = %s", [job_uuid]).fetchone()
        return Job(*row, uuid=job_uuid)

    def wait_for_job(self, job_uuid: str, states: set[str], timeout: float = 60) -> Job:
        deadline = time.monotonic() + timeout
        while (job := self.job(job_uuid)).state not in states:
            assert time.monotonic() < deadline, f"job {job_uuid} stayed {job.state} for {timeout} s\n{self.explain()}"
            time.sleep(0.2)
        return job

    def worker_of(self, job: Job) -> str:
        """The worker whose processes ran the job (Job.worker is host:pid)."""
        host, pid = job.worker.rsplit(":", 1)
        assert host == self.workers_host
        [name] = [name for name in WORKERS if int(pid) in self.machines[name].pids()]
        return name

    @contextmanager
    def only_consuming(self, worker: str):
        """The other workers stop taking jobs from the queue (Celery's remote control) until the block ends."""
        from celery import Celery

        others = [f"{name}@{self.workers_host}" for name in WORKERS if name != worker]
        control = Celery(broker=REDIS_URL).control
        replies = control.cancel_consumer("celery", destination=others, reply=True, timeout=10)
        assert len(replies) == len(others), replies
        try:
            yield
        finally:
            control.add_consumer("celery", destination=others, reply=True, timeout=10)
            control.app.close()

    def stop(self) -> None:
        for machine in [self.balancer, *self.machines.values()]:
            machine.stop()

    def explain(self) -> str:
        """The end of every machine's log, for failure messages."""
        return "\n".join(f"--- {path.name} ---\n{path.read_text()[-2500:]}"
                         for path in sorted(self.balancer.folder.parent.glob("*/log/*.log")) + [self.balancer.folder / "error.log"])


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """The balancer's TLS certificate for HOST and 127.0.0.1, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.now(UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(hours=1))
                   .not_valid_after(now + timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert, private = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert, private


def readme_balancer() -> str:
    """The nginx configuration of the docs' section on several machines."""
    page = (ROOT / "docs" / "operators" / "production.md").read_text()
    section = page.split("### Several machines", 1)[1].split("\n### ", 1)[0]
    return re.search(r"```nginx\n(.*?)```", section, re.DOTALL).group(1)


def nginx_conf(folder: Path, port: int, nodes: list[int], cert: Path, key: Path) -> Path:
    """The docs' load balancer, with this cluster's nodes, port and certificate, and every path in `folder`."""
    site, changes = readme_balancer(), 0
    for pattern, replacement in ((r"(upstream verdict \{\n)(\s*server \S+;\n)+", r"\1" + "".join(f"    server 127.0.0.1:{node};\n" for node in nodes)),
                                 (r"listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
                                 (r"# ssl_certificate and ssl_certificate_key here", f"ssl_certificate {cert}; ssl_certificate_key {key};")):
        site, done = re.subn(pattern, replacement, site)
        changes += done
    assert changes == 3, f"the docs' balancer changed: make this test follow it\n{site}"
    # Started by root, nginx would run its workers as nobody, who may not enter pytest's private temporary folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "".join(f"    {kind}_temp_path {folder / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = folder / "nginx.conf"
    conf.write_text(f"""{user}daemon off;
worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} notice;
events {{ worker_connections 256; }}
http {{
    log_format balancer '$http_x_trace $upstream_addr $status';
    access_log {folder / "access.log"} balancer;
{temp}{site}}}
""")
    return conf


def wait_until(ready, machine: Machine, what: str, cluster_logs, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if machine.process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{machine.name} did not {what}:\n{cluster_logs()}")
        time.sleep(0.3)


def answers_health(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/healthz", headers={"Host": HOST})
        return connection.getresponse().status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def nginx():
    if not NGINX.exists():
        problem = f"{NGINX} is missing: install Debian's nginx (scripts/ensure-nginx, which `make test` runs)"
        if os.environ.get("CI"):
            pytest.fail(f"{problem}; CI must run the cluster test")
        pytest.skip(problem)
    return NGINX


@pytest.fixture(scope="module")
def cluster(nginx, database_url, s3_endpoint, tmp_path_factory):
    import psycopg
    import redis

    base = tmp_path_factory.mktemp("cluster")
    bucket = make_bucket(s3_endpoint)
    redis.Redis.from_url(REDIS_URL).flushdb()
    python_bin = Path(sys.executable).parent
    shared = {
        # What the image sets, and where it is here: the code (PYTHONPATH for the image's WORKDIR), its collected
        # static files, the interpreter.
        "PATH": f"{python_bin}:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "STATIC_ROOT": str(base / "image-static"),
        # What every machine shares.
        "DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": HOST, "TRUST_X_FORWARDED_PROTO": "true",
        "TRUSTED_PROXY_COUNT": "1", "DATABASE_URL": database_url, "DATABASE_CONN_MAX_AGE": "600",
        "CELERY_BROKER_URL": REDIS_URL, "CACHE_URL": REDIS_URL,
        "STORAGE_BACKEND": "s3", "S3_BUCKET": bucket.name, "S3_ENDPOINT_URL": s3_endpoint, "S3_ADDRESSING_STYLE": "path",
        "S3_PREFIX": "verdict", **CREDENTIALS,
        "API_RATE_LIMIT": str(API_RATE_LIMIT), "JOB_STALE_AFTER_SECONDS": str(JOB_STALE_AFTER_SECONDS),
    }
    machines = {name: Machine.make(base, name, shared) for name in ("admin", *NODES, *WORKERS, "beat")}
    balancer_folder = base / "balancer"
    (balancer_folder / "log").mkdir(parents=True)
    balancer = Machine("balancer", balancer_folder, {"PATH": "/usr/sbin:/usr/bin:/bin"})
    compose = load_compose(ROOT / "docker-compose.yml", {"SECRET_KEY": shared["SECRET_KEY"], "ALLOWED_HOSTS": HOST})
    node_ports = [free_port() for _ in NODES]
    port = free_port()
    cert, key = self_signed_certificate(balancer_folder)
    # The release, once for all machines: the image's static files, then the migrations; then the test's data.
    admin = machines["admin"]
    collect = subprocess.Popen(["python", str(ROOT / "manage.py"), "collectstatic", "--no-input"], env=admin.env,
                               cwd=admin.folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    admin.run(["python", str(ROOT / "manage.py"), "migrate", "--no-input"])
    assert collect.wait(timeout=300) == 0, collect.stderr.read()
    made = json.loads(admin.shell(SETUP, PAIRS=PAIRS))
    everything = Cluster(machines=machines, balancer=balancer, port=port,
                         upstreams={f"127.0.0.1:{p}": name for name, p in zip(NODES, node_ports)}, certificate=cert,
                         database=psycopg.connect(database_url, autocommit=True), bucket=bucket, **made)
    try:
        gunicorn = read_dockerfile(ROOT / "Dockerfile").cmd
        for name, node_port in zip(NODES, node_ports):
            machines[name].start([arg.replace("0.0.0.0:8000", f"127.0.0.1:{node_port}") for arg in gunicorn])
        worker = command_argv(compose["services"]["worker"]["command"])
        for name in WORKERS:  # machines of their own would differ by host name; here by Celery node name
            machines[name].start([*worker, "--hostname", f"{name}@%h"])
        beat = command_argv(compose["services"]["beat"]["command"])
        machines["beat"].start([arg.replace("/tmp/", machines["beat"].env["TMPDIR"] + "/") for arg in beat])
        balancer.start([str(nginx), "-e", str(balancer_folder / "error.log"), "-c", str(nginx_conf(balancer_folder, port, node_ports, cert, key))])

        for name, node_port in zip(NODES, node_ports):
            wait_until(lambda: answers_health(node_port), machines[name], "answer /healthz", everything.explain)
        for name in WORKERS:
            wait_until(lambda: " ready." in machines[name].log.read_text(), machines[name], "start", everything.explain)
        wait_until(lambda: "beat: Starting" in machines["beat"].log.read_text(), machines["beat"], "start", everything.explain)
        wait_until(lambda: answers(port), balancer, "listen", everything.explain)
        yield everything
    finally:
        everything.stop()
        everything.database.close()


def test_a_rater_logs_in_and_grades_on_both_nodes_with_one_session(cluster):
    rater = cluster.browser()
    rater.log_in("ravi", cluster.password)
    session = rater.cookies["sessionid"]
    page = rater.get(f"/p/{cluster.slug}/rounds/{cluster.round}/grade/")
    assert page.status == 200, page.text[-2000:]
    graded_on = []
    for grade in (3, 2, 1, 0):
        # The grading screen's own way: each grade is posted with htmx and answered with the next pair.
        pair = re.search(r'<form id="grade-form"[^>]* action="([^"]+)"', page.text).group(1)
        page = rater.request("POST", pair, {"grade": str(grade)}, headers={"HX-Request": "true"})
        assert page.status == 200 and "Saved: " in page.text, page.text[-2000:]
        graded_on.append(cluster.node_of(page))
    assert sorted(graded_on) == sorted(NODES * 2)
    assert rater.cookies["sessionid"] == session  # no node asked for a new login
    graded = cluster.database.execute("SELECT count(*) FROM judgments_judgment j JOIN auth_user u ON u.id = j.rater_id "
                                      "WHERE u.username = 'ravi'").fetchone()[0]
    assert graded == len(PAIRS["q1"]) + 4


def test_the_rounds_qrels_have_one_etag_on_both_nodes_and_each_answers_304_to_it(cluster):
    api = cluster.api("qrels")
    path = f"/api/v1/projects/{cluster.slug}/rounds/{cluster.round}/judgments.qrels"
    downloads = [api.get(path) for _ in NODES]
    assert [reply.status for reply in downloads] == [200, 200], downloads[0].text
    assert {cluster.node_of(reply) for reply in downloads} == set(NODES)
    [etag] = {reply.headers["ETag"] for reply in downloads}
    assert downloads[0].text == downloads[1].text and "q1 0 d11 1\n" in downloads[0].text
    unchanged = [api.request("GET", path, headers={"If-None-Match": etag}) for _ in NODES]
    assert [(reply.status, reply.headers["ETag"]) for reply in unchanged] == [(304, etag), (304, etag)]
    assert {cluster.node_of(reply) for reply in unchanged} == set(NODES)


def test_the_api_rate_limit_counts_the_requests_of_every_node(cluster):
    api = cluster.api("rate")
    early_in_a_minute(needed=5)
    answers = [api.get(f"/api/v1/projects/{cluster.slug}") for _ in range(API_RATE_LIMIT + 2)]
    assert [reply.status for reply in answers] == [200] * API_RATE_LIMIT + [429, 429]
    served = Counter(cluster.node_of(reply) for reply in answers[:API_RATE_LIMIT])
    assert set(served) == set(NODES)  # so neither node alone saw as many requests as the limit
    assert {cluster.node_of(reply) for reply in answers[API_RATE_LIMIT:]} == set(NODES)


def test_a_run_uploaded_through_one_node_is_imported_on_one_worker_and_evaluated_on_the_other(cluster, tmp_path):
    from evaluation.engine import evaluate, read_qrels, read_run

    lead = cluster.browser()
    lead.log_in("lena", cluster.password)
    upload = f"/p/{cluster.slug}/runs/upload/"
    lead.get(upload)
    run = trec_run({query: docs[::-1] for query, docs in PAIRS.items()}, "reversed")
    sent = lead.post(upload, {"name": "reversed", "system": "BM25", "description": ""}, files={"file": ("reversed.run", run)})
    assert sent.status == 302, sent.text[-2000:]
    assert cluster.node_of(sent) in NODES
    imported = cluster.wait_for_job(sent.headers["Location"].rstrip("/").rsplit("/", 1)[1], {"succeeded", "failed"})
    assert imported.state == "succeeded", imported.error
    importer = cluster.worker_of(imported)
    assert cluster.bucket.keys("verdict/uploads/") == []  # the stashed upload is gone once imported
    api = cluster.api("runs")
    [stored] = [item["uuid"] for item in api.get(f"/api/v1/projects/{cluster.slug}/runs?name=reversed").json()["items"]]

    [evaluator] = [name for name in WORKERS if name != importer]
    with cluster.only_consuming(evaluator):
        started = api.request("POST", f"/api/v1/projects/{cluster.slug}/evaluations",
                              data={"round": cluster.round, "runs": [stored], "measures": ["nDCG@10", "AP"]})
        assert started.status == 202, started.text
        evaluated = cluster.wait_for_job(started.json()["job"]["uuid"], {"succeeded", "failed"})
    assert evaluated.state == "succeeded", evaluated.error
    assert cluster.worker_of(evaluated) == evaluator

    results = api.get(f"/api/v1/projects/{cluster.slug}/evaluations/{started.json()['uuid']}").json()["results"]
    (tmp_path / "round.qrels").write_text(api.get(f"/api/v1/projects/{cluster.slug}/rounds/{cluster.round}/judgments.qrels").text)
    (tmp_path / "reversed.run").write_bytes(run)
    expected = evaluate(read_qrels(tmp_path / "round.qrels"), read_run(tmp_path / "reversed.run"), ["nDCG@10", "AP"]).aggregate
    [row] = results["runs"]
    assert (row["mean"]["nDCG@10"], row["mean"]["AP"]) == pytest.approx((expected["nDCG@10"], expected["AP"]))


def test_a_worker_killed_mid_job_has_its_job_queued_again_and_finished_by_the_other(cluster):
    job_uuid = cluster.machines["admin"].shell(START_SELFCHECK, SLUG=cluster.slug)
    running = cluster.wait_for_job(job_uuid, {"running"})
    victim = cluster.worker_of(running)
    [survivor] = [name for name in WORKERS if name != victim]
    cluster.machines[victim].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    deadline = killed_at + 3 * JOB_STALE_AFTER_SECONDS
    while (retried := cluster.job(job_uuid)).attempts < 2:
        assert retried.state in {"running", "queued"}, retried.error
        assert time.monotonic() < deadline, f"the job was not taken again after the kill\n{cluster.explain()}"
        time.sleep(0.2)
    claimed_after = time.monotonic() - killed_at
    finished = cluster.wait_for_job(job_uuid, {"succeeded", "failed"})
    assert finished.state == "succeeded", finished.error
    assert (finished.attempts, cluster.worker_of(finished)) == (2, survivor)
    print(f"killed {victim}: the job was claimed again by {survivor} {claimed_after:.1f} s later, "
          f"finished {time.monotonic() - killed_at:.1f} s after the kill")


def test_no_machine_keeps_anything_on_its_own_disk_but_its_log(cluster):
    cluster.stop()  # anything written on the way out counts too
    left = {name: sorted(str(path.relative_to(machine.folder)) for path in machine.folder.rglob("*")
                         if path.is_file() and path != machine.log)
            for name, machine in cluster.machines.items()}
    schedule = left.pop("beat")
    assert all(name.startswith("tmp/celerybeat-schedule") for name in schedule), schedule  # beat's own state
    assert left == {name: [] for name in left}
