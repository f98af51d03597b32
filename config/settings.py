"""Verdict settings: one file, every knob an environment variable (see .env.example).

Values are parsed strictly: a malformed value stops start-up with a message naming the variable.
"""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent
PLACEHOLDER_SECRET_KEY = "dev-only-insecure-secret-key-change-me"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable's value; an unset or empty variable takes the default."""
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    raw = env_str(name)
    return Path(raw).expanduser().resolve() if raw else default


VAR_DIR = env_path("VERDICT_VAR_DIR", BASE_DIR / "var")

# Off unless asked for: `make run` (scripts/serve), the Makefile's other targets and the test suite turn it on.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", PLACEHOLDER_SECRET_KEY)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"CSRF_TRUSTED_ORIGINS entry {_origin!r} must start with http:// or https://")

if not DEBUG:
    if SECRET_KEY == PLACEHOLDER_SECRET_KEY or len(SECRET_KEY) < 32:
        raise ImproperlyConfigured("SECRET_KEY must be set to a random value of at least 32 characters when DEBUG is off "
                                   "(for development on this machine, set DEBUG=true as `make run` does)")
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must list the site's host names when DEBUG is off")

# The cache holds what every grade reads and rarely changes (sessions, display templates, round
# totals). locmem:// keeps one per process; redis://host:6379/1 shares one between web processes, so
# that a change made in one process is seen at once by the others.
CACHE_URL = env_str("CACHE_URL", "locmem://")
if CACHE_URL == "locmem://":
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
elif CACHE_URL.startswith(("redis://", "rediss://")):
    # A cache call takes a millisecond; without a timeout a hung Redis would hold every web thread that asks it.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL,
                          "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 5}}}
else:
    raise ImproperlyConfigured(f"CACHE_URL={CACHE_URL!r}: use locmem:// or redis://host:6379/1")

# Sessions are read from the cache and written through to the database: one query less per request.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

# --- HTTPS and browser security (production defaults) -------------------------------------------
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
TRUST_X_FORWARDED_PROTO = env_bool("TRUST_X_FORWARDED_PROTO", False)
if TRUST_X_FORWARDED_PROTO:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The site is served over HTTPS when DEBUG is off and any HTTPS setting is on (SECURE_COOKIES is, by
# default). Then browsers are told to use HTTPS only, for a year, unless SECURE_HSTS_SECONDS says
# otherwise. SecurityMiddleware sends the header on HTTPS responses only.
SERVED_OVER_HTTPS = not DEBUG and (SESSION_COOKIE_SECURE or SECURE_SSL_REDIRECT or TRUST_X_FORWARDED_PROTO)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if SERVED_OVER_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
# A refused form token gets the app's 403 page, which says what to do, instead of Django's bare one.
CSRF_FAILURE_VIEW = "judgments.views.errors.csrf_failure"
# Content-Security-Policy (Django's own middleware): scripts and styles come from the app's static files
# only; no inline script, inline style, eval or framing. Images may also come from the web, because a
# corpus's display template may show documents' pictures (and Pico CSS draws its icons as data: URLs).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", "https:", "http:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.forms",  # the form renderer below finds the widgets' templates through the project's TEMPLATES
    "django_htmx",
    "axes",
    "judgments",
    "evaluation",
    "ninja",  # for its static Swagger UI files: /api/docs loads nothing from a CDN
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "api.version.VersionHeaderMiddleware",  # X-Verdict-Version on answers to a request with a valid token
    "config.cache_control.NoStoreMiddleware",  # around every answer to a logged-in request, refusals included
    "config.http_limits.RequestLimitsMiddleware",  # before any process_view reads a body
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes requires: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

if not DEBUG:
    # In production the app serves its own static files (collected to STATIC_ROOT at build time).
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.context_processors.mail",
            ],
        },
    },
]
FORM_RENDERER = "config.forms.FormRenderer"


def _database(url: str) -> dict:
    try:
        config = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0))
    except Exception as exc:  # dj_database_url raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is not a database URL: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine == "django.db.backends.sqlite3":
        # WAL lets the web server read while the worker writes; IMMEDIATE takes the write lock at
        # BEGIN so two writers queue on busy_timeout instead of failing with "database is locked".
        config["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
        }
        config["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
        # A fresh checkout has no var/ folder yet (it is not in git).
        for name in (config["NAME"], config["TEST"]["NAME"]):
            Path(name).parent.mkdir(parents=True, exist_ok=True)
    elif engine != "django.db.backends.postgresql":
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: only sqlite:// and postgres:// are supported")
    else:
        # No JIT: it compiles a query whose estimated cost is high (a partial index's rows are estimated at a
        # third of a big round's), which cost 100+ ms on pages that run in a few: pages never need it.
        config["OPTIONS"] = {"options": "-c jit=off"}
        if env_bool("DATABASE_PREPARED_STATEMENTS", True):
            # Server-side binding lets psycopg prepare a statement after its second run on a connection, so
            # PostgreSQL stops planning the queries every grade repeats (planning cost more than running them).
            # Turn off behind a connection pooler in transaction mode, which cannot keep prepared statements.
            config["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": 2}
    return config


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'verdict.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "judgments:projects"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["config.formats"]  # dates as 2026-11-24 14:02, not "Nov. 24, 2026, 2:02 p.m."
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "static")
MEDIA_URL = "media/"
MEDIA_ROOT = env_path("MEDIA_ROOT", VAR_DIR / "media")
# Uploaded files, stored runs, logs' counts, per-query values and list versions go through the storage API.
# STORAGE_BACKEND: filesystem (MEDIA_ROOT, the default), s3 (an S3-compatible bucket through django-storages,
# configured by the S3_* variables) or the dotted path of another Storage class.
STORAGE_BACKEND = env_str("STORAGE_BACKEND", "filesystem")
S3_ADDRESSING_STYLES = ("auto", "path", "virtual")


def _s3_storage() -> dict:
    """STORAGES["default"] for an S3-compatible bucket; a missing or malformed setting stops start-up."""
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    bucket = env_str("S3_BUCKET")
    if not bucket:
        raise ImproperlyConfigured("STORAGE_BACKEND=s3 needs S3_BUCKET, the bucket's name")
    endpoint = env_str("S3_ENDPOINT_URL") or None
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"S3_ENDPOINT_URL={endpoint!r} must start with http:// or https://")
    access_key, secret_key = env_str("S3_ACCESS_KEY_ID") or None, env_str("S3_SECRET_ACCESS_KEY") or None
    if bool(access_key) != bool(secret_key):
        raise ImproperlyConfigured("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither "
                                   "to use boto3's own credentials (environment, instance role)")
    addressing = env_str("S3_ADDRESSING_STYLE", "auto")
    if addressing not in S3_ADDRESSING_STYLES:
        raise ImproperlyConfigured(f"S3_ADDRESSING_STYLE={addressing!r}: use auto, path or virtual")
    # Files larger than one part are uploaded in parts of this size (S3's minimum part is 5 MiB), a few at a time.
    part = env_int("S3_PART_SIZE_MB", 8, minimum=5) << 20
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket, "endpoint_url": endpoint, "region_name": env_str("S3_REGION") or None,
            "access_key": access_key, "secret_key": secret_key, "location": env_str("S3_PREFIX").strip("/"),
            "addressing_style": addressing,
            # As on a file system: a second file under a taken name gets a new name instead of replacing the first.
            "file_overwrite": False,
            # A file opened whole (a stashed upload read line by line) spills to disk past 8 MiB, not to memory.
            "max_memory_size": 8 << 20,
            "transfer_config": TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=4),
            "client_config": Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"},
                                    s3={"addressing_style": addressing}, signature_version="s3v4"),
        },
    }


def _default_storage(backend: str) -> dict:
    if backend == "filesystem":
        return {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    if backend == "s3":
        return _s3_storage()
    if "." not in backend:
        raise ImproperlyConfigured(f"STORAGE_BACKEND={backend!r}: use filesystem, s3 or the dotted path of a Storage class")
    return {"BACKEND": backend}


STORAGES = {
    "default": _default_storage(STORAGE_BACKEND),
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "config.http_limits.UploadLimitHandler",  # stops an upload at UPLOAD_MAX_BYTES, before the others store it
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# The largest file a person may upload (queries, corpus, runs, logs); bigger files are refused.
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 2 * 1024**3, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024, minimum=1024)

# Celery. The embedded default needs no server: Kombu's filesystem transport keeps messages as
# files under var/broker. Set CELERY_BROKER_URL=redis://... for production.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if not CELERY_BROKER_URL.startswith(("filesystem://", "redis://", "rediss://", "amqp://", "memory://")):
    raise ImproperlyConfigured(f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use filesystem://, redis:// or amqp://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = env_path("CELERY_BROKER_DIR", VAR_DIR / "broker")
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A running job whose heartbeat (written by a thread of its worker while it runs) is this old is taken for dead (its
# worker was killed or its machine restarted) and queued again for another worker, unless it was tried
# JOB_MAX_ATTEMPTS times: then it is failed, for a lead to retry.
JOB_STALE_AFTER_SECONDS = env_int("JOB_STALE_AFTER_SECONDS", 120, minimum=30)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
# A job webhook's event is tried this many times, the n-th retry WEBHOOK_RETRY_SECONDS * 4**(n-1) after the one
# before (10 s, 40 s, 160 s, 640 s by default); each try ends within judgments.ops.webhooks' WEBHOOK_DEADLINE.
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 5, minimum=1)
WEBHOOK_RETRY_SECONDS = env_int("WEBHOOK_RETRY_SECONDS", 10, minimum=1)
# A judge run's pairs are split into chunks of this many, each taken by any free worker (judgments.ops.judge_runs).
JUDGE_CHUNK_PAIRS = env_int("JUDGE_CHUNK_PAIRS", 200, minimum=1)
CELERY_BEAT_SCHEDULE = {
    # Checked three times per stale limit (at most every minute): a dead worker's job is back in the queue at most
    # a third later than the limit.
    "recover-stale-jobs": {"task": "judgments.tasks.recover_stale_jobs", "schedule": min(60.0, JOB_STALE_AFTER_SECONDS / 3)},
    "clean-uploads": {"task": "judgments.tasks.clean_uploads", "schedule": 3600.0},
    # Database triggers add a row per write to a round's labels; only each round's newest is ever read.
    "prune-labels-changes": {"task": "judgments.tasks.prune_labels_changes", "schedule": 3600.0},
    # The API's kept judgment-list files of rounds and versions that are gone.
    "clean-rendered": {"task": "api.tasks.clean_rendered", "schedule": 3600.0},
    # Hourly, it checks the projects whose last staleness check is as old as their schedule (default 30 days).
    "check-health": {"task": "judgments.tasks.check_due_health", "schedule": 3600.0},
    # Runs the CI gate uploaded, past their project's retention (judgments.ops.removal).
    "delete-expired-runs": {"task": "judgments.tasks.delete_expired_runs", "schedule": 3600.0},
}

# Uploads wait in storage (uploads/<project>/...) until the job importing them has run. The hourly beat task
# clean_uploads (and manage.py clean_uploads) removes the ones no job will import: a failed job's once it
# failed UPLOAD_FAILED_KEEP_DAYS ago (until then the job can be retried), any other that no queued or running
# job refers to (a log whose columns were never mapped) once it is UPLOAD_ABANDONED_AFTER_HOURS old.
UPLOAD_ABANDONED_AFTER_HOURS = env_int("UPLOAD_ABANDONED_AFTER_HOURS", 24, minimum=1)
UPLOAD_FAILED_KEEP_DAYS = env_int("UPLOAD_FAILED_KEEP_DAYS", 7, minimum=1)

# A pair shown to a rater is kept from other raters this long; after that an unanswered pair goes
# back to the queue (the rater's grade is still accepted if they answer later).
GRADING_HOLD_SECONDS = env_int("GRADING_HOLD_SECONDS", 900, minimum=30)
# Raters are offered a short break after every this many judgments (0 turns the prompt off).
GRADING_BREAK_EVERY = env_int("GRADING_BREAK_EVERY", 50, minimum=0)
# "Which answer metric agrees with the raters" names no metric (and the answer leaderboard keeps f1) below
# this many graded answers with reference answers.
ANSWER_METRICS_MIN_ANSWERS = env_int("ANSWER_METRICS_MIN_ANSWERS", 30, minimum=2)

# --- Logins, projects and invitations: what an outsider can learn or try -------------------------
# Failed logins are counted per username and per client address (django-axes, in the database):
# LOGIN_FAILURE_LIMIT failures for one username, from anywhere, or from one address, for any usernames
# (unknown ones too), pause logging in for LOGIN_LOCKOUT_MINUTES after the last counted failure. The
# check runs before the password is hashed, so a refused guess costs no hashing; attempts during the
# pause are not counted, so it ends on time. `manage.py unlock_login` lifts it at once.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
LOGIN_LOCKOUT_MINUTES = env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
# How many reverse proxies in front of Verdict append the client's address to X-Forwarded-For. With 0
# the header is ignored (anyone can send one) and the connection's address counts.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one reaching the limit locks (a list is OR)
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "judgments.logins.client_address"
AXES_LOCKOUT_CALLABLE = "judgments.logins.lockout_response"
AXES_DISABLE_ACCESS_LOG = True  # only failures are kept, and only until their pause is over
AXES_VERBOSE = False  # no banner on every manage.py command; failures and lockouts are still logged
# Who may create projects: "staff" (staff users and superusers) or "anyone" with an account (`make run`'s demo).
PROJECT_CREATION = env_str("PROJECT_CREATION", "staff")
if PROJECT_CREATION not in ("staff", "anyone"):
    raise ImproperlyConfigured(f"PROJECT_CREATION={PROJECT_CREATION!r}: use staff or anyone")
# How long a member invitation's link stays valid.
INVITATION_DAYS = env_int("INVITATION_DAYS", 14, minimum=1)

# REST API (/api/v1/): requests per minute one token may make; more get 429 with Retry-After. Counted in the
# cache, so set CACHE_URL to Redis when several web processes serve (locmem counts per process). 0 = no limit.
API_RATE_LIMIT = env_int("API_RATE_LIMIT", 600, minimum=0)

# --- What a lead may point Verdict at: a lead is not the server's administrator ---------------------------
# LLM endpoints and health webhooks are called at public addresses only (judgments/lib/outbound.py): a host that
# resolves to a loopback, private, link-local, multicast or reserved address is refused, unless it is named in
# OUTBOUND_ALLOWED_HOSTS (name or name:port, e.g. vllm.internal:8000) or lies in OUTBOUND_ALLOWED_NETWORKS
# (e.g. 10.0.5.0/24), for an on-premises model server.
from judgments.lib.outbound import Policy as _OutboundPolicy  # noqa: E402 (no Django in it: safe to import here)

try:
    OUTBOUND_POLICY = _OutboundPolicy.of(env_list("OUTBOUND_ALLOWED_HOSTS"), env_list("OUTBOUND_ALLOWED_NETWORKS"))
except ValueError as _problem:
    raise ImproperlyConfigured(f"OUTBOUND_ALLOWED_HOSTS / OUTBOUND_ALLOWED_NETWORKS: {_problem}") from None
# The environment variables an LLM endpoint may name for its API key: those listed here and any named
# VERDICT_KEY_<something>. No other variable of the workers (SECRET_KEY, DATABASE_URL...) can be sent anywhere.
ENDPOINT_KEY_VARIABLE_PREFIX = "VERDICT_KEY_"
ENDPOINT_KEY_VARIABLES = env_list("ENDPOINT_KEY_VARIABLES")
_SERVER_SECRETS = {"SECRET_KEY", "DATABASE_URL", "CACHE_URL", "CELERY_BROKER_URL", "EMAIL_URL", "S3_ACCESS_KEY_ID",
                   "S3_SECRET_ACCESS_KEY"}
for _name in ENDPOINT_KEY_VARIABLES:
    if _name in _SERVER_SECRETS or _name.startswith("AWS_") or not _name.replace("_", "a").isalnum():
        raise ImproperlyConfigured(f"ENDPOINT_KEY_VARIABLES: {_name!r} cannot hold an endpoint's key (a setting of "
                                   "Verdict's own, or not a variable name)")

# The device the semantic judge's sentence-transformers backend runs on: "auto" (cuda when torch sees a GPU, else
# the CPU), "cpu" or "cuda" (a run fails, saying so, where there is none). The numpy and endpoint backends ignore it.
SEMANTIC_DEVICE = env_str("SEMANTIC_DEVICE", "auto").lower()
if SEMANTIC_DEVICE not in ("auto", "cpu", "cuda"):
    raise ImproperlyConfigured(f"SEMANTIC_DEVICE={SEMANTIC_DEVICE!r}: use auto, cpu or cuda")

# Hostile and careless files. Every reader of uploaded files (query sets, corpus, runs, qrels, query logs,
# judgment lists) refuses, naming the file and line: a line longer than INPUT_LINE_MAX_BYTES (checked as the
# file streams past, so one endless line cannot fill the memory); a query or document id longer than
# INPUT_ID_MAX_BYTES (at most 512: the database columns hold 512 characters); a corpus field longer than
# CORPUS_FIELD_MAX_BYTES; a gzipped query log, or the columns read from a Parquet run or log, that unpack to
# more than DECOMPRESSED_MAX_BYTES (a gzip or Parquet bomb; the default is 8 times the default upload limit,
# and logs compress 4 to 8 times). A Parquet value longer than the id (runs) or line (logs) limit is refused
# from the file's footer, before it is unpacked.
INPUT_LINE_MAX_BYTES = env_int("INPUT_LINE_MAX_BYTES", 1 << 20, minimum=1024)
INPUT_ID_MAX_BYTES = env_int("INPUT_ID_MAX_BYTES", 512, minimum=8)
if INPUT_ID_MAX_BYTES > 512:
    raise ImproperlyConfigured(f"INPUT_ID_MAX_BYTES={INPUT_ID_MAX_BYTES} must be at most 512: the database columns hold 512")
CORPUS_FIELD_MAX_BYTES = env_int("CORPUS_FIELD_MAX_BYTES", 256 << 10, minimum=1024)
DECOMPRESSED_MAX_BYTES = env_int("DECOMPRESSED_MAX_BYTES", 16 << 30, minimum=1 << 20)

# Mail: password resets and member invitations are sent only when EMAIL_URL is set; without it the
# password-reset pages are hidden and invitations are shared by link. smtp://user:pass@host:587 (STARTTLS),
# smtps://...:465 (TLS), console:// (printed to the log, for trying it out) or locmem:// (tests).
EMAIL_URL = env_str("EMAIL_URL")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "verdict@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_ENABLED = bool(EMAIL_URL)


def _mailer(url: str) -> dict:
    """Django's MAILERS entry for EMAIL_URL."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    backends = {"console": "console", "locmem": "locmem", "smtp": "smtp", "smtps": "smtp"}
    if parts.scheme not in backends:
        raise ImproperlyConfigured(f"EMAIL_URL={url!r}: use smtp://, smtps://, console:// or locmem://")
    mailer = {"BACKEND": f"django.core.mail.backends.{backends[parts.scheme]}.EmailBackend"}
    if parts.scheme.startswith("smtp"):
        if not parts.hostname:
            raise ImproperlyConfigured(f"EMAIL_URL={url!r}: name the mail server, e.g. smtp://user:pass@mail.example.com:587")
        try:
            port = parts.port or (465 if parts.scheme == "smtps" else 587)
        except ValueError:
            raise ImproperlyConfigured(f"EMAIL_URL={url!r}: the port is not a number") from None
        mailer["OPTIONS"] = {
            "host": parts.hostname, "port": port,
            "username": unquote(parts.username or ""), "password": unquote(parts.password or ""),
            "use_ssl": parts.scheme == "smtps", "use_tls": parts.scheme == "smtp" and port != 25, "timeout": 20,
        }
    return mailer


# Without EMAIL_URL nothing is ever sent; code that would send mail checks EMAIL_ENABLED first.
MAILERS = {"default": _mailer(EMAIL_URL) if EMAIL_ENABLED else {"BACKEND": "django.core.mail.backends.dummy.EmailBackend"}}
# `check --deploy` calls the dummy backend an error; here it is the documented "no mail" choice.
SILENCED_SYSTEM_CHECKS = [] if EMAIL_ENABLED else ["mail.E001"]

# The docs: the app serves the Markdown pages of DOCS_DIR (the repository's docs/) at /docs/ (config/docs.py), and
# its pages link to them at DOCS_URL: /docs/ itself, or where a team hosts the built MkDocs site (https://..., with
# MkDocs' directory URLs). Either ends with "/".
DOCS_DIR = env_path("DOCS_DIR", BASE_DIR / "docs")
DOCS_URL = env_str("DOCS_URL", "/docs/")
_docs_url = urlsplit(DOCS_URL)
_docs_url_absolute = _docs_url.scheme == "https" and _docs_url.netloc
_docs_url_path = not _docs_url.scheme and not _docs_url.netloc and DOCS_URL.startswith("/")  # not //host/
if (not (_docs_url_absolute or _docs_url_path) or not DOCS_URL.endswith("/") or _docs_url.query or _docs_url.fragment
        or any(character.isspace() for character in DOCS_URL)):
    raise ImproperlyConfigured(f"DOCS_URL={DOCS_URL!r}: use a path such as /docs/ or an https:// address, ending with /")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # A refused request (403, 404, a bad query parameter, a host not allowed) is logged as one line, without a
    # traceback: on django.request itself, and on the console for django.security's loggers (one per kind).
    "filters": {"refusals_without_traceback": {"()": "config.log_filters.RefusalsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals_without_traceback"]}},
    "loggers": {"django.request": {"filters": ["refusals_without_traceback"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}
