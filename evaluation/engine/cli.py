"""Command line: ``python -m evaluation.engine QRELS RUN`` behaves like trec_eval 10.0.

``python -m evaluation.engine compare QRELS RUN_A RUN_B`` prints a paired significance table.
``python -m evaluation.engine answers REFERENCES PREDICTIONS`` scores generated answers (UltraRAG's
measures) and ``answers-compare REFERENCES A B`` compares two answer runs.
``python -m evaluation.engine judge-only --queries Q.jsonl --run RUN --corpus C.jsonl`` scores a run with no
labels, Evret's way: an automatic judge matches documents to each query's expected answers (uncalibrated).
``python -m evaluation.engine ppi --human QRELS --judge QRELS --labelled FILE RUN...`` estimates each run's
scores from raters' labels on a random sample of queries and a judge's labels on them all (prediction-powered).
Bad input exits with status 2 and the error on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence

from .errors import EngineInputError, UnknownMeasureError, show
from .measures import REGISTRY, TREC_FAMILIES, TREC_ORDER, Measure, first_trec_lists, parse_measures, split_measure_list

COMPARE_DEFAULTS = ("AP", "nDCG@10", "P@10", "RR")


def _measure_help() -> str:
    lines = ["measures (canonical name; trec_eval name):"]
    trec_of = {}
    for trec, family in TREC_FAMILIES.items():
        trec_of.setdefault(family, []).append(trec)
    for family in REGISTRY.values():
        at = "@k" if family.cutoff == "required" else ("[@k]" if family.cutoff == "optional" else "")
        if family.param == "recall":
            at = "@recall"
        trec = ", ".join(trec_of.get(family.name, [])) or "-"
        first = family.doc.split(". ")[0].rstrip(".")
        lines.append(f"  {family.name + at:<20} {trec:<26} {first}")
    lines += [
        "",
        "Spellings: trec_eval (P.5, P.5,10, ndcg_cut.10, ndcg.1=1,2=3, iprec_at_recall.0.10, rbp.p=0.8),",
        "ir_measures (nDCG@10, P(rel=2)@5, AP, RR@10, R@100, Judged@10) and short RAG names (mrr, map,",
        "ndcg@10, P@10, recall@10). -m official (the default) and -m all_trec select trec_eval's sets;",
        "a bare family (-m P) uses trec_eval's default cutoffs.",
    ]
    return "\n".join(lines)


def _evaluate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine",
        description="Evaluate a TREC run against qrels with trec_eval 10.0 semantics and output format. "
                    "Use 'python -m evaluation.engine compare --help' for significance testing, "
                    "'answers --help' / 'answers-compare --help' for generated answers (RAG), and 'ppi --help' for "
                    "prediction-powered estimates (raters on a sample, a judge on every query).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_measure_help())
    parser.add_argument("qrels", help="qrels file: TREC 'qid iter docno rel' or a JSON judgment list")
    parser.add_argument("run", help="run file: TREC 'qid Q0 docno rank score tag', JSON or Parquet")
    _add_common(parser)
    parser.add_argument("-q", action="store_true", help="also print each query's values (trec_eval -q)")
    parser.add_argument("--json", action="store_true", help="print JSON (aggregate and per-query values)")
    parser.add_argument("--save", metavar="PATH", help="also write the JSON result to PATH")
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                        help="measure(s) to compute; repeatable, comma lists allowed (default: official)")
    parser.add_argument("-c", action="store_true",
                        help="average over every query in the qrels; queries missing from the run score 0")
    parser.add_argument("-J", action="store_true", help="evaluate judged documents only")
    parser.add_argument("-l", type=int, default=1, metavar="N",
                        help="relevance level: relevant means grade >= N (default 1; nDCG uses raw grades)")
    parser.add_argument("-M", type=int, default=None, metavar="N", help="evaluate only the top N documents")
    parser.add_argument("--iprec-v9", action="store_true",
                        help="trec_eval 9.x rounding of recall levels in iprec_at_recall and 11pt_avg")
    parser.add_argument("--keep-first-duplicate", action="store_true",
                        help="keep the first of duplicated documents instead of stopping with an error")


def _compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine compare",
        description="Compare two runs query by query: means, paired permutation and t-test p-values, "
                    "bootstrap confidence interval of the difference, Holm-corrected significance. Both "
                    "runs are scored over every judged query either run answers (missing ones score 0).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_measure_help())
    parser.add_argument("qrels")
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    _add_common(parser)
    parser.add_argument("--resamples", type=int, default=10_000, help="permutation/bootstrap resamples")
    parser.add_argument("--seed", type=int, default=42, help="random seed")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--json", action="store_true", help="print the comparisons as JSON")
    return parser


def _measures(args: argparse.Namespace, default: Sequence[str]) -> tuple[list[Measure], bool]:
    texts = []
    for value in args.measures or default:
        texts.extend(split_measure_list(value))
    with_runid = any(t in ("official", "all_trec", "runid") for t in texts)
    measures = parse_measures(first_trec_lists(t for t in texts if t != "runid"))
    return measures, with_runid


def _trec_sorted(measures: list[Measure]) -> list[Measure]:
    def key(item: tuple[int, Measure]):
        index, m = item
        trec = m.trec_name
        if trec is None:
            return (len(TREC_ORDER), index)
        family = next((f for f in sorted(TREC_FAMILIES, key=len, reverse=True)
                       if trec == f or trec.startswith(f + "_")), None)
        if m.name == "Rprec" and m.param is not None:
            family = "Rprec_mult"
        return (TREC_ORDER.index(family) if family in TREC_ORDER else len(TREC_ORDER), index)

    return [m for _, m in sorted(enumerate(measures), key=key)]


def verdict_eval() -> int:
    """The ``verdict-eval`` console script: trec_eval_main in a process set up as ``python -m evaluation.engine``'s."""
    from .process import prepare

    prepare()
    return trec_eval_main()


def trec_eval_main(argv: Sequence[str] | None = None) -> int:
    """trec_eval 10.0's own command line (``verdict-eval``): its options, no subcommands, its output."""
    from .trec_eval import trec_eval_main as run

    return run(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "compare":
            return _compare(_compare_parser().parse_args(argv[1:]))
        if argv and argv[0] == "answers":
            return _answers(_answers_parser().parse_args(argv[1:]))
        if argv and argv[0] == "answers-compare":
            return _answers_compare(_answers_compare_parser().parse_args(argv[1:]))
        if argv and argv[0] == "ppi":
            return _ppi(_ppi_parser().parse_args(argv[1:]))
        if argv and argv[0] == "judge-only":
            return _judge_only(_judge_only_parser().parse_args(argv[1:]))
        return _evaluate(_evaluate_parser().parse_args(argv))
    except (EngineInputError, UnknownMeasureError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def _options(args: argparse.Namespace) -> dict:
    return {"relevance_level": args.l, "judged_only": args.J, "max_docs": args.M,
            "iprec_version": 9 if args.iprec_v9 else 10}


def _evaluate(args: argparse.Namespace) -> int:
    from .data import read_qrels
    from .scoring import evaluate_run_file

    measures, with_runid = _measures(args, ["official"])
    measures = _trec_sorted(measures)
    on_duplicate = "first" if args.keep_first_duplicate else "error"
    qrels = read_qrels(args.qrels, on_duplicate=on_duplicate)
    result = evaluate_run_file(qrels, args.run, measures, on_duplicate=on_duplicate, all_queries=args.c,
                               **_options(args))
    document = None
    if args.json or args.save:
        document = result.to_json()
        if not args.q:
            document.pop("per_query")
    if args.save:
        with open(args.save, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
            handle.write("\n")
    if args.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(result.to_trec_text(per_query=args.q, run_id=(result.run_id or "") if with_runid else None)
                         if with_runid else _without_runid(result, args.q))
    return 0


def _without_runid(result, per_query: bool) -> str:
    saved, result.run_id = result.run_id, None
    try:
        return result.to_trec_text(per_query=per_query)
    finally:
        result.run_id = saved


def _p(value: float) -> str:
    return f"{value:7.4f}" if value >= 0.00005 else f"{'<.0001':>7}"


def _comparison_rows(comparisons: list, args: argparse.Namespace) -> list[str]:
    """The table's rows: * marks a difference significant after Holm's correction, ? one the test could not
    have found with so few differing queries (or resamples): not enough evidence, said below the table."""
    from .significance import evidence

    found = evidence(comparisons, resamples=args.resamples, alpha=args.alpha)
    marks = {"pass": "*", "fail": " ", "insufficient": "?"}
    out = []
    for c, e in zip(comparisons, found):
        ci = f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]"
        out.append(f"{c.measure:<16} {c.A_mean:8.4f} {c.B_mean:8.4f} {c.diff:+8.4f} {ci:>19} {_p(c.p_value)} "
                   f"{_p(c.t_p_value)} {_p(c.p_corrected)}{marks[e.state]} {f'{c.wins}/{c.ties}/{c.losses}':>12}")
    out.append("")
    out.append(textwrap.fill(f"* significant at alpha={args.alpha} after Holm correction; ? not enough evidence to "
                             "tell. W/T/L counts queries where A beats, ties or loses to B.", 100))
    for reason in dict.fromkeys(r for c, e in zip(comparisons, found) for r in e.missing):
        out.append(textwrap.fill(f"? {reason}.", 100, subsequent_indent="  "))
    return out


def _compare(args: argparse.Namespace) -> int:
    from .data import read_qrels, read_run
    from .scoring import evaluate
    from .significance import compare

    measures, _ = _measures(args, COMPARE_DEFAULTS)
    on_duplicate = "first" if args.keep_first_duplicate else "error"
    qrels = read_qrels(args.qrels, on_duplicate=on_duplicate)
    run_a = read_run(args.run_a, on_duplicate=on_duplicate)
    run_b = read_run(args.run_b, on_duplicate=on_duplicate)
    answered = set(run_a.query_ids) | set(run_b.query_ids)
    per_query = []
    for run in (run_a, run_b):
        result = evaluate(qrels, run, measures, all_queries=True, **_options(args))
        per_query.append({
            m: {q: v for q, v in zip(result.query_ids, result.values[m].tolist()) if q in answered}
            for m in result.measures})
    comparisons = compare(per_query[0], per_query[1], resamples=args.resamples, seed=args.seed, alpha=args.alpha)
    if args.json:
        sys.stdout.write(json.dumps([c.as_dict() for c in comparisons], indent=2) + "\n")
        return 0
    name_a = run_a.run_id or args.run_a
    name_b = run_b.run_id or args.run_b
    header = (f"{'measure':<16} {'A':>8} {'B':>8} {'A-B':>8} {'95% CI':>19} {'p':>7} {'p_t':>7} "
              f"{'p_holm':>7} {'W/T/L':>13}")
    scored = comparisons[0].n_queries if comparisons else 0
    out = [f"A = {name_a}", f"B = {name_b}",
           f"{scored} quer{'y' if scored == 1 else 'ies'} scored: those of the {len(answered)} the runs answer that have labels "
           f"(the qrels label {len(qrels.query_ids)}); {args.resamples} resamples, seed {args.seed}"]
    if scored * 2 < len(answered):
        out.append(f"Warning: only {scored} of the {len(answered)} queries the runs answer have labels: the table "
                   "describes those queries, not the runs' whole query set.")
    out += ["", header, "-" * len(header)]
    out += _comparison_rows(comparisons, args)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


# ------------------------------------------------------------------------------------------ answers

_ANSWERS_EPILOG = """\
measures: acc, em, stringem, coverem, f1, rouge-1, rouge-2, rouge-l (default: all eight), as UltraRAG's
evaluation server computes them, on texts normalised by its normalize_text.

inputs:
  references   JSONL {"query_id": "q1", "answers": ["Paris", "City of Paris"]}
               or TSV query_id<TAB>answer, one reference a line
  predictions  JSONL {"query_id": "q1", "answer": "Paris", "cites": ["doc1"]} (cites optional)
               or TSV query_id<TAB>answer
  With one file only, it is UltraRAG's JSON with the parallel lists pred_ls and gt_ls (samples "0", "1", ...).

--tokenizer unicode scores non-Latin text: words are runs of Unicode letters, marks and digits, each Han,
Hiragana or Katakana character a word. The default (ultrarag) keeps UltraRAG's results, where ROUGE is 0 on
text without [a-z0-9] and f1/coverem see a CJK sentence as one word."""


def _answers_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                        help="measure(s) to compute; repeatable, comma lists allowed (default: all eight)")
    parser.add_argument("-c", action="store_true",
                        help="average over every query with references; queries without a prediction score 0")
    parser.add_argument("--tokenizer", choices=("ultrarag", "unicode"), default="ultrarag",
                        help="ultrarag (default, UltraRAG's numbers) or unicode (sensible on non-Latin text)")
    parser.add_argument("--processes", type=int, default=1, metavar="N",
                        help="score in N processes (default 1)")


def _answers_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine answers",
        description="Score generated answers against reference answers with UltraRAG's generation measures.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_ANSWERS_EPILOG)
    parser.add_argument("references", help="reference answers (JSONL or TSV), or UltraRAG's pred_ls/gt_ls JSON")
    parser.add_argument("predictions", nargs="?", help="predicted answers (JSONL or TSV)")
    _answers_common(parser)
    parser.add_argument("-q", action="store_true", help="also print each query's values")
    parser.add_argument("--json", action="store_true",
                        help='print {"aggregate": {measure: value}, "per_query": {measure: {query_id: value}}}')
    parser.add_argument("--ultrarag", action="store_true",
                        help='print UltraRAG\'s shape: {measure: [per-sample values], "avg_" + measure: mean}')
    parser.add_argument("--weights", metavar="FILE",
                        help="query_id<TAB>weight lines: weighted means (every scored query needs a weight)")
    return parser


def _answers_compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine answers-compare",
        description="Compare two answer runs query by query: means, paired permutation and t-test p-values, "
                    "bootstrap confidence interval of the difference, Holm-corrected significance across the "
                    "measures. Queries: those with references that either run answers (a run missing one "
                    "scores 0 there), or every query with references with -c.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_ANSWERS_EPILOG)
    parser.add_argument("references")
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    _answers_common(parser)
    parser.add_argument("--resamples", type=int, default=10_000, help="permutation/bootstrap resamples")
    parser.add_argument("--seed", type=int, default=42, help="random seed")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--json", action="store_true",
                        help="print the comparisons and UltraRAG's avg_ fields of each run as JSON")
    return parser


def _jsonable(value: float) -> float | None:
    return None if value != value else value  # NaN (no query scored) is null


def _answers(args: argparse.Namespace) -> int:
    from .answers import aggregate, parse_answer_measures, read_predictions, read_references, read_ultrarag, \
        read_weights, score_answers, ultrarag_output

    measures = parse_answer_measures(args.measures)
    if args.predictions is None:
        references, predictions = read_ultrarag(args.references)
    else:
        references = read_references(args.references)
        predictions = read_predictions(args.predictions)
    weights = read_weights(args.weights) if args.weights else None
    per_query = score_answers(references, predictions, measures, tokenizer=args.tokenizer, all_queries=args.c,
                              processes=args.processes)
    if weights is not None:
        scored = next(iter(per_query.values()), {})
        missing = [q for q in scored if q not in weights]
        if missing:
            raise EngineInputError(f"no weight for {len(missing)} scored queries, e.g. {missing[:3]}",
                                   path=args.weights)
    means = aggregate(per_query, weights)
    if args.ultrarag:
        document = ultrarag_output(per_query)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    elif args.json:
        document = {"aggregate": {m: _jsonable(v) for m, v in means.items()}}
        document["per_query"] = per_query
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        out = []
        if args.q:
            for m, values in per_query.items():
                out.extend(f"{m:<22}\t{qid}\t{value:.4f}" for qid, value in values.items())
        scored = len(next(iter(per_query.values()), {}))
        out.append(f"{'num_q':<22}\tall\t{scored}")
        out.extend(f"{m:<22}\tall\t{v:.4f}" for m, v in means.items())
        sys.stdout.write("\n".join(out) + "\n")
    return 0


def _answers_compare(args: argparse.Namespace) -> int:
    from .answers import parse_answer_measures, read_predictions, read_references, score_answers, \
        ultrarag_output
    from .significance import compare

    measures = parse_answer_measures(args.measures)
    references = read_references(args.references)
    run_a, run_b = read_predictions(args.run_a), read_predictions(args.run_b)
    answered = {q for q in references if q in run_a or q in run_b}
    chosen = {q: refs for q, refs in references.items() if args.c or q in answered}
    per_a, per_b = (score_answers(chosen, run, measures, tokenizer=args.tokenizer, all_queries=True,
                                  processes=args.processes) for run in (run_a, run_b))
    comparisons = compare(per_a, per_b, resamples=args.resamples, seed=args.seed, alpha=args.alpha)
    if args.json:
        document = {"A": args.run_a, "B": args.run_b, "n_queries": len(chosen),
                    "comparisons": [c.as_dict() for c in comparisons],
                    "ultrarag": {"A": {k: v for k, v in ultrarag_output(per_a).items() if k.startswith("avg_")},
                                 "B": {k: v for k, v in ultrarag_output(per_b).items() if k.startswith("avg_")}}}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return 0
    header = (f"{'measure':<16} {'A':>8} {'B':>8} {'A-B':>8} {'95% CI':>19} {'p':>7} {'p_t':>7} "
              f"{'p_holm':>7} {'W/T/L':>13}")
    out = [f"A = {args.run_a}", f"B = {args.run_b}",
           f"{len(chosen)} quer{'y' if len(chosen) == 1 else 'ies'} scored: "
           + ("every query with references" if args.c else
              f"those of the {len(references)} with references that either run answers")
           + f"; {args.resamples} resamples, seed {args.seed}", "", header, "-" * len(header)]
    out += _comparison_rows(comparisons, args)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


# ------------------------------------------------------------------------------------------ judge-only

_JUDGE_ONLY_EPILOG = """\
inputs:
  --queries  JSONL {"query_id": "q1", "query": "what is rag", "answers": ["RAG combines retrieval ..."]}
  --run      TREC run 'qid Q0 docno rank score tag', JSON or Parquet
  --corpus   JSONL {"doc_id": "d1", "text": "..."} (or "_id", as BEIR corpora)

Evret's evaluator (evret 0.0.3): the judge is asked about every (expected answer, document) pair of the top
max(k); a document takes the first expected answer it matches that no earlier document took, and measures
are computed on those matches (recall divides by the number of distinct expected answers). A pair the judge
could not judge counts as no match. Every query of --queries counts in the means (one without answers, or
that the run does not answer, scores 0).

The scores rest on an automatic judge no rater has checked: calibrate it against raters (in the app: a
judge-only evaluation's "Calibrate" button) before trusting them."""


def _judge_only_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine judge-only",
        description="Judge-only evaluation (uncalibrated): score a run with no relevance labels, from each "
                    "query's expected answers and an automatic judge, as Evret does.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_JUDGE_ONLY_EPILOG)
    parser.add_argument("--queries", required=True, help="queries with expected answers (JSONL)")
    parser.add_argument("--run", required=True, action="append", help="run file; repeatable to score several runs")
    parser.add_argument("--corpus", required=True, help="document texts (JSONL)")
    parser.add_argument("--judge", choices=("token_overlap", "semantic"), default="token_overlap",
                        help="the judge (default token_overlap, Evret's default)")
    parser.add_argument("--judge-settings", default="{}", metavar="JSON",
                        help='the judge\'s settings, e.g. \'{"overlap_ratio": 0.5, "min_tokens": 3}\'')
    parser.add_argument("--k", default="1,3,5,10", help="cutoffs, comma-separated (default 1,3,5,10)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    parser.add_argument("--keep-first-duplicate", action="store_true",
                        help="keep the first of duplicated documents instead of stopping with an error")
    return parser


def _judge_only(args: argparse.Namespace) -> int:
    from .data import read_run
    from .judge_only import evaluate_judge_only, judge_matcher, rankings_of, read_corpus, read_queries, result_text

    try:
        ks = [int(part) for part in args.k.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--k must be whole numbers separated by commas, not {args.k!r}") from None
    try:
        settings = json.loads(args.judge_settings)
    except json.JSONDecodeError as error:
        raise ValueError(f"--judge-settings is not JSON: {error}") from None
    if not isinstance(settings, dict):
        raise ValueError("--judge-settings must be a JSON object")
    try:
        from judgments import judges
    except ModuleNotFoundError as error:
        if error.name != "judgments":
            raise
        raise ValueError("judge-only needs Verdict's judges (judgments/judges/), which the wheel does not hold: run "
                         "python -m evaluation.engine judge-only from a checkout of Verdict") from None

    availability = judges.availability(args.judge)
    if not availability.available:
        raise ValueError(f"the {args.judge} judge cannot run here: {availability.reason}. Install with: {availability.install}")
    judge = judges.make_judge(args.judge, settings)
    queries = read_queries(args.queries)
    documents = read_corpus(args.corpus)
    on_duplicate = "first" if args.keep_first_duplicate else "error"
    runs = {}
    for path in args.run:
        run = read_run(path, on_duplicate=on_duplicate)
        runs[run.run_id or path] = rankings_of(run)
    result = evaluate_judge_only(queries, runs, documents, judge_matcher(judge), ks=ks, judge=judge.describe())
    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(result_text(result))
    return 0


# ------------------------------------------------------------------------------------------ ppi

_PPI_EPILOG = """\
inputs:
  --human     qrels of the raters' labels on the labelled queries (TREC 'qid iter docno grade' or JSON)
  --judge     qrels of the judge's labels on every query of the set (the set is the judge's queries)
  --labelled  the queries raters labelled, one query id a line: a random sample of the set, drawn before
              anyone looked at the runs (a hand-picked sample makes the intervals meaningless)
  --weights   query_id<TAB>weight lines: traffic-weighted estimates too (every query of the set needs one)

Each run is scored per query under both label sets; the PPI++ estimate is the judge's mean on the judge-only
queries corrected by the human-minus-judge difference on the labelled ones (Angelopoulos et al. 2023, with
power tuning, PPI++ 2023), with a normal-approximation interval. Pairs of runs are compared on per-query
differences, Holm-corrected across the pairs of each measure. Fewer than 10 labelled queries: numbers, but no
verdict."""


def _ppi_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.engine ppi",
        description="Prediction-powered estimates: each run's mean score from raters' labels on a random sample "
                    "of queries and an automatic judge's labels on all of them, beside the raters-only estimate "
                    "over the same queries, and paired comparisons of the runs.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_PPI_EPILOG)
    parser.add_argument("--human", required=True, metavar="QRELS", help="the raters' labels (qrels)")
    parser.add_argument("--judge", required=True, metavar="QRELS", help="the judge's labels on every query (qrels)")
    parser.add_argument("--labelled", required=True, metavar="FILE", help="the labelled query ids, one a line")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run files (TREC, JSON or Parquet)")
    parser.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                        help="measure(s); repeatable, comma lists allowed (default: AP, nDCG@10, P@10, RR)")
    parser.add_argument("-l", type=int, default=1, metavar="N",
                        help="relevance level: relevant means grade >= N (default 1; nDCG uses raw grades)")
    parser.add_argument("--weights", metavar="FILE", help="query_id<TAB>weight lines (traffic weights)")
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - the intervals' level, and the tests' alpha")
    parser.add_argument("--interval", choices=("t", "normal"), default="t",
                        help="t: unbiased spreads and Student's t with n - 1 degrees of freedom (default; holds its "
                             "level with few labelled queries); normal: ppi-python's large-sample interval")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _read_labelled(path: str, queries: set[str]) -> list[str]:
    """The labelled query ids, checked line by line: one id a line, once, and a query of the set."""
    from .answers import _lines

    found: dict[str, int] = {}
    for number, text, label in _lines(path, None, None):
        fields = text.split()
        if len(fields) != 1:
            raise EngineInputError(f"expected one query id a line, found {len(fields)} fields", path=label,
                                   line=number)
        query = fields[0]
        if query in found:
            raise EngineInputError(f"query {show(query)} is listed twice (first on line {found[query]})", path=label,
                                   line=number)
        if query not in queries:
            raise EngineInputError(f"query {show(query)} has no judge labels: the labelled queries must be part of "
                                   "the set the judge labelled", path=label, line=number)
        found[query] = number
    return list(found)  # an empty file is an error of _lines


def _per_query(qrels, run, measures, level: int) -> dict[str, dict[str, float]]:
    from .scoring import evaluate

    result = evaluate(qrels, run, measures, all_queries=True, relevance_level=level)
    return {m: dict(zip(result.query_ids, result.values[m].tolist())) for m in result.measures}


def _ppi(args: argparse.Namespace) -> int:
    from .answers import read_weights
    from .data import read_qrels, read_run
    from .ppi import estimate

    measures, _ = _measures(args, COMPARE_DEFAULTS)
    human_qrels, judge_qrels = read_qrels(args.human), read_qrels(args.judge)
    labelled = _read_labelled(args.labelled, set(judge_qrels.query_ids))
    without = [q for q in labelled if q not in set(human_qrels.query_ids)]
    if without:
        raise EngineInputError(f"{len(without)} labelled queries have no raters' labels in {args.human}, "
                               f"e.g. {show(without[:3])}", path=args.labelled)
    weights = read_weights(args.weights) if args.weights else None
    human, judge = {}, {}
    for path in args.runs:
        run = read_run(path)
        name = run.run_id if run.run_id and run.run_id not in judge else path
        if name in judge:
            raise EngineInputError("this run is given twice", path=path)
        judge[name] = _per_query(judge_qrels, run, measures, args.l)
        scored = _per_query(human_qrels, run, measures, args.l)
        human[name] = {m: {q: values[q] for q in labelled} for m, values in scored.items()}
    result = estimate(human, judge, labelled=labelled, weights=weights, alpha=args.alpha, interval=args.interval)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(_ppi_text(result))
    return 0


def _ci(low: float, high: float) -> str:
    if low != low:
        return f"{'none':>19}"
    return f"[{low:+.4f}, {high:+.4f}]" if low < 0 or high < 0 else f"[{low:.4f}, {high:.4f}]"


def _number(value: float | None, spec: str, width: int) -> str:
    if value is None or value != value:
        return f"{'-':>{width}}"
    return f"{format(value, spec):>{width}}"


def _ppi_text(result) -> str:
    from .ppi import MIN_LABELLED

    level = round(100 * (1 - result.alpha), 2)
    n, big_n = len(result.labelled), len(result.unlabelled)
    kind = "Student's t, n - 1 degrees of freedom" if result.interval == "t" else "normal approximation"
    out = [f"{n} labelled queries (raters' labels; they must be a random sample of the set) and {big_n} judge-only "
           f"queries, {n + big_n} in all; {level:g}% intervals ({kind})."]
    if n < MIN_LABELLED:
        out.append(f"Only {n} labelled queries: the numbers are shown, but no verdict rests on fewer than "
                   f"{MIN_LABELLED}.")
    runs = list(result.runs)
    width = max(len(r) for r in runs + ["run", "A"])
    for measure in next(iter(result.runs.values())):
        header = (f"{'run':<{width}} {'PPI':>7} {'interval':>19} {'human':>7} {'interval':>19} "
                  f"{'judge*':>7} {'eff. n':>7} {'lam':>5}")
        out += ["", f"{measure}: PPI estimate, human-only estimate over the same {n} labelled queries",
                header, "-" * len(header)]
        for run in runs:
            e = result.runs[run][measure]
            out.append(f"{run:<{width}} {_number(e.ppi.mean, '.4f', 7)} {_ci(e.ppi.low, e.ppi.high):>19} "
                       f"{_number(e.human.mean, '.4f', 7)} {_ci(e.human.low, e.human.high):>19} "
                       f"{_number(e.judge_mean, '.4f', 7)} {_number(e.effective_labelled, '.1f', 7)} "
                       f"{_number(e.ppi.lam, '.2f', 5)}")
            if e.weighted is not None:
                w = e.weighted
                out.append(f"{'  weighted':<{width}} {_number(w['ppi'].mean, '.4f', 7)} {_ci(w['ppi'].low, w['ppi'].high):>19} "
                           f"{_number(w['human'].mean, '.4f', 7)} {_ci(w['human'].low, w['human'].high):>19}")
        out.append(textwrap.fill(f"* judge: the automatic judge's own mean over all {n + big_n} queries, uncorrected. "
                                 "eff. n: the labelled queries a human-only estimate would need for the PPI "
                                 "interval's width.", 110))
        comparisons = result.comparisons[measure]
        if comparisons:
            out += _ppi_comparison_rows(comparisons, width)
    return "\n".join(out) + "\n"


def _ppi_comparison_rows(comparisons, width: int) -> list[str]:
    marks = {"significant": "*", "not significant": " ", "insufficient": "?"}
    header = (f"{'A':<{width}} {'B':<{width}} {'A-B':>8} {'interval':>19} {'p':>7} {'p_holm':>7}  "
              f"{'labelled needed':>15}")
    out = ["", "Paired comparisons (PPI on per-query differences A - B):", header, "-" * len(header)]
    for c in comparisons:
        needed = f"{c.queries_needed:,}" if c.queries_needed is not None else "-"
        out.append(f"{c.a:<{width}} {c.b:<{width}} {_number(c.ppi.mean, '+.4f', 8)} {_ci(c.ppi.low, c.ppi.high):>19} "
                   f"{_p(c.p) if c.p == c.p else '      -'} "
                   f"{_p(c.p_adjusted) if c.p_adjusted == c.p_adjusted else '      -'}{marks[c.state]} {needed:>15}")
    out.append(textwrap.fill("* significant after Holm's correction; ? not enough evidence (too few labelled "
                             "queries). labelled needed: about how many labelled queries in all, drawn at random, "
                             "would make the difference significant if it and the spreads stay as estimated.", 110))
    for reason in dict.fromkeys(c.reason for c in comparisons if c.state == "insufficient"):
        out.append(f"? {reason}.")
    return out
