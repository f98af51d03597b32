"""Which of a query's pool documents to judge next: pool order, random, Move-To-Front or the MM-NS bandit.

Pure logic, no Django (`judgments.ops.serving_order` feeds it a round's pairs and writes the priorities back; its twin
`judgments.lib.pooling` builds the pool and its ``priority``, which is the ``pool`` order here).

A query's pool comes from runs (its *rankings*: each run's pooled documents, best rank first, from the pairs'
provenance). The adaptive orders treat the runs as the arms of a bandit (Losada, Parapar & Barreiro, "Feeling
Lucky? Multi-armed Bandits for Ordering Judgements in Pooling-based Evaluation", SAC 2016; "Multi-armed bandits
for adjudicating documents in pooling-based evaluation of information retrieval systems", IP&M 53(5), 2017):

- Pulling a run judges its next document: the best-ranked one of its ranking not judged yet. A document that
  another run's pull judged already is skipped by every run; a run with nothing left is never pulled.
- The judgment counts for the pulled run only; the other runs that retrieved the document get no reward or
  penalty from it (they skip it when they reach it), as in the papers, where only the arm played is updated.
- ``mtf``, Move-To-Front (Cormack, Palmer & Clarke, "Efficient construction of large test collections",
  SIGIR 1998): every run starts with the same priority; the run with the highest priority is pulled and stays
  pulled while its documents are relevant; a non-relevant one lowers its priority by one, and the judging
  moves to the run then highest.
- ``mmns``, MaxMean non-stationary (Losada et al. 2016, 2017): each run's chance of giving a relevant document
  has a Beta(1, 1) prior, so after ``rel`` relevant documents of ``judged`` its posterior mean is
  ``(1 + rel) / (2 + judged)`` (MaxMean, MM, pulls the run with the largest mean). A run's documents get less
  likely to be relevant as it goes down its ranking, so the non-stationary variant forgets: each time a run is
  pulled, its counts so far are multiplied by ``DISCOUNT`` before the new outcome is added, so recent
  judgments weigh more than old ones. The discount's value (0.9) is this module's choice, not one taken from the
  papers; ``benchmarks/fewer_judgments_order.py`` measures the result against Move-To-Front and pool order.
- Ties between runs go to the run just pulled if its document was relevant (it stays pulled), then to the run
  pulled least recently (never pulled first), then to a seeded order of the runs (the papers break ties at
  random): so the runs take turns, and the same seed gives the same order every time.
- ``random``: a seeded hash of each document (the same document gets the same place whatever else is in the
  pool, so pairs added later slot in); ``pool``: the pool's own priority order.

`judging_sequence` is the whole order when each label is revealed as it is judged (what a benchmark needs).
`priorities` is what an app serving one pair at a time needs: from the labels so far, in the order they were
given, it replays the pulls and ranks the documents still to judge; its top document is the one
`judging_sequence` judges next. A document judged out of that order (two raters at once, a pair graded from the
bulk page) is credited to the run it was next for, or, when it was next for none, to the best run that
retrieved it, by the same rule that picks the run to pull.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

ORDERS = ("pool", "random", "mtf", "mmns")
ADAPTIVE = ("mtf", "mmns")
# MM-NS: the weight a run's earlier outcomes keep each time it is pulled again.
DISCOUNT = 0.9

Doc = Hashable


def random_priority(seed: int, doc: Doc) -> float:
    """A stable pseudo-random number in [0, 1) for a document under a seed: the ``random`` order's priority."""
    digest = hashlib.blake2b(f"{seed}:{doc}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def run_tie_break(seed: int, run: str) -> float:
    """The seeded rank of a run among runs that tie on every other count (larger goes first)."""
    return random_priority(seed, f"run:{run}")


def judging_sequence(order: str, rankings: Mapping[str, Sequence[Doc]], labels: Mapping[Doc, bool], *,
                     pool_order: Sequence[Doc], seed: int) -> list[Doc]:
    """Every pool document in the order `order` judges them, each label (missing: not relevant) revealed
    when its document is judged."""
    _check(order, rankings, pool_order)
    if order == "pool":
        return list(pool_order)
    if order == "random":
        return sorted(pool_order, key=lambda doc: -random_priority(seed, doc))
    bandit = _Bandit(order, rankings, seed)
    sequence = []
    while (pulled := bandit.choose()) is not None:
        doc = bandit.next_doc(pulled)
        bandit.credit(pulled, doc, bool(labels.get(doc, False)))
        sequence.append(doc)
    return sequence + [doc for doc in pool_order if doc not in bandit.judged]


def priorities(order: str, rankings: Mapping[str, Sequence[Doc]], judged: Mapping[Doc, bool], *,
               pool_order: Sequence[Doc], seed: int) -> dict[Doc, float]:
    """The pool documents not judged yet, each with its priority (larger = judge sooner).

    `judged` holds the labels so far in the order they were given (a dict keeps it). For the adaptive orders the
    ranking after the first document is the order the runs would be pulled in if their scores stayed as they
    are now (each run's remaining documents in rank order, best run first), which is what a second rater
    working on the same query at the same time is best served.
    """
    _check(order, rankings, pool_order)
    if order in ADAPTIVE:
        ranked = _replay(order, rankings, judged, seed).remaining()
        listed = set(ranked)
        ranked += [doc for doc in pool_order if doc not in judged and doc not in listed]
    elif order == "random":
        return {doc: random_priority(seed, doc) for doc in pool_order if doc not in judged}
    else:
        ranked = [doc for doc in pool_order if doc not in judged]
    return {doc: float(len(ranked) - place) for place, doc in enumerate(ranked)}


def _check(order: str, rankings: Mapping[str, Sequence[Doc]], pool_order: Sequence[Doc]) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown judging order {order!r}: choose one of {', '.join(ORDERS)}")
    pooled = set(pool_order)
    if len(pooled) != len(pool_order):
        raise ValueError("the pool order lists a document twice")
    for run, ranking in rankings.items():
        outside = [doc for doc in ranking if doc not in pooled]
        if outside:
            raise ValueError(f"run {run!r} ranks {outside[0]!r}, which is not in the pool order")
        if len(set(ranking)) != len(ranking):
            raise ValueError(f"run {run!r} ranks a document twice")


def _replay(order: str, rankings: Mapping[str, Sequence[Doc]], judged: Mapping[Doc, bool], seed: int) -> _Bandit:
    """The bandit's state after the judgments in `judged`, replayed in the order they were given."""
    bandit = _Bandit(order, rankings, seed)
    for doc, relevant in judged.items():
        runs = bandit.runs_next_at(doc) or bandit.runs_retrieving(doc)
        if runs:
            bandit.credit(bandit.best_of(runs), doc, bool(relevant))
        else:  # in no ranking: nothing to learn from it
            bandit.judged.add(doc)
    return bandit


@dataclass
class _Arm:
    ranking: Sequence[Doc]
    tie_break: float
    # Move-To-Front's priority (starts at 0, one less per non-relevant document), or MM-NS's discounted counts.
    priority: int = 0
    relevant: float = 0.0
    pulls: float = 0.0
    last_pull: int = -1  # the step it was last pulled at
    cursor: int = 0  # documents before it are judged


@dataclass
class _Bandit:
    order: str
    rankings: Mapping[str, Sequence[Doc]]
    seed: int
    arms: dict[str, _Arm] = field(init=False)
    judged: set[Doc] = field(init=False, default_factory=set)
    last: str | None = field(init=False, default=None)
    last_relevant: bool = field(init=False, default=False)

    def __post_init__(self):
        self.arms = {run: _Arm(ranking, run_tie_break(self.seed, run)) for run, ranking in self.rankings.items()}

    def score(self, run: str) -> float:
        arm = self.arms[run]
        if self.order == "mtf":
            return arm.priority
        return (1 + arm.relevant) / (2 + arm.pulls)

    def _key(self, run: str) -> tuple:
        arm = self.arms[run]
        return (self.score(run), run == self.last and self.last_relevant, -arm.last_pull, arm.tie_break, run)

    def best_of(self, runs) -> str:
        return max(runs, key=self._key)

    def next_doc(self, run: str) -> Doc | None:
        arm = self.arms[run]
        while arm.cursor < len(arm.ranking) and arm.ranking[arm.cursor] in self.judged:
            arm.cursor += 1
        return arm.ranking[arm.cursor] if arm.cursor < len(arm.ranking) else None

    def live_runs(self) -> list[str]:
        return [run for run in self.arms if self.next_doc(run) is not None]

    def choose(self) -> str | None:
        live = self.live_runs()
        return self.best_of(live) if live else None

    def runs_next_at(self, doc: Doc) -> list[str]:
        return [run for run in self.arms if self.next_doc(run) == doc]

    def runs_retrieving(self, doc: Doc) -> list[str]:
        return [run for run, arm in self.arms.items() if doc in arm.ranking]

    def credit(self, run: str, doc: Doc, relevant: bool) -> None:
        """`doc` was judged as `run`'s pull: the run learns from it, every run skips it from now on."""
        arm = self.arms[run]
        if self.order == "mtf":
            arm.priority -= 0 if relevant else 1
        else:
            arm.relevant = DISCOUNT * arm.relevant + relevant
            arm.pulls = DISCOUNT * arm.pulls + 1
        arm.last_pull = len(self.judged)
        self.judged.add(doc)
        self.last, self.last_relevant = run, relevant

    def remaining(self) -> list[Doc]:
        """The documents still to judge, in the order the runs would give them if their scores stayed as now."""
        ranked, seen = [], set(self.judged)
        for run in sorted(self.live_runs(), key=self._key, reverse=True):
            for doc in self.arms[run].ranking:
                if doc not in seen:
                    seen.add(doc)
                    ranked.append(doc)
        return ranked
