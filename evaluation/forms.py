from django import forms

from judgments.models import Round, StoredRun

from .engine import UnknownMeasureError
from .evaluations import DEFAULT_MEASURES, measure_strings


class EvaluationForm(forms.Form):
    round = forms.ModelChoiceField(queryset=Round.objects.none(), help_text="Its consensus labels are the qrels.")
    runs = forms.ModelMultipleChoiceField(queryset=StoredRun.objects.none(), widget=forms.CheckboxSelectMultiple)
    baseline = forms.ModelChoiceField(queryset=StoredRun.objects.none(), required=False, empty_label="(the first run picked)",
                                      help_text="The run the others are compared with.")
    measures = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), initial=" ".join(DEFAULT_MEASURES),
                               help_text="Any engine measure by name, separated by spaces: nDCG@10 AP P(rel=2)@5 ndcg_cut.20 ...")
    ks = forms.CharField(required=False, label="Cutoffs", help_text="For measures named without one, e.g. 1 5 10 with nDCG P recall.")
    consensus_rule = forms.ChoiceField(required=False, choices=[("", "The round's rule")] + list(Round.Consensus.choices))
    relevance_level = forms.IntegerField(min_value=1, initial=1, label="Relevant from grade (-l)")
    all_queries = forms.BooleanField(required=False, label="Average over every judged query, missing ones scoring 0 (-c)")
    judged_only = forms.BooleanField(required=False, label="Drop unjudged documents before scoring (-J)")
    max_docs = forms.IntegerField(required=False, min_value=1, label="Score only the top M of each ranking (-M)")

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["round"].queryset = project.rounds.exclude(status=Round.Status.DRAFT).order_by("-created_at")
        self.fields["runs"].queryset = self.fields["baseline"].queryset = project.runs.order_by("name")

    def clean_ks(self) -> list[int]:
        text = self.cleaned_data["ks"].replace(",", " ").split()
        if not all(k.isdigit() and int(k) > 0 for k in text):
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
        return data


class QueueUnjudgedForm(forms.Form):
    run = forms.ModelChoiceField(queryset=StoredRun.objects.none())
    k = forms.IntegerField(min_value=1, max_value=1000, initial=10, label="Top k")
    into = forms.ModelChoiceField(queryset=Round.objects.none(), required=False, label="Into the round",
                                  empty_label="(a new draft round over a new pool)")

    def __init__(self, *args, evaluation, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = evaluation.runs.all()
        self.fields["into"].queryset = evaluation.project.rounds.exclude(status=Round.Status.CLOSED)
