"""Automatic judges: grade query/document pairs like a rater, on the round's scale (issue #15). No Django.

    from judgments.judges import JudgeContext, make_judge
    judge = make_judge("token_overlap", {"min_tokens": 5})
    verdict = judge.judge(JudgeContext(query, document_text, scale, references=("an answer",)))
    verdict.outcome, verdict.grade, verdict.score, verdict.rationale, judge.describe()

Kinds (``KINDS``): ``token_overlap`` (Evret's weighted token overlap against the query's reference texts),
``semantic`` (cosine similarity of all-MiniLM-L6-v2 embeddings: the built-in numpy encoder, which needs
``requirements-judges.txt``, sentence-transformers or an embeddings endpoint, `embedders`; takes ``embedder=`` and
``embedding_cache=``) and ``llm`` (an OpenAI-compatible chat endpoint; takes ``api_key=``, ``cache=`` and
``policy=``, the internal addresses the operator allows it to call). Every judge has ``judge(context)``, ``batch_judge(contexts, progress=, cancel=)``, ``settings``
(validated, JSON), ``describe()`` (the provenance to store) and ``check_scale(scale)``.
``calibration`` compares a judge's grades with the raters' and says whether it may stand in for them.
"""

from __future__ import annotations

from typing import Any

from .base import (CANCELLED, COULD_NOT_JUDGE, EMPTY_DOCUMENT, ENDPOINT_FAILED, JUDGED, NO_REFERENCES, OUTCOMES,
                   PROBLEMS, TYPE_NAMES, UNPARSEABLE_REPLY, Availability, Judge, JudgeContext, JudgeSettingsError,
                   JudgeUnavailable, SettingDoc, Usage, Verdict, failure_cause, failure_causes, run_outcome, usage)
from .cache import CachedReply, CacheKey, MemoryCache, ReplyCache
from .embedders import (BACKENDS, Embedder, EmbeddingEndpointConfig, EmbeddingEndpointError, EmbeddingRequestFailed,
                        make_embedder)
from .embedding_cache import EmbedCount, EmbeddingCache, EmbeddingKey, MemoryEmbeddingCache, embed, text_sha256
from .llm import EndpointError, LLMJudge
from .overlap import TokenOverlapJudge
from .prompts import PROMPTS
from .semantic import SemanticJudge

KINDS: dict[str, type[Judge]] = {judge.kind: judge for judge in (TokenOverlapJudge, SemanticJudge, LLMJudge)}


def judge_class(kind: str) -> type[Judge]:
    try:
        return KINDS[kind]
    except KeyError:
        raise JudgeSettingsError(f"unknown judge kind {kind!r}; use one of {', '.join(KINDS)}") from None


def make_judge(kind: str, settings: dict[str, Any] | None = None, **runtime: Any) -> Judge:
    """A judge of `kind` with stored `settings`; `runtime` takes what is not a setting (the LLM judge's
    ``api_key``, ``cache`` and ``policy``; the semantic judge's ``embedder`` and ``embedding_cache``). Raises
    JudgeSettingsError on unknown kinds and bad settings."""
    return judge_class(kind)(settings, **runtime)


def settings_doc(kind: str) -> list[SettingDoc]:
    """The settings of `kind` as a form or a command lists them: name, type, default, meaning."""
    return [SettingDoc(s.name, TYPE_NAMES[s.type], s.default, s.help, s.optional) for s in judge_class(kind).SETTINGS]


def availability(kind: str) -> Availability:
    """Whether judges of `kind` can run in this installation, and if not why and how to install."""
    return judge_class(kind).availability()


__all__ = [
    "BACKENDS", "CANCELLED", "COULD_NOT_JUDGE", "EMPTY_DOCUMENT", "ENDPOINT_FAILED", "JUDGED", "KINDS", "NO_REFERENCES",
    "EmbedCount", "Embedder", "EmbeddingCache", "EmbeddingEndpointConfig", "EmbeddingEndpointError", "EmbeddingKey",
    "EmbeddingRequestFailed", "MemoryEmbeddingCache", "embed", "make_embedder", "text_sha256",
    "OUTCOMES", "PROBLEMS", "PROMPTS", "UNPARSEABLE_REPLY", "Availability", "CacheKey", "CachedReply",
    "EndpointError", "Judge", "JudgeContext", "JudgeSettingsError", "JudgeUnavailable", "LLMJudge", "MemoryCache",
    "ReplyCache", "SemanticJudge", "SettingDoc", "TokenOverlapJudge", "Usage", "Verdict", "availability",
    "failure_cause", "failure_causes", "judge_class", "make_judge", "run_outcome", "settings_doc", "usage",
]
