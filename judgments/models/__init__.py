"""Every model of the app, by domain (one module each); import them from here: `from judgments.models import Round`.
Migrations name `judgments.models._run_path` and the other upload paths, which this module re-exports too."""

from .health import HealthCheck, HealthSettings, TriggerState
from .jobs import Job, JobChunk, JobQuerySet
from .judges import (EmbeddingEndpoint, EmbeddingVector, JudgeCalibration, KeyedEndpoint, LLMEndpoint, LLMReply,
                     MachineGrade, RoundJudge)
from .pools import Pool, PoolPair, PoolPairQuerySet
from .projects import (DisplayField, EditConflict, ID_LENGTH, Invitation, InvitationQuerySet, Membership,
                       MembershipQuerySet, Project, Role, Versioned)
from .queries import (AnswerRun, Document, DocumentQuerySet, Query, QueryCollection, QueryLog, StoredRun,
                      _answer_run_path, _run_path)
from .rounds import (Adjudication, AgreementReport, AnswerMetricsReport, Claim, GuidelinesVersion, HumanSample,
                     Judgment, JudgmentEdit, JudgmentQuerySet, LabelsChange, RaterTotals, Round, RoundItem,
                     RoundTotals, UnrateableReason)
from .versions import JudgmentListVersion, _version_path
from .webhooks import Webhook, WebhookDelivery

__all__ = [
    "Adjudication",
    "AgreementReport",
    "AnswerMetricsReport",
    "AnswerRun",
    "Claim",
    "DisplayField",
    "Document",
    "DocumentQuerySet",
    "EditConflict",
    "EmbeddingEndpoint",
    "EmbeddingVector",
    "GuidelinesVersion",
    "HealthCheck",
    "HealthSettings",
    "HumanSample",
    "ID_LENGTH",
    "Invitation",
    "InvitationQuerySet",
    "Job",
    "JobChunk",
    "JobQuerySet",
    "JudgeCalibration",
    "Judgment",
    "JudgmentEdit",
    "JudgmentListVersion",
    "JudgmentQuerySet",
    "KeyedEndpoint",
    "LLMEndpoint",
    "LLMReply",
    "LabelsChange",
    "MachineGrade",
    "Membership",
    "MembershipQuerySet",
    "Pool",
    "PoolPair",
    "PoolPairQuerySet",
    "Project",
    "Query",
    "QueryCollection",
    "QueryLog",
    "RaterTotals",
    "Role",
    "Round",
    "RoundItem",
    "RoundJudge",
    "RoundTotals",
    "StoredRun",
    "TriggerState",
    "UnrateableReason",
    "Versioned",
    "Webhook",
    "WebhookDelivery",
    "_answer_run_path",
    "_run_path",
    "_version_path",
]
