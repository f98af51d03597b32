"""The LLM judge's prompts, versioned, and the strict readers of the model's replies.

A prompt's version names its wording: a stored grade says which prompt made it, and the reply cache is keyed
by it, so changing the wording means a new version (a new entry in ``PROMPTS``), never an edit in place.

- ``evret-binary-v1``: Evret's question, "does this document give what the query asks for, YES or NO",
  reworded, with the round's guidelines, the grade cues of the relevant grade and the reference texts when
  the query has them. The reply must start with YES or NO.
- ``umbrela-graded-v1``: UMBRELA's zero-shot assessor (Upadhyay et al., 2024), reworded: think of the
  searcher's likely intent, how well the content meets it and how trustworthy it is, then give one grade of
  the round's own scale (each grade listed with its label and cue; on a 0-3 scale, TREC Deep Learning's
  meanings come from the cues). The reply is one short sentence, then the line ``Final grade: N``.

Reading is strict: anything else is "could not judge" with the reply kept, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from judgments.lib.scales import Scale

from .base import JudgeContext

SYSTEM = ("You are a careful search quality rater. You judge how well one document serves one search query, "
          "following the grading guidelines you are given, and you answer in exactly the format asked for.")
NO_GUIDELINES = "(No guidelines were given: judge as an attentive searcher would.)"
MAX_RATIONALE = 500


@dataclass(frozen=True)
class Reading:
    """What a reply said: a grade on the scale and the model's answer, or why it could not be read."""

    grade: int | None
    answer: float | None
    rationale: str
    problem: str = ""


def _think_removed(reply: str) -> str:
    """Reasoning models may open with a <think>...</think> block: the answer is what follows it."""
    return re.sub(r"\A\s*<think>.*?</think>", "", reply, flags=re.DOTALL).strip()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_RATIONALE else text[:MAX_RATIONALE - 3] + "..."


def _grade_lines(scale: Scale) -> str:
    return "\n".join(f"{g.value} = {g.label}" + (f": {g.cue}" if g.cue else "") for g in scale.grades)


def _pair_text(context: JudgeContext, max_document_chars: int) -> str:
    parts = [f"Search query: {context.query}"]
    if context.information_need.strip():
        parts.append(f"What the searcher needs: {context.information_need.strip()}")
    references = context.usable_references
    if references:
        listed = "\n".join(f"- {text.strip()}" for text in references)
        parts.append(f"Answers or passages the searcher would accept (for reference; the document need not "
                     f"repeat them word for word):\n{listed}")
    document = context.document.strip()
    if len(document) > max_document_chars:
        document = f"{document[:max_document_chars]}\n[The document goes on; it was cut at {max_document_chars:,} characters.]"
    parts.append(f"Document:\n{document}")
    return "\n\n".join(parts)


def _guidelines(context: JudgeContext) -> str:
    return f"Grading guidelines:\n{context.guidelines.strip() or NO_GUIDELINES}"


class _Prompt:
    version: str

    def messages(self, context: JudgeContext, relevant_grade: int, max_document_chars: int) -> list[dict[str, str]]:
        user = self.user(context, relevant_grade, _pair_text(context, max_document_chars))
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def read(self, reply: str, scale: Scale, relevant_grade: int) -> Reading:
        text = _think_removed(reply)
        if not text:
            return Reading(None, None, "", "the reply was empty")
        return self.read_answer(text, scale, relevant_grade)

    def user(self, context: JudgeContext, relevant_grade: int, pair: str) -> str:
        raise NotImplementedError

    def read_answer(self, text: str, scale: Scale, relevant_grade: int) -> Reading:
        raise NotImplementedError


class BinaryPrompt(_Prompt):
    version = "evret-binary-v1"

    def user(self, context: JudgeContext, relevant_grade: int, pair: str) -> str:
        scale = context.scale
        relevant = next(g for g in scale.grades if g.value == relevant_grade)
        meaning = relevant.label + (f" ({relevant.cue})" if relevant.cue else "")
        return (f"{_guidelines(context)}\n\n{pair}\n\n"
                f"Question: is this document relevant to the search, that is, would the guidelines grade it "
                f"{meaning}? Judge what the document means, not whether it uses the same words, and keep the "
                f"searcher's query in mind.\n\nReply with the single word YES or NO.")

    def read_answer(self, text: str, scale: Scale, relevant_grade: int) -> Reading:
        first_line = text.splitlines()[0]
        match = re.match(r"^[\W_]*(yes|no)\b", first_line, flags=re.IGNORECASE)
        words = {word.lower() for word in re.findall(r"\b(yes|no)\b", first_line, flags=re.IGNORECASE)}
        if not match or len(words) > 1:
            return Reading(None, None, "", "the reply does not start with YES or NO")
        relevant = match.group(1).lower() == "yes"
        grade = relevant_grade if relevant else scale.lowest
        return Reading(grade, 1.0 if relevant else 0.0, _short(f"The model answered: {text}"))


class GradedPrompt(_Prompt):
    version = "umbrela-graded-v1"

    def user(self, context: JudgeContext, relevant_grade: int, pair: str) -> str:
        values = ", ".join(str(v) for v in context.scale.values)
        return (f"{_guidelines(context)}\n\nGrades (give exactly one of these numbers):\n"
                f"{_grade_lines(context.scale)}\n\n{pair}\n\n"
                "Work it out step by step, silently: what does the searcher most likely want; how well does the "
                "document's content meet that; how trustworthy is the document; then weigh these as the "
                "guidelines say and choose one grade.\n\n"
                "Reply with one short sentence giving your main reason, then a last line of the form\n"
                f"Final grade: N\nwhere N is one of {values}.")

    def read_answer(self, text: str, scale: Scale, relevant_grade: int) -> Reading:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        match = re.fullmatch(r"[#*_\s]*final\s+grade\s*[:=]?\s*[*_]*\s*(-?\d+)\s*[*_.]*", lines[-1], flags=re.IGNORECASE)
        if match is None:
            return Reading(None, None, "", "the reply's last line is not 'Final grade: N'")
        grade = int(match.group(1))
        if grade not in scale.values:
            return Reading(None, None, "", f"the grade {grade} is not on the scale {scale.values}")
        reason = " ".join(lines[:-1]) or "(no reason given)"
        return Reading(grade, float(grade), _short(reason))


PROMPTS = {prompt.version: prompt for prompt in (BinaryPrompt(), GradedPrompt())}
