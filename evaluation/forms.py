import json

from django import forms

from judgments.forms import TopKParams
from judgments.models import AnswerRun, JudgmentListVersion, Query, QueryCollection, Round, RoundJudge, StoredRun
from judgments.ops.versions import lineage_of

from .answer_evaluations import evaluated_measures as answer_evaluated_measures
from .engine import UnknownMeasureError
from .engine.answers import ANSWER_MEASURES
from .evaluations import DEFAULT_MEASURES, LEADERBOARD_LABELS, RATERS_ONLY, evaluated_measures, measure_strings
from .judge_estimates import DEFAULT_MEASURES as ESTIMATE_MEASURES
from .judge_only_evaluations import judge_kinds
from .models import AnswerEvaluation, Evaluation


class EvaluationForm(forms.Form):
    round = forms.ModelChoiceField(queryset=Round.objects.none(), to_field_name="uuid", help_text="Its consensus labels are the qrels.")
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple)
    baseline = forms.ModelChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", required=False,
                                      empty_label="(the first run picked)",
                                      help_text="The run the others are compared with.")
    measures = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2_000, initial=" ".join(DEFAULT_MEASURES),
                               help_text="Any engine measure by name, separated by spaces: nDCG@10 AP P(rel=2)@5 ndcg_cut.20 F1@10 "
                                         "nDCG_burges@10 ...")
    ks = forms.CharField(required=False, max_length=200, label="Cutoffs", help_text="For measures named without one, e.g. 1 5 10 with nDCG P recall.")
    consensus_rule = forms.ChoiceField(required=False, choices=[("", "The round's rule")] + list(Round.Consensus.choices))
    relevance_level = forms.IntegerField(min_value=1, max_value=9, initial=1, label="Relevant from grade (-l)")
    all_queries = forms.BooleanField(required=False, label="Average over every judged query, missing ones scoring 0 (-c)")
    judged_only = forms.BooleanField(required=False, label="Drop unjudged documents before scoring (-J)")
    max_docs = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1, label="Score only the top M of each ranking (-M)")
    fill_judge = forms.ModelChoiceField(queryset=RoundJudge.objects.none(), to_field_name="uuid", required=False,
                                        label="Fill unjudged pairs with an automatic judge's grades", empty_label="(no: human labels only)",
                                        help_text="A judge of the chosen round whose calibration passed its gate. Its scores are marked "
                                                  "judge-filled wherever they are shown, with the judge's share of the labels, and the "
                                                  "leaderboard ranks them only when asked to include judge-filled evaluations.")

    list_version = forms.ModelChoiceField(queryset=JudgmentListVersion.objects.none(), to_field_name="uuid", required=False,
                                          label="Labels", empty_label="(the round's labels as they are now)",
                                          help_text="A published version of the round's list pins the labels: the same version scores the same forever.")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["list_version"].queryset = project.list_versions.select_related("lineage").order_by("lineage__name", "-number")
        # Answer rounds grade generated answers, not the documents stored runs rank.
        self.fields["round"].queryset = project.rounds.exclude(status=Round.Status.DRAFT).exclude(pool__kind="answers").order_by("-created_at")
        self.fields["runs"].queryset = self.fields["baseline"].queryset = project.runs.order_by("name")
        self.fields["fill_judge"].queryset = RoundJudge.objects.filter(round__project=project).select_related("round").order_by("round__name", "name")
        self.fields["fill_judge"].label_from_instance = lambda judge: f"{judge.name} ({judge.round.name})"

    def clean_ks(self) -> list[int]:
        text = self.cleaned_data["ks"].replace(",", " ").split()
        if not all(k.isascii() and k.isdigit() and 0 < int(k) < 2**31 for k in text):
            raise forms.ValidationError("Cutoffs are whole numbers above 0, separated by spaces.")
        return [int(k) for k in text]

    def clean(self):
        data = super().clean()
        if "measures" in data and "ks" in data:
            try:
                data["measures"] = measure_strings(data["measures"].split(), data["ks"])
            except UnknownMeasureError as problem:
                self.add_error("measures", str(problem))
            else:
                if not data["measures"]:
                    self.add_error("measures", "Name at least one measure.")
        runs, baseline = list(data.get("runs") or []), data.get("baseline")
        if baseline is not None:
            if baseline not in runs:
                self.add_error("baseline", "Pick the baseline among the runs too.")
            else:
                data["runs"] = [baseline] + [run for run in runs if run != baseline]
        version = data.get("list_version")
        if version is not None and data.get("round") is not None and version.lineage_id != lineage_of(data["round"]).pk:
            self.add_error("list_version", f"{version} is a version of another round's list: pick one of {data['round'].name}.")
        judge = data.get("fill_judge")
        if judge is not None and data.get("round") is not None and judge.round_id != data["round"].pk:
            self.add_error("fill_judge", f"{judge.name} judges another round: pick a judge of {data['round'].name}.")
        return data


class QueueUnjudgedForm(forms.Form):
    run = forms.ModelChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid")
    k = forms.IntegerField(min_value=1, max_value=1000, initial=10, label="Top k")
    into = forms.ModelChoiceField(queryset=Round.objects.none(), to_field_name="uuid", required=False, label="Into the round",
                                  empty_label="(a new draft round over a new pool)")

    def __init__(self, *args, evaluation, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = evaluation.runs.all()
        self.fields["into"].queryset = evaluation.project.rounds.exclude(status=Round.Status.CLOSED).exclude(pool__kind="answers")


# ------------------------------------------------------------------------------- query parameters


class MeasureParams(forms.Form):
    """Which of a finished evaluation's measures a page shows: nDCG@10 when it has it, else its first."""

    measure = forms.ChoiceField(required=False)

    def __init__(self, *args, evaluation, **kwargs):
        super().__init__(*args, **kwargs)
        self.measures = evaluation.measures
        self.names = [row["run"] for row in evaluation.results["runs"]]
        self.fields["measure"].choices = [(m, m) for m in self.measures]

    def clean_measure(self) -> str:
        return self.cleaned_data["measure"] or ("nDCG@10" if "nDCG@10" in self.measures else self.measures[0])


class ResultsParams(MeasureParams):
    """The per-query table: filtered by tier and segment, sorted by a run's values."""

    tier = forms.CharField(required=False, max_length=200)
    segment = forms.CharField(required=False, max_length=200)
    sort = forms.ChoiceField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["sort"].choices = [(name, name) for name in self.names]


class ComparisonParams(MeasureParams):
    run = forms.ChoiceField(required=False)  # compared with the baseline; the second run by default

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(name, name) for name in self.names[1:]]

    def clean_run(self) -> str:
        return self.cleaned_data["run"] or self.names[1]


class RankedListParams(TopKParams):
    run = forms.ChoiceField(required=False)  # a run's uuid; the evaluation's first run by default

    def __init__(self, *args, runs: list[StoredRun], **kwargs):
        super().__init__(*args, **kwargs)
        self.runs = {str(run.uuid): run for run in runs}
        self.fields["run"].choices = [(key, run.name) for key, run in self.runs.items()]

    def clean_run(self) -> StoredRun:
        chosen = self.cleaned_data["run"]
        return self.runs[chosen] if chosen else next(iter(self.runs.values()))


class LeaderboardParams(forms.Form):
    """The round (by default the newest with an evaluation) and the measure runs are ranked by, one of those
    evaluated on the round (nDCG@10 by default, when evaluated). A measure the round lacks (a link kept from
    another round) falls back to the default and `measure_missing` names it. `labels`: the raters' labels only
    (the default) or judge-filled evaluations too."""

    round = forms.ModelChoiceField(queryset=Round.objects.none(), to_field_name="uuid", required=False)
    measure = forms.CharField(required=False, max_length=100)
    labels = forms.ChoiceField(required=False, choices=list(LEADERBOARD_LABELS.items()))

    def __init__(self, *args, rounds, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["round"].queryset = rounds

    def clean_labels(self) -> str:
        return self.cleaned_data["labels"] or RATERS_ONLY

    def clean_round(self) -> Round | None:
        rounds = self.fields["round"].queryset
        return self.cleaned_data["round"] or rounds.filter(evaluations__state=Evaluation.State.DONE).distinct().first() or rounds.first()

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        available = evaluated_measures(data["round"]) if data["round"] else []
        asked = data["measure"]
        default = "nDCG@10" if "nDCG@10" in available or not available else available[0]
        data["measures"] = available
        data["measure_missing"] = asked if asked and available and asked not in available else ""
        data["measure"] = asked if asked in available else default
        return data


class NewEvaluationParams(forms.Form):
    round = forms.ModelChoiceField(queryset=Round.objects.none(), to_field_name="uuid", required=False)  # preselected

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["round"].queryset = project.rounds.all()


# ----------------------------------------------------------------------------------- answer evaluations


class AnswerEvaluationForm(forms.Form):
    query_set = forms.ModelChoiceField(queryset=QueryCollection.objects.none(), to_field_name="uuid",
                                       help_text="Its queries' reference answers are what the answers are scored against.")
    runs = forms.ModelMultipleChoiceField(queryset=AnswerRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple,
                                          label="Answer runs")
    baseline = forms.ModelChoiceField(queryset=AnswerRun.objects.none(), to_field_name="uuid", required=False,
                                      empty_label="(the first answer run picked)", help_text="The answer run the others are compared with.")
    measures = forms.MultipleChoiceField(choices=[(m, m) for m in ANSWER_MEASURES], initial=list(ANSWER_MEASURES),
                                         widget=forms.CheckboxSelectMultiple)
    all_queries = forms.BooleanField(required=False, label="Average over every query with references, unanswered ones scoring 0 (-c)")
    tokenizer = forms.ChoiceField(choices=[("ultrarag", "UltraRAG's (default; ROUGE scores 0 on non-Latin text, as UltraRAG does)"),
                                           ("unicode", "Unicode (scores non-Latin text sensibly)")], initial="ultrarag")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["query_set"].queryset = project.query_sets.all()
        self.fields["query_set"].initial = project.query_sets.filter(
            pk__in=Query.objects.exclude(references=[]).values("collection")).order_by("-created_at").first()
        self.fields["runs"].queryset = self.fields["baseline"].queryset = project.answer_runs.order_by("name")

    def clean(self):
        data = super().clean()
        runs, baseline = list(data.get("runs") or []), data.get("baseline")
        if baseline is not None:
            if baseline not in runs:
                self.add_error("baseline", "Pick the baseline among the answer runs too.")
            else:
                data["runs"] = [baseline] + [run for run in runs if run != baseline]
        return data


class AnswerMeasureParams(MeasureParams):
    """An answer evaluation's measure: F1 when it has it, else its first."""

    def clean_measure(self) -> str:
        return self.cleaned_data["measure"] or ("f1" if "f1" in self.measures else self.measures[0])


class AnswerResultsParams(AnswerMeasureParams, ResultsParams):
    """The per-query table, with one answer run's answers (the first by default) beside the references."""

    run = forms.ChoiceField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(name, name) for name in self.names]

    def clean_run(self) -> str:
        return self.cleaned_data["run"] or self.names[0]


class AnswerComparisonParams(AnswerMeasureParams, ComparisonParams):
    pass


class AnswerLeaderboardParams(forms.Form):
    """The query set (by default the newest with an answer evaluation) and the measure answer runs are ranked
    by, when one of the set's evaluations scored it (else `measure` is None)."""

    query_set = forms.ModelChoiceField(queryset=QueryCollection.objects.none(), to_field_name="uuid", required=False)
    measure = forms.CharField(required=False, max_length=100)

    def __init__(self, *args, query_sets, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["query_set"].queryset = query_sets

    def clean_query_set(self) -> QueryCollection | None:
        sets = self.fields["query_set"].queryset
        return (self.cleaned_data["query_set"] or sets.filter(answer_evaluations__state=AnswerEvaluation.State.DONE).distinct().first()
                or sets.first())

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        available = answer_evaluated_measures(data["query_set"]) if data["query_set"] else []
        asked = data["measure"]
        data["measures"] = available
        data["measure_missing"] = asked if asked and available and asked not in available else ""
        data["measure"] = asked if asked in available else None  # None: `answer_evaluations.ranking` chooses
        return data


class JudgeOnlyEvaluationForm(forms.Form):
    """A judge-only evaluation: runs, the query set whose reference answers the judge matches, the judge and the cutoffs."""

    query_set = forms.ModelChoiceField(queryset=QueryCollection.objects.none(), to_field_name="uuid",
                                       help_text="Its queries' reference answers are what the judge matches the runs' documents to.")
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple)
    judge = forms.ChoiceField(help_text="Decides whether a document matches a reference answer. Its verdicts are not checked by any rater.")
    settings = forms.CharField(required=False, max_length=2_000, label="Judge settings (JSON)", widget=forms.Textarea(attrs={"rows": 2}),
                               help_text='Empty: the judge\'s defaults (Evret\'s). For example {"min_tokens": 3, "overlap_ratio": 0.5} '
                                         "lets the token-overlap judge match short answers by their words.")
    ks = forms.CharField(max_length=200, initial="1 3 5 10", label="Cutoffs k",
                         help_text="Whole numbers from 1 to 100, separated by spaces; the judge reads each run's top max(k) documents.")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["query_set"].queryset = project.query_sets.all()
        self.fields["query_set"].initial = project.query_sets.filter(
            pk__in=Query.objects.exclude(references=[]).values("collection")).order_by("-created_at").first()
        self.fields["runs"].queryset = project.runs.order_by("name")
        self.fields["judge"].choices = judge_kinds(project)
        self.fields["judge"].initial = "token_overlap"

    def clean_settings(self) -> dict:
        text = self.cleaned_data["settings"].strip()
        try:
            value = json.loads(text) if text else {}
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Give a JSON object, {\"name\": value, ...}.")
        return value

    def clean_ks(self) -> list[int]:
        parts = self.cleaned_data["ks"].replace(",", " ").split()
        if not parts or not all(part.isascii() and part.isdigit() and 1 <= int(part) <= 100 for part in parts):
            raise forms.ValidationError("Give whole numbers from 1 to 100, separated by spaces, e.g. 1 3 5 10.")
        return sorted({int(part) for part in parts})


# ----------------------------------------------------------------------------------- estimates with a judge


class JudgeEstimateForm(forms.Form):
    """An estimate with a judge: a round planned with a random sample of queries for raters, a judge of that round that
    graded every pair, the runs, the measures, the consensus rule and alpha."""

    round = forms.ModelChoiceField(queryset=Round.objects.none(), to_field_name="uuid",
                                   help_text="Planned with a random sample of queries for raters: their labels on the sample "
                                             "correct the judge's labels on every query.")
    judge = forms.ModelChoiceField(queryset=RoundJudge.objects.none(), to_field_name="uuid", label="Automatic judge",
                                   help_text="A judge of the chosen round that has graded all its pairs.")
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), to_field_name="uuid", widget=forms.CheckboxSelectMultiple,
                                          help_text="Each pair of runs is compared, the one listed first minus the other.")
    measures = forms.CharField(max_length=2_000, initial=" ".join(ESTIMATE_MEASURES),
                               help_text="Any engine measure by name, separated by spaces: nDCG@10 AP P@10 RR ...")
    consensus_rule = forms.ChoiceField(required=False, choices=[("", "The round's rule")] + list(Round.Consensus.choices),
                                       help_text="How the raters' grades of a pair become its label.")
    alpha = forms.FloatField(min_value=0.001, max_value=0.5, initial=0.05,
                             help_text="0.05: 95% intervals, and a comparison is significant when its Holm-adjusted p is below 0.05.")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["round"].queryset = project.rounds.exclude(pool__kind="answers").order_by("-created_at")
        self.fields["round"].initial = self.fields["round"].queryset.filter(human_sample__isnull=False).first()
        self.fields["judge"].queryset = RoundJudge.objects.filter(round__project=project).select_related("round").order_by("round__name", "name")
        self.fields["judge"].label_from_instance = lambda judge: f"{judge.name} ({judge.round.name})"
        self.fields["runs"].queryset = project.runs.order_by("name")

    def clean_measures(self) -> list[str]:
        try:
            measures = measure_strings(self.cleaned_data["measures"].split())
        except UnknownMeasureError as problem:
            raise forms.ValidationError(str(problem)) from None
        if not measures:
            raise forms.ValidationError("Name at least one measure.")
        return measures
