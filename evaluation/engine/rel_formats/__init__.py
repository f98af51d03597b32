"""trec_eval's other relevance formats (``-R prefs``, ``-R qrels_prefs``, ``-R qrels_jg``), evaluated and printed
byte for byte as trec_eval 10.0 prints them: readers and measures in ``prefs`` and ``judgment_groups``, the
query loop and the printing in ``evaluate``.

    from evaluation.engine.rel_formats.evaluate import evaluate_rel_format
    text = evaluate_rel_format("prefs", "prefs.test", "prefs.results.test", ["all_prefs"], per_query=True)

The names below need no numpy, so that the command line can check ``-R`` and ``-m`` before loading it.
"""

REL_FORMATS = ("prefs", "qrels_prefs", "qrels_jg")
PREFS_MEASURES = (
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret",
    "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel",
    "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp",
)
JG_MEASURES = ("map_avgjg", "P_avgjg", "Rprec_mult_avgjg")
MEASURE_ORDER = ("runid", "num_q", *PREFS_MEASURES, *JG_MEASURES)  # trec_eval's measure table order
NICKNAMES = {
    "all_prefs": ("runid", "num_q", *PREFS_MEASURES),
    "prefs": ("runid", "num_q", *PREFS_MEASURES[:6]),
    "qrels_jg": ("runid", "num_q", *JG_MEASURES),
}
