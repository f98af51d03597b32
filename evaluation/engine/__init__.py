"""Verdict's metric engine: trec_eval 10.0 semantics on numpy/pyarrow arrays, no Django.

    from evaluation.engine import read_qrels, read_run, evaluate
    result = evaluate(read_qrels("qrels.txt"), read_run("run.txt"), ["nDCG@10", "AP", "P.5"])
    result.aggregate["nDCG@10"]

The command line mirrors trec_eval: ``python -m evaluation.engine QRELS RUN -q -m all_trec``.

The names below load their module on first use, so that importing the package (as ``python -m``
does before the command line starts, and as the app does for the error classes) loads neither numpy
nor pyarrow.
"""

from importlib import import_module

# The one source of the version: the wheel (pyproject.toml), `verdict --version`, `verdict-eval -v` and the API
# (GET /api/v1/version, the X-Verdict-Version header) read it from here.
__version__ = "0.1.0"

_MODULE_OF = {
    "Qrels": "data", "Run": "data", "read_qrels": "data", "read_run": "data",
    "EngineInputError": "errors", "UnknownMeasureError": "errors",
    "Evaluation": "scoring", "evaluate": "scoring", "evaluate_run_file": "scoring", "ultrarag_metrics": "scoring",
    "MIN_LABELLED": "ppi", "Estimate": "ppi", "PPIResult": "ppi", "calibration_variances": "ppi",
    "classical_mean": "ppi", "effective_labelled": "ppi", "estimate": "ppi", "plan_sample_size": "ppi",
    "ppi_mean": "ppi", "stratified": "ppi", "MeasureEstimate": "ppi", "PairComparison": "ppi",
    "Measure": "measures", "parse_measure": "measures", "parse_measures": "measures",
    "registered_measures": "measures",
    "ANSWER_MEASURES": "answers", "Answer": "answers", "AnswerTooLong": "answers",
    "compare_answers": "answers", "normalize_text": "answers", "read_predictions": "answers",
    "read_references": "answers", "read_ultrarag": "answers", "score_answer": "answers",
    "score_answers": "answers",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
