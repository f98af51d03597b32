"""Measures: named, registered values with typed parameters, one canonical string each.

A :class:`Measure` is a registered family (``nDCG``) plus parameters: a rank ``cutoff``, a relevance
level ``rel`` (overrides the evaluation's level for that measure), custom nDCG ``gains``, or one float
``param`` (a recall level, RBP's persistence, F's beta, R-precision's multiplier). Its ``canonical``
string (``nDCG@10``, ``P(rel=2)@5``, ``nDCG(gains={1:1,2:3})``) is what the app stores, and
:func:`parse_measure` turns it, and every alias, back into the same Measure:

* trec_eval spellings, as on its command line or in its output: ``ndcg_cut.10``, ``P.5``, ``P_5``,
  ``iprec_at_recall.0.10``, ``ndcg.1=1,2=3``;
* ir_measures spellings: ``nDCG@10``, ``P(rel=2)@5``, ``AP``, ``RR@10``, ``R@100``, ``Judged@10``;
* the short names RAG toolkits use: ``mrr``, ``map``, ``ndcg@10``, ``P@10``, ``recall@10``.

The definitions and their formulas live with the computations in :mod:`.kernels`; this module only
names and parses. (Modelled on ir_measures ``measures/base.py`` and ``util.py::parse_measure``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Iterable

from .errors import UnknownMeasureError


@dataclass(frozen=True)
class Family:
    """A registered measure family and how it may be parameterised."""

    name: str
    trec: str | None = None
    cutoff: str = "none"  # "none", "optional", "required"
    rel: bool = False
    gains: bool = False
    param: str | None = None  # name of the float parameter, if any
    param_default: float | None = None
    params_key: str | None = None  # name of the list-of-floats parameter, if any (11pt_avg's recalls)
    aggregate: str = "mean"  # "mean", "sum", "gmean", "none" (per-query text, no summary: relstring)
    integer: bool = False
    trec_defaults: tuple = ()
    trec_cut: str | None = None  # trec_eval family for the cutoff variant (map_cut, ndcg_cut)
    doc: str = ""


@dataclass(frozen=True)
class Measure:
    """One concrete measure: a family plus its parameters. Compare and hash by canonical string."""

    name: str
    cutoff: int | None = None
    rel: int | None = None
    gains: tuple[tuple[int, float], ...] | None = None
    param: float | None = None
    params: tuple[float, ...] | None = None
    trec_printable: str | None = field(default=None, compare=False)

    @property
    def family(self) -> Family:
        return REGISTRY[self.name]

    @property
    def canonical(self) -> str:
        args = []
        if self.rel is not None:
            args.append(f"rel={self.rel}")
        if self.gains is not None:
            args.append("gains={" + ",".join(f"{lvl}:{_num(g)}" for lvl, g in self.gains) + "}")
        if self.params is not None:
            args.append(f"{self.family.params_key}=" + ",".join(_num(p) for p in self.params))
        family = self.family
        if self.param is not None and family.param != "recall":
            args.append(f"{family.param}={_num(self.param)}")
        text = self.name + (f"({','.join(args)})" if args else "")
        if family.param == "recall":
            text += f"@{_num(self.param)}"
        elif self.cutoff is not None:
            text += f"@{self.cutoff}"
        return text

    @property
    def trec_name(self) -> str | None:
        """The name trec_eval prints for this measure, or None if trec_eval has no such measure."""
        family = self.family
        if family.trec is None or self.rel is not None:
            return None
        if self.cutoff is not None:
            if family.trec_cut:
                return f"{family.trec_cut}_{self.cutoff}"
            return f"{family.trec}_{self.cutoff}" if family.cutoff == "required" else None
        if family.param == "recall":
            return f"{family.trec}_{self.param:3.2f}"
        if family.name == "Rprec" and self.param is not None:
            return f"Rprec_mult_{self.param:3.2f}"
        if self.gains is not None:
            printable = self.trec_printable or ",".join(f"{lvl}={_num(g)}" for lvl, g in self.gains)
            return f"{family.trec}_{printable}"
        if self.params is not None:
            printable = self.trec_printable or ",".join(_num(p) for p in self.params)
            return f"{family.trec}_{printable}"
        if family.param and self.param is not None and self.param != family.param_default:
            return f"{family.trec}_{family.param}={_num(self.param)}"
        return family.trec

    @property
    def relevance_sensitive(self) -> bool:
        return self.family.rel

    def __str__(self) -> str:
        return self.canonical

    def __repr__(self) -> str:
        return f"Measure({self.canonical!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Measure) and other.canonical == self.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)


def _num(value: float) -> str:
    text = f"{value:.10g}"
    return text


_F = Family
FAMILIES: tuple[Family, ...] = (
    _F("NumQ", trec="num_q", aggregate="sum", integer=True,
       doc="Number of queries evaluated (the `all` row counts them)."),
    _F("NumRet", trec="num_ret", aggregate="sum", integer=True,
       doc="Number of documents retrieved for the query (after -M)."),
    _F("NumRel", trec="num_rel", rel=True, aggregate="sum", integer=True,
       doc="Number of relevant documents in the qrels (grade >= rel)."),
    _F("NumRelRet", trec="num_rel_ret", rel=True, aggregate="sum", integer=True,
       doc="Number of relevant documents retrieved."),
    _F("AP", trec="map", cutoff="optional", trec_cut="map_cut", rel=True,
       doc="Average precision: sum over relevant retrieved docs of P@rank, divided by the number of "
           "relevant docs; with a cutoff (trec_eval map_cut) only ranks <= k count. "
           "Cite: Buckley & Voorhees, 'Evaluating evaluation measure stability', SIGIR 2000."),
    _F("GMAP", trec="gm_map", rel=True, aggregate="gmean",
       doc="AP averaged with a geometric mean, each value floored at 1e-5 as in trec_eval. "
           "Cite: Robertson, 'On GMAP', CIKM 2006."),
    _F("Rprec", trec="Rprec", rel=True, param="mult",
       doc="Precision at rank R, R the number of relevant docs (Rprec_mult: at rank mult*R)."),
    _F("Bpref", trec="bpref", rel=True,
       doc="Binary preference: (1/R) sum over judged relevant r of 1 - min(n_r, R)/min(N, R), n_r the "
           "judged non-relevant docs above r and N all judged non-relevant. "
           "Cite: Buckley & Voorhees, 'Retrieval evaluation with incomplete information', SIGIR 2004."),
    _F("GMBpref", trec="gm_bpref", rel=True, aggregate="gmean",
       doc="Bpref averaged with a geometric mean (floor 1e-5), as trec_eval's gm_bpref."),
    _F("RR", trec="recip_rank", cutoff="optional", rel=True,
       doc="Reciprocal rank of the first relevant document (0 if none, or none within the cutoff). "
           "Cite: Voorhees, 'The TREC-8 question answering track report', TREC 1999."),
    _F("P", trec="P", cutoff="required", rel=True, trec_defaults=(5, 10, 15, 20, 30, 100, 200, 500, 1000),
       doc="Precision at k: relevant docs in the top k divided by k (missing ranks count as non-relevant)."),
    _F("R", trec="recall", cutoff="required", rel=True, trec_defaults=(5, 10, 15, 20, 30, 100, 200, 500, 1000),
       doc="Recall at k: relevant docs in the top k divided by the number of relevant docs."),
    _F("infAP", trec="infAP", rel=True,
       doc="Inferred AP (grade < 0 marks pooled-but-unjudged docs). "
           "Cite: Yilmaz & Aslam, 'Estimating average precision with incomplete and imperfect judgments', CIKM 2006."),
    _F("Rprec_mult", trec="Rprec_mult", rel=True),
    _F("11pt_avg", trec="11pt_avg", rel=True, params_key="recalls",
       doc="Interpolated precision averaged over recall levels (default 0, 0.1, ..., 1)."),
    _F("nDCG", trec="ndcg", cutoff="optional", trec_cut="ndcg_cut", gains=True,
       doc="Normalised DCG: sum gain(g_i)/log2(i+1) over ranks i, divided by the same sum for the ideal "
           "ordering of all judged docs. Gains are the raw grades (custom gains ndcg.1=1,2=3 for the "
           "version without cutoff); the relevance level is ignored, as in trec_eval. "
           "Cite: Jarvelin & Kekalainen, 'Cumulated gain-based evaluation of IR techniques', TOIS 2002."),
    _F("RelP", trec="relative_P", cutoff="required", rel=True, trec_defaults=(5, 10, 15, 20, 30, 100, 200, 500, 1000),
       doc="Relative precision: relevant docs in the top k divided by min(k, R)."),
    _F("Success", trec="success", cutoff="required", rel=True, trec_defaults=(1, 5, 10),
       doc="1 if a relevant document is in the top k, else 0."),
    _F("SetP", trec="set_P", rel=True, doc="Precision of the whole retrieved set."),
    _F("SetRelP", trec="set_relative_P", rel=True, doc="Relevant retrieved divided by min(retrieved, R)."),
    _F("SetR", trec="set_recall", rel=True, doc="Recall of the whole retrieved set."),
    _F("SetAP", trec="set_map", rel=True, doc="SetP * SetR, as trec_eval's set_map."),
    _F("SetF", trec="set_F", rel=True, param="beta", param_default=1.0,
       doc="F-measure of the retrieved set: (1+b^2) P R / (b^2 P + R). Cite: van Rijsbergen, IR, 1979."),
    _F("NumNonrelJudgedRet", trec="num_nonrel_judged_ret", rel=True, aggregate="sum", integer=True,
       doc="Number of retrieved documents judged non-relevant (0 <= grade < rel)."),
    _F("IPrec", trec="iprec_at_recall", rel=True, param="recall",
       doc="Interpolated precision at a recall level: max precision at any rank whose recall reaches "
           "round(level * R) relevant docs (trec_eval 10 rounding; 9.x rounding is an option)."),
    _F("RBP", trec="rbp", param="p", param_default=0.9,
       doc="Rank-biased precision (1-p) sum gain_i p^(i-1), gains normalised to [0, 1] per query as in "
           "trec_eval. Cite: Moffat & Zobel, TOIS 27(1), 2008."),
    _F("Unjudged", trec="unj", cutoff="required", trec_defaults=(5, 10, 20),
       doc="Share of the top k without a judgment, over k (trec_eval's unj). Documents missing from the qrels "
           "or with a negative grade count; k is the denominator even when fewer were retrieved, so a 50-deep "
           "run's Unjudged@100 is half its Unjudged@50. UnjudgedShare@k divides by the documents ranked."),
    _F("UnjudgedShare", cutoff="optional",
       doc="Share of the top min(k, retrieved) without a judgment. Documents missing from the qrels or with a "
           "negative grade count, as in unj, but over the documents ranked, so a 50-deep run has the same share "
           "at 50 and 100; without a cutoff, over every retrieved document; 0 when nothing is retrieved. "
           "1 - Judged@k on qrels without negative grades."),
    _F("Judged", cutoff="optional",
       doc="Share of the top min(k, retrieved) found in the qrels, as ir_measures' Judged@k. Any grade counts, "
           "negative too; the denominator is min(k, retrieved) as in ir_measures since its PR #48; without a "
           "cutoff, every retrieved document; 0 when nothing is retrieved. Score ties are broken by docno "
           "descending, as trec_eval and every other measure here: ir_measures' judged provider takes docno "
           "ascending, so on ties across rank k the two can count different documents."),
    _F("ERR", cutoff="required", param="max",
       doc="Expected reciprocal rank: sum_r (1/r) R_r prod_{i<r} (1 - R_i) with R = (2^g - 1)/2^max. max is "
           "the scale's top grade when given (ERR(max=3)@10), else the largest grade in the qrels, which "
           "differs when nobody used the top grade. gdeval (TREC Web track; ir_measures' ERR) always divides "
           "by 2^4: it equals ERR(max=4)@k. "
           "Cite: Chapelle et al., 'Expected reciprocal rank for graded relevance', CIKM 2009."),
    _F("HitRate", cutoff="required", rel=True,
       doc="1 if any relevant document is in the top k (ranx hit_rate; equal to Success@k)."),
    # trec_eval 10.0's experimental measures (all_trec has them).
    _F("RelString", trec="relstring", params_key="len", aggregate="none",
       doc="The first len (default 10) retrieved documents' grades as text, per query only: 0-9 the grade, '>' "
           "above 9, '-' not in the qrels, '.' in the qrels with a negative grade (trec_eval's relstring)."),
    _F("Utility", trec="utility", rel=True, params_key="coefficients",
       doc="Set utility p1*a + p2*b + p3*c + p4*d over the contingency table: a relevant retrieved, b non-relevant "
           "retrieved, c relevant not retrieved, d the rest of the collection (N, trec_eval's -N, minus a, b and "
           "c). Coefficients default to 1,-1,0,0; the summary is the mean, as trec_eval's utility."),
    _F("BinG", trec="binG", rel=True,
       doc="Binary G: (1/R) sum over relevant retrieved r of 1/log2(2 + non-relevant docs above r) "
           "(trec_eval's experimental binG, 2008)."),
    _F("G", trec="G", gains=True,
       doc="Normalised gain: sum over retrieved docs of gain_i / log2(2 + C_i - S_i), S_i the gain retrieved "
           "through rank i and C_i the sum of max(ideal gain, 1) through i, divided by the ideal total gain. Gains "
           "are the grades unless given (G.1=2,2=5) (trec_eval's experimental G, 2008)."),
    _F("nDCGRel", trec="ndcg_rel", gains=True,
       doc="nDCG averaged over the relevant (positive-gain) docs: nDCG at the rank of each one retrieved, and "
           "DCG at the end of the ranking over the ideal DCG for each one missed (trec_eval's ndcg_rel)."),
    _F("RnDCG", trec="Rndcg", rel=True, gains=True,
       doc="nDCG averaged at the R levels: at each rank where the ideal gain drops to the next level, and at the "
           "end of the ranking when it is more than one document longer than the ideal one (trec_eval's "
           "experimental Rndcg); 0 when no document is relevant."),
    _F("RBPResid", trec="rbp_resid", param="p", param_default=0.9,
       doc="RBP's residual: p^n + (1-p) sum over unjudged retrieved docs of p^(rank-1), n the number retrieved; "
           "how far RBP could rise if every unjudged document had full gain; 0 without unjudged docs. "
           "Cite: Moffat & Zobel, TOIS 27(1), 2008."),
)
REGISTRY: dict[str, Family] = {f.name: f for f in FAMILIES}
REGISTRY.pop("Rprec_mult")
TREC_FAMILIES: dict[str, str] = {
    "num_q": "NumQ", "num_ret": "NumRet", "num_rel": "NumRel", "num_rel_ret": "NumRelRet", "map": "AP",
    "map_cut": "AP", "gm_map": "GMAP", "Rprec": "Rprec", "Rprec_mult": "Rprec", "bpref": "Bpref",
    "gm_bpref": "GMBpref", "recip_rank": "RR", "P": "P", "recall": "R", "infAP": "infAP",
    "11pt_avg": "11pt_avg", "ndcg": "nDCG", "ndcg_cut": "nDCG", "relative_P": "RelP", "success": "Success",
    "set_P": "SetP", "set_relative_P": "SetRelP", "set_recall": "SetR", "set_map": "SetAP", "set_F": "SetF",
    "num_nonrel_judged_ret": "NumNonrelJudgedRet", "iprec_at_recall": "IPrec", "rbp": "RBP", "unj": "Unjudged",
    "relstring": "RelString", "utility": "Utility", "binG": "BinG", "G": "G", "ndcg_rel": "nDCGRel",
    "Rndcg": "RnDCG", "rbp_resid": "RBPResid",
}
TREC_CUTOFF_DEFAULTS: dict[str, tuple] = {
    "P": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "recall": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "map_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "ndcg_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "relative_P": (5, 10, 15, 20, 30, 100, 200, 500, 1000), "success": (1, 5, 10), "unj": (5, 10, 20),
    "iprec_at_recall": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    "Rprec_mult": (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0),
}
# trec_eval's measure table order: how its output is ordered whatever the -m order.
TREC_ORDER: tuple[str, ...] = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg",
    "binG", "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P",
    "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
)
OFFICIAL = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            "iprec_at_recall", "P")
ALL_TREC = tuple(n for n in TREC_ORDER if n in TREC_FAMILIES)

ALIASES: dict[str, str] = {
    "map": "AP", "ap": "AP", "mrr": "RR", "rr": "RR", "ndcg": "nDCG", "p": "P", "precision": "P",
    "r": "R", "recall": "R", "judged": "Judged", "err": "ERR", "hitrate": "HitRate", "hit_rate": "HitRate",
    "hits": "HitRate", "success": "Success", "bpref": "Bpref", "infap": "infAP", "rprec": "Rprec",
    "rbp": "RBP", "setp": "SetP", "setr": "SetR", "setf": "SetF", "numq": "NumQ", "numret": "NumRet",
    "numrel": "NumRel", "numrelret": "NumRelRet", "iprec": "IPrec", "gmap": "GMAP", "gm_map": "GMAP",
    "unjudged": "Unjudged", "unj": "Unjudged", "relp": "RelP", "setrelp": "SetRelP", "setap": "SetAP",
    "gmbpref": "GMBpref", "numnonreljudgedret": "NumNonrelJudgedRet", "11pt_avg": "11pt_avg",
    "recip_rank": "RR",
}
_IR_RE = re.compile(r"^(?P<name>[A-Za-z0-9_]+?)(?:\((?P<args>.*)\))?(?:@(?P<at>[0-9.eE+-]+))?$")


def parse_measure(text: str | Measure) -> Measure:
    """Parse one measure name in any accepted spelling; see the module docstring."""
    if isinstance(text, Measure):
        return text
    measures = _parse(text)
    if len(measures) != 1:
        raise UnknownMeasureError(
            text, _known_names(),
            detail=f"{text!r} names {len(measures)} measures ({', '.join(m.canonical for m in measures[:4])}"
                   f"{', ...' if len(measures) > 4 else ''}); use parse_measures")
    return measures[0]


def parse_measures(texts: Iterable[str | Measure] | str) -> list[Measure]:
    """Parse several names; trec_eval lists (``P.5,10``), bare families (``P``: trec_eval's default
    cutoffs) and the sets ``official`` and ``all_trec`` expand. Duplicates are dropped, order kept."""
    if isinstance(texts, (str, Measure)):
        texts = [texts]
    out: list[Measure] = []
    seen: set[str] = set()
    for text in texts:
        for measure in ([text] if isinstance(text, Measure) else _parse(text)):
            if measure.canonical not in seen:
                seen.add(measure.canonical)
                out.append(measure)
    return out


def registered_measures() -> list[Measure]:
    """One example of every family that gives a score (with a typical cutoff), for docs and round-trip tests."""
    examples = []
    for family in REGISTRY.values():
        if family.aggregate == "none":
            continue
        if family.param == "recall":
            examples.append(Measure(family.name, param=0.5))
        elif family.cutoff == "required":
            examples.append(Measure(family.name, cutoff=10))
        else:
            examples.append(Measure(family.name))
            if family.cutoff == "optional":
                examples.append(Measure(family.name, cutoff=10))
    return examples


def _known_names() -> list[str]:
    return sorted(set(REGISTRY) | set(TREC_FAMILIES) | set(ALIASES) | {"official", "all_trec"})


def _parse(text: str) -> list[Measure]:
    raw = text
    text = text.strip()
    if not text:
        raise UnknownMeasureError(raw, _known_names(), detail="empty measure name")
    if text in ("official", "all_trec"):
        return [m for fam in (OFFICIAL if text == "official" else ALL_TREC) for m in _trec_family(fam, None, raw)]
    trec = _split_trec(text)
    if trec is not None:
        return _trec_family(trec[0], trec[1], raw)
    return [_parse_ir(text, raw)]


def _split_trec(text: str) -> tuple[str, str | None] | None:
    if text in TREC_FAMILIES:
        return text, None
    if "." in text and "@" not in text and "(" not in text:
        family, _, params = text.partition(".")
        if family in TREC_FAMILIES:
            return family, params
    for family in sorted(TREC_FAMILIES, key=len, reverse=True):
        if text.startswith(family + "_") and "@" not in text and "(" not in text:
            return family, text[len(family) + 1:]
    return None


def trec_family_measures(family: str, params: str | None = None) -> list[Measure]:
    """The measures trec_eval computes for its measure ``family`` given ``params`` (``P`` with ``"5,10"``),
    or with its default parameters when ``params`` is None."""
    return _trec_family(family, params, family if params is None else f"{family}.{params}")


def _trec_family(family: str, params: str | None, raw: str) -> list[Measure]:
    name = TREC_FAMILIES[family]

    def bad(problem: str) -> UnknownMeasureError:
        return UnknownMeasureError(raw, _known_names(), detail=f"bad parameters for {family}: {problem}")

    if family in ("ndcg", "G", "ndcg_rel", "Rndcg", "rbp", "rbp_resid", "set_F") and params:
        if family in ("ndcg", "G", "ndcg_rel", "Rndcg"):
            gains = []
            for pair in params.split(","):
                level, eq, gain = pair.partition("=")
                try:
                    gains.append((int(level), float(gain)))
                except ValueError:
                    raise bad(f"expected level=gain pairs, got {pair!r}") from None
                if not eq:
                    raise bad(f"expected level=gain pairs, got {pair!r}")
            return [Measure(name, gains=tuple(sorted(dict(gains).items())), trec_printable=params)]
        key, _, value = params.partition("=")
        expected = "beta" if family == "set_F" else "p"
        try:
            number = float(value or key if family == "set_F" else value)
        except ValueError:
            raise bad(params) from None
        if family != "set_F" and key != expected:
            raise bad(f"expected {expected}=value")
        return [Measure(name, param=number)]
    if family in ("11pt_avg", "relstring", "utility") and params:
        try:
            values = tuple(float(v) for v in params.split(","))
        except ValueError:
            raise bad(params) from None
        if family == "utility" and len(values) != 4:
            raise bad("utility takes four coefficients")
        return [Measure(name, params=values, trec_printable=params)]
    if family in TREC_CUTOFF_DEFAULTS:
        if params is None or params == "":
            values = TREC_CUTOFF_DEFAULTS[family]
        else:
            try:
                values = [float(v) for v in params.split(",")]
            except ValueError:
                raise bad(params) from None
        if family in ("iprec_at_recall", "Rprec_mult"):
            values = sorted(set(float(v) for v in values))
            return [Measure(name, param=v) for v in values]
        cutoffs = sorted(set(int(v) for v in values))
        if cutoffs and cutoffs[0] <= 0:
            raise bad("cutoffs must be positive")
        return [Measure(name, cutoff=c) for c in cutoffs]
    if params:
        raise bad(f"{family} takes no parameters")
    return [Measure(name)]


def _parse_ir(text: str, raw: str) -> Measure:
    match = _IR_RE.match(text)
    if not match:
        raise UnknownMeasureError(raw, _known_names())
    name = match["name"]
    family_name = name if name in REGISTRY else ALIASES.get(name.lower())
    if family_name is None:
        family_name = next((f for f in REGISTRY if f.lower() == name.lower()), None)
    if family_name is None:
        raise UnknownMeasureError(raw, _known_names())
    family = REGISTRY[family_name]
    args = _split_args(match["args"] or "")
    rel = gains = param = params = None
    cutoff = None
    for key, value in args.items():
        try:
            if key == "rel" and (family.rel or family.name == "NumRet"):
                rel = int(value)
            elif key == "gains" and family.gains:
                gains = _parse_gains(value)
            elif key == family.params_key:
                params = tuple(float(v) for v in value.split(","))
            elif family.param is not None and key == family.param:
                param = float(value)
            else:
                raise UnknownMeasureError(raw, _known_names(),
                                          detail=f"{family.name} does not take a {key!r} parameter")
        except ValueError as error:
            if isinstance(error, UnknownMeasureError):
                raise
            raise UnknownMeasureError(raw, _known_names(), detail=f"bad value for {key}: {value!r}") from None
    if family.name == "NumRet" and rel is not None:
        family = REGISTRY["NumRelRet"]
    at = match["at"]
    if at is not None:
        if family.param == "recall":
            param = float(at)
        elif family.cutoff == "none":
            raise UnknownMeasureError(raw, _known_names(), detail=f"{family.name} takes no cutoff")
        else:
            try:
                cutoff = int(at)
            except ValueError:
                raise UnknownMeasureError(raw, _known_names(), detail=f"cutoff must be an integer: {at!r}") from None
            if cutoff <= 0:
                raise UnknownMeasureError(raw, _known_names(), detail="cutoff must be positive")
    if family.cutoff == "required" and cutoff is None:
        raise UnknownMeasureError(raw, _known_names(), detail=f"{family.name} needs a cutoff, e.g. {family.name}@10")
    if family.param == "recall" and param is None:
        raise UnknownMeasureError(raw, _known_names(), detail="IPrec needs a recall level, e.g. IPrec@0.5")
    if gains is not None and cutoff is not None:
        raise UnknownMeasureError(raw, _known_names(), detail="custom gains are only supported without a cutoff")
    if family.name == "ERR" and param is not None and (param < 1 or param != int(param)):
        raise UnknownMeasureError(raw, _known_names(), detail=f"ERR's max is the scale's top grade, a whole number >= 1: {param!r}")
    if family.param_default is not None and param == family.param_default:
        param = None
    return Measure(family.name, cutoff=cutoff, rel=rel, gains=gains, param=param, params=params)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets: "a=1,b={1:2,3:4}" -> ["a=1", "b={1:2,3:4}"]."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def _split_args(text: str) -> dict[str, str]:
    args: dict[str, str] = {}
    for part in _split_top_level(text):
        key, eq, value = part.partition("=")
        if not eq:
            if not args:
                raise ValueError(part)
            # A list value goes on: "recalls=0.25,0.5", "coefficients=2,-1,0,0".
            last = next(reversed(args))
            args[last] += "," + part.strip()
            continue
        args[key.strip()] = value.strip()
    return args


def _parse_gains(value: str) -> tuple[tuple[int, float], ...]:
    body = value.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(value)
    pairs = {}
    for item in filter(None, (p.strip() for p in body[1:-1].split(","))):
        level, sep, gain = item.partition(":")
        if not sep:
            raise ValueError(value)
        pairs[int(level)] = float(gain)
    return tuple(sorted(pairs.items()))


def first_trec_lists(texts: Iterable[str]) -> list[str]:
    """trec_eval's rule for repeated ``-m``: a trec_eval measure named twice, or named and part of a set
    (``official``, ``all_trec``), is computed once, with the first parameter list given for it:
    ``P.5, P.10`` -> ``P.5``; ``all_trec, P.5`` -> all_trec's measures with P.5 for P. Other names pass through."""
    texts = list(texts)
    first: dict[str, str] = {}
    for text in texts:
        trec = _split_trec(text.strip())
        if trec is not None and trec[1]:
            first.setdefault(trec[0], f"{trec[0]}.{trec[1]}")
    out: list[str] = []
    for text in texts:
        stripped = text.strip()
        families = (OFFICIAL if stripped == "official" else ALL_TREC) if stripped in ("official", "all_trec") else None
        trec = _split_trec(stripped) if families is None else None
        if families is None and trec is None:
            out.append(text)
            continue
        for family in families or (trec[0],):
            chosen = first.get(family, family)
            if chosen not in out:
                out.append(chosen)
    return out


def split_measure_list(text: str) -> list[str]:
    """Split a -m argument on commas that separate measures, keeping trec_eval's ``P.5,10`` and
    parenthesised arguments together."""
    if _split_trec(text) is not None:
        return [text]
    return [part.strip() for part in _split_top_level(text)]
