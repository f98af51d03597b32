"""The semantic judge's embeddings in the app: the vectors table as its cache, the project's default backend and
embeddings endpoint, and the embedder a semantic judge runs with. The embedders and the cache's logic are
`judgments.judges.embedders` and `judgments.judges.embedding_cache`, which know no Django.

Each distinct text is embedded once per project, model and maximum length (`DatabaseEmbeddingCache`, shared by
the project's rounds and runs; not across projects, see `EmbeddingVector`): a re-run over the same pairs embeds
nothing, and a changed document is embedded again because its text, hence its SHA-256, changed.
"""

from collections.abc import Mapping, Sequence

import numpy as np
from django.conf import settings
from django.utils import timezone

from .. import judges
from ..core import outbound_policy
from ..core.secrets import SecretUnreadable
from ..judges import embedders
from ..judges.embedding_cache import EmbeddingKey
from ..models import EmbeddingEndpoint, EmbeddingVector, Project, RoundJudge
from .actions import ActionRefused

DEFAULT_BACKEND = "numpy"
BACKEND_NAMES = {"numpy": "numpy: built-in encoder, CPU", "sentence-transformers": "sentence-transformers: torch, GPU if any",
                 "endpoint": "endpoint: the project's embeddings endpoint"}
CHUNK = 900  # hashes per query: SQLite allows 999 parameters in all


class DatabaseEmbeddingCache:
    """`judgments.judges.embedding_cache.EmbeddingCache` over the `EmbeddingVector` table: `project`'s vectors."""

    def __init__(self, project: Project) -> None:
        self.project = project

    def get_many(self, keys: Sequence[EmbeddingKey]) -> dict[EmbeddingKey, np.ndarray]:
        wanted: dict[tuple[str, int], dict[str, None]] = {}
        for key in keys:
            wanted.setdefault((key.model, key.max_length), {})[key.text_sha256] = None
        found = {}
        for (model, max_length), hashes in wanted.items():
            hashes = list(hashes)
            for start in range(0, len(hashes), CHUNK):
                rows = EmbeddingVector.objects.filter(project=self.project, model=model, max_length=max_length,
                                                      text_sha256__in=hashes[start:start + CHUNK])
                for sha, dim, vector in rows.values_list("text_sha256", "dim", "vector"):
                    data = bytes(vector)
                    if len(data) == 4 * dim:  # anything else is no vector of ours: embedded again, not trusted
                        found[EmbeddingKey(model, max_length, sha)] = np.frombuffer(data, dtype="<f4").astype(np.float32)
        return found

    def put_many(self, vectors: Mapping[EmbeddingKey, np.ndarray]) -> None:
        rows = []
        for key, vector in vectors.items():
            values = np.asarray(vector, dtype="<f4").ravel()
            rows.append(EmbeddingVector(project=self.project, model=key.model, max_length=key.max_length, text_sha256=key.text_sha256,
                                        dim=values.size, vector=values.tobytes()))
        # Another worker may have stored the same text meanwhile: its vector is the same, keep either.
        EmbeddingVector.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)


# ------------------------------------------------------------------------------------------ the project's


def project_embeddings(project: Project) -> EmbeddingEndpoint | None:
    return EmbeddingEndpoint.objects.filter(project=project).first()


def default_backend(project: Project, found: EmbeddingEndpoint | None = None) -> str:
    """The backend of the project's semantic judges that name none."""
    found = found or project_embeddings(project)
    return found.default_backend if found else DEFAULT_BACKEND


def judge_backend(judge: RoundJudge) -> str:
    """The backend `judge` embeds with: its own setting, else the project's default."""
    return judge.settings.get("backend") or default_backend(judge.round.project)


def endpoint_problem(found: EmbeddingEndpoint | None) -> str | None:
    """Why the project's embeddings endpoint cannot be used, in words; None when it can. A key variable this
    process lacks is shown on the page (`key_status`) but refused nowhere: the workers, who read it, may have it."""
    if found is None or not found.base_url or not found.model:
        return "the project has no embeddings endpoint: set its base URL and model"
    if found.api_key_env and (problem := outbound_policy.key_variable_problem(found.api_key_env)):
        return f"its API key: {problem.rstrip('.')}"
    return None


def backend_problem(backend: str, found: EmbeddingEndpoint | None) -> str | None:
    """Why `backend` cannot embed here (packages missing, with the install command; no usable endpoint), or None."""
    availability = embedders.availability(backend)
    if not availability.available:
        return f"{availability.reason}; install with: {availability.install}"
    return endpoint_problem(found) if backend == "endpoint" else None


def backend_statuses(project: Project) -> list[dict]:
    """Each backend as the endpoints page lists it: its name, whether it is the default, and why it is not usable."""
    found = project_embeddings(project)
    default = default_backend(project, found)
    return [{"backend": backend, "name": BACKEND_NAMES[backend], "default": backend == default,
             "problem": backend_problem(backend, found)} for backend in embedders.BACKENDS]


def make_embedder(project: Project, backend: str) -> "embedders.Embedder":
    """The embedder of `backend` for `project`: the device from SEMANTIC_DEVICE, the endpoint with its key read
    under `judgments.ops.endpoints`' rules. ActionRefused, saying why, when it cannot run here."""
    found = project_embeddings(project)
    if problem := backend_problem(backend, found):
        raise ActionRefused(f"The semantic judge's {backend} backend cannot run here: {problem}.")
    config = None
    if backend == "endpoint":
        try:
            key = found.api_key()
        except SecretUnreadable as problem:
            raise ActionRefused(f"The project's embeddings API key: {str(problem).rstrip('.')}.") from None
        config = embedders.EmbeddingEndpointConfig(base_url=found.base_url, model=found.model, api_key=key,
                                                   batch_size=found.batch_size, max_length=found.max_length)
    try:
        return embedders.make_embedder(backend, device=settings.SEMANTIC_DEVICE, endpoint=config,
                                       policy=outbound_policy.policy())
    except (judges.JudgeSettingsError, judges.JudgeUnavailable) as problem:
        raise ActionRefused(f"The semantic judge's {backend} backend cannot run here: {str(problem).rstrip('.')}.") from None


def semantic_judge(judge: RoundJudge) -> judges.Judge:
    """`judge`'s semantic judge: the embedder of its backend (its own, else the project's default) and the
    database's embedding cache. ActionRefused when the backend cannot run here."""
    embedder = make_embedder(judge.round.project, judge_backend(judge))
    return judges.make_judge("semantic", judge.settings, embedder=embedder, embedding_cache=DatabaseEmbeddingCache(judge.round.project))


def save_embedding_endpoint(project: Project, *, default_backend: str, base_url: str, model: str, max_length: int,
                            batch_size: int, api_key: str = "", api_key_env: str = "",
                            clear_key: bool = False) -> EmbeddingEndpoint:
    """Set the project's embeddings from checked values (`EmbeddingEndpointForm`): a new key replaces the stored
    one, `clear_key` removes it, neither keeps it."""
    found = project_embeddings(project) or EmbeddingEndpoint(project=project)
    found.default_backend, found.base_url, found.model = default_backend, base_url, model
    found.max_length, found.batch_size, found.api_key_env = max_length, batch_size, api_key_env
    found.updated_at = timezone.now()
    found.replace_api_key(api_key, clear_key)
    found.save()
    return found


# ------------------------------------------------------------------------------------------ provenance


def embedder_label(described: Mapping | None) -> str:
    """An embedder's provenance in words: "numpy (sentence-transformers/all-MiniLM-L6-v2)", "endpoint
    (bge-small at http://tei:8080/v1)". Grades stored before the backends existed came from the numpy encoder."""
    described = described or {"backend": DEFAULT_BACKEND, "model": embedders.MODEL}
    where = f" at {described['base_url']}" if described.get("base_url") else ""
    device = f" on {described['device']}" if described.get("device") else ""
    return f"{described['backend']} ({described['model']}{where}{device})"


def _identity(described: Mapping | None) -> tuple[str, str]:
    described = described or {"backend": DEFAULT_BACKEND, "model": embedders.MODEL}
    return described["backend"], described["model"]


def current_embedder(judge: RoundJudge) -> dict:
    """The backend and model `judge` embeds with now (without building it): what its grades' provenance says."""
    backend = judge_backend(judge)
    if backend == "endpoint":
        found = project_embeddings(judge.round.project)
        if found is None or not found.base_url:
            return {"backend": backend, "model": "no endpoint set"}
        return {"backend": backend, "model": found.model, "base_url": found.base_url}
    return {"backend": backend, "model": embedders.MODEL}


def grade_embedders(judge: RoundJudge) -> list[dict | None]:
    """The embedders that made `judge`'s grades (their provenance's "embedder"; None for grades from before the
    backends, made by the numpy encoder)."""
    found = judge.grades.order_by().values_list("provenance__embedder", flat=True).distinct()
    return sorted(found, key=lambda described: embedder_label(described))


def calibration_backend_problem(judge: RoundJudge, data: Mapping) -> str | None:
    """Why a semantic judge's stored calibration report does not stand for it now: its grades came from another
    backend or model than the one it embeds with now. None when they match (and for other kinds)."""
    if judge.kind != "semantic":
        return None
    now = current_embedder(judge)
    made = data.get("embedders") or [None]
    other = [described for described in made if _identity(described) != _identity(now)]
    if not other:
        return None
    return (f"its calibration report was computed from grades made by {', '.join(embedder_label(d) for d in other)}, "
            f"and it now embeds with {embedder_label(now)}: vectors of another backend differ, so run it on the "
            "calibration sample again and compute the report again")
