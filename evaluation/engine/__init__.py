"""Verdict's metric engine: trec_eval 10.0 semantics on numpy/pyarrow arrays, no Django.

    from evaluation.engine import read_qrels, read_run, evaluate
    result = evaluate(read_qrels("qrels.txt"), read_run("run.txt"), ["nDCG@10", "AP", "P.5"])
    result.aggregate["nDCG@10"]

The command line mirrors trec_eval: ``python -m evaluation.engine QRELS RUN -q -m all_trec``.
"""

from .data import Qrels, Run, read_qrels, read_run
from .errors import EngineInputError, UnknownMeasureError
from .evaluate import Evaluation, evaluate, ultrarag_metrics
from .measures import Measure, parse_measure, parse_measures, registered_measures

__all__ = [
    "EngineInputError", "Evaluation", "Measure", "Qrels", "Run", "UnknownMeasureError", "evaluate",
    "parse_measure", "parse_measures", "read_qrels", "read_run", "registered_measures", "ultrarag_metrics",
]
