"""The semantic judge: cosine similarity of all-MiniLM-L6-v2 sentence embeddings (Evret's SemanticJudge).

The score of a pair is the largest cosine similarity between the document's embedding and the embeddings of
the query's reference texts. Binary mode: relevant at or above ``threshold`` (0.75, Evret's default), which
gets ``relevant_grade``. Graded mode: ``bands`` are the lower bounds of the scale's grades above the lowest,
ascending (one per grade), and the score falls into one of them: on a 0-3 scale ``[0.35, 0.55, 0.75]``
gives 0 below 0.35, 1 from 0.35, 2 from 0.55 and 3 from 0.75. Without ``bands``, the bounds are spread
evenly from 0.35 up to ``threshold`` (on a two-grade scale: the threshold alone, as binary mode). Cosines of
this model between unrelated English texts are mostly below 0.2, topical neighbours 0.3 to 0.6, and
paraphrases above 0.75; calibrate the bands against the raters before trusting them.

The embeddings come from an embedder (`embedders`): the built-in numpy encoder (``minilm``, the default, which
reproduces sentence-transformers), sentence-transformers with torch, or an embeddings endpoint, chosen by the
setting ``backend`` or given at run time (``embedder=``); without its packages the judge says it is unavailable,
with the install command. ``describe()`` names the embedder, so grades and calibration reports are per backend.
Each distinct text is embedded once per model and maximum length (`embedding_cache`): references and documents
already in ``embedding_cache`` are read from it, and ``embed_count`` says how many texts were embedded and how many
came from the cache. An endpoint that keeps failing makes its pairs "could not judge" (``endpoint_failed``); one
that refuses the settings raises ``EmbeddingEndpointError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from judgments.lib.scales import Scale

import judgments.judges.minilm as minilm  # the module, not the package: judges/__init__ imports this one
from .base import (EMPTY_DOCUMENT, ENDPOINT_FAILED, NO_REFERENCES, RELEVANT_GRADE, Availability, Judge, JudgeContext,
                   JudgeSettingsError, Setting, Verdict, between, could_not_judge, judged, one_of)
from .embedders import BACKENDS, Embedder, EmbeddingRequestFailed, make_embedder
from .embedding_cache import EmbedCount, EmbeddingCache, MemoryEmbeddingCache, embed

GRADED_FLOOR = 0.35


def _check_bands(bands: list) -> str | None:
    if not bands or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bands):
        return "must be a list of numbers"
    if len(bands) > 9:
        return "must hold at most 9 bounds (a scale has at most 10 grades)"
    if any(not -1 <= b <= 1 for b in bands):
        return "must be cosines between -1 and 1"
    if any(b >= c for b, c in zip(bands, bands[1:])):
        return "must rise strictly, one lower bound per grade above the lowest"
    return None


class SemanticJudge(Judge):
    """Cosine similarity of sentence embeddings (see the module docstring)."""

    kind = "semantic"
    CHUNK = 32
    SETTINGS = (
        Setting("threshold", float, 0.75, "Cosine similarity at or above which a document is relevant.",
                between(0, 1)),
        Setting("mode", str, "binary", "binary: relevant or not; graded: similarity bands map onto the scale.",
                one_of("binary", "graded")),
        Setting("bands", list, None, "Graded mode: the lowest cosine of each grade above the scale's lowest, "
                "ascending; empty: evenly spaced from 0.35 up to the threshold.", _check_bands, optional=True),
        RELEVANT_GRADE,
        Setting("backend", str, None, "How texts are embedded: numpy (built in), sentence-transformers (torch, on a "
                "GPU when there is one) or endpoint (the project's embeddings endpoint); empty: the project's "
                "default.", one_of(*BACKENDS), optional=True),
    )

    def __init__(self, settings: dict[str, Any] | None = None, /, *, embedder: Embedder | None = None,
                 embedding_cache: EmbeddingCache | None = None, **overrides: Any) -> None:
        """`embedder`: the embedder to use (the app's, made from the project's settings); without one, the
        setting ``backend``'s (numpy when empty). `embedding_cache`: where vectors are kept (default: in memory,
        for the life of the judge)."""
        super().__init__(settings, **overrides)
        if self.settings["bands"] is not None:
            self.settings["bands"] = [float(bound) for bound in self.settings["bands"]]
        wanted = self.settings["backend"]
        if embedder is None:
            embedder = make_embedder(wanted or "numpy")
        elif wanted is not None and embedder.backend != wanted:
            raise JudgeSettingsError(f"backend: the judge is set to {wanted} but was given a {embedder.backend} "
                                     f"embedder")
        self.embedder = embedder
        self.embedding_cache: EmbeddingCache = MemoryEmbeddingCache() if embedding_cache is None else embedding_cache
        self.embed_count = EmbedCount()
        # Pairs per step (progress, cancelling): 32 on a CPU, thousands where a GPU wants big batches.
        self.CHUNK = getattr(embedder, "preferred_chunk", type(self).CHUNK)

    @property
    def model(self) -> str:
        return self.embedder.model

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "embedder": self.embedder.describe()}

    @classmethod
    def availability(cls) -> Availability:
        missing = minilm.missing_packages()
        if missing:
            return Availability(False, f"the semantic judge needs {', '.join(missing)}", minilm.INSTALL)
        return Availability(True)

    def bands(self, scale: Scale) -> list[float]:
        """The lower cosine bound of each grade above the lowest, for graded mode on `scale`."""
        if self.settings["bands"] is not None:
            return self.settings["bands"]
        above = len(scale.grades) - 1
        if above == 1:
            return [self.settings["threshold"]]
        return [float(bound) for bound in np.linspace(GRADED_FLOOR, self.settings["threshold"], above)]

    def check_scale(self, scale: Scale) -> None:
        super().check_scale(scale)
        given = self.settings["bands"]
        if self.settings["mode"] == "graded" and given is not None and len(given) != len(scale.grades) - 1:
            raise JudgeSettingsError(f"bands: the scale {scale.values} needs {len(scale.grades) - 1} lower bounds "
                                     f"(one per grade above the lowest), got {len(given)}")

    def _judge_chunk(self, contexts: list[JudgeContext]) -> list[Verdict]:
        usable = [bool(context.usable_references and context.document.strip()) for context in contexts]
        wanted = [context for context, ok in zip(contexts, usable) if ok]
        texts = list(dict.fromkeys([text for context in wanted for text in context.usable_references]
                                   + [context.document for context in wanted]))
        try:
            vectors = dict(zip(texts, embed(self.embedder, texts, self.embedding_cache, self.embed_count)))
            failures: dict[str, EmbeddingRequestFailed] = {}
        except EmbeddingRequestFailed as failed:
            vectors, failures = self._one_by_one(texts, failed)
        verdicts = []
        for context, ok in zip(contexts, usable):
            if not ok:
                verdicts.append(self._unjudgeable(context))
                continue
            failed = next((failures[text] for text in (context.document, *context.usable_references)
                           if text in failures), None)
            verdicts.append(self._verdict(context, vectors) if failed is None else
                            could_not_judge(ENDPOINT_FAILED, str(failed), cause=failed.cause))
        return verdicts

    def _one_by_one(self, texts: list[str], failed: EmbeddingRequestFailed) -> tuple[dict, dict]:
        """After a failed batch: when the endpoint refused some text of it (too long, say), each text alone, so
        that only the pairs of the texts it refuses are lost; when it kept failing, every text failed so."""
        vectors: dict[str, np.ndarray] = {}
        failures: dict[str, EmbeddingRequestFailed] = {}
        for text in texts:
            if failed.refused:
                try:
                    vectors[text] = embed(self.embedder, [text], self.embedding_cache, self.embed_count)[0]
                    continue
                except EmbeddingRequestFailed as alone:
                    failed = alone
            failures[text] = failed  # after a failure other than a refusal, the rest are not asked
        return vectors, failures

    @staticmethod
    def _unjudgeable(context: JudgeContext) -> Verdict:
        if not context.usable_references:
            return could_not_judge(NO_REFERENCES, "The query has no reference texts; the semantic judge compares "
                                   "the document with them.")
        return could_not_judge(EMPTY_DOCUMENT, "The document has no text to compare.")

    def _verdict(self, context: JudgeContext, vectors: dict[str, np.ndarray]) -> Verdict:
        texts = context.usable_references
        cosines = np.array([vectors[text] for text in texts]) @ vectors[context.document]
        best = int(np.argmax(cosines))
        score = float(min(1.0, max(-1.0, cosines[best])))
        where = f"cosine {score:.3f} with reference {best + 1} of {len(texts)}"
        scale = context.scale
        if self.settings["mode"] == "binary":
            relevant = score >= self.settings["threshold"]
            return judged(self.binary_grade(relevant, scale), score,
                          f"{'Relevant' if relevant else 'Not relevant'}: {where} "
                          f"(relevant at {self.settings['threshold']:g}).")
        bands = self.bands(scale)
        index = int(np.searchsorted(bands, score, side="right"))
        grade = scale.grades[index]
        low = f"{bands[index - 1]:g}" if index else "-1"
        high = f" to {bands[index]:g}" if index < len(bands) else " and above"
        return judged(grade.value, score, f"Grade {grade.value} ({grade.label}): {where}, in the band {low}{high}.")
