"""The MinAtar grid's statistics (`benchmarks.minatar`): a report's runs, normalised scores and their
interquartile mean with bootstrap intervals over seeds, and the orderings of agents by the
probability of improvement."""

import dataclasses
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np


from benchmarks.minatar_references import normalise, normaliser
from benchmarks.minatar_runs import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    CURVES_CSV,
    EVALUATIONS_CSV,
    PUBLISHED_FRAMES,
    RunResult,
    SHORT_BUDGET,
    SUMMARY_MD,
    agent_spec,
    default_variant,
    paper_ablations,
)


# ---------------------------------------------------------------------------------------------
# Reports.


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """An agent's IQM of normalised scores over `seeds` (each with runs on every game)."""

    seeds: tuple[int, ...]
    scores: np.ndarray  # [len(seeds), games]
    iqm: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class GridReport:
    logdir: str
    agents: tuple[str, ...]
    games: tuple[str, ...]
    seeds: tuple[int, ...]
    budgets: dict[str, int]  # agent -> the frames of its runs
    results: tuple[RunResult, ...]
    references: dict[str, dict[str, float]]
    aggregates: dict[str, Aggregate | None]
    curves_from: tuple[str, ...] = ()  # where the runs finished elsewhere come from

    @property
    def short_budget(self) -> list[str]:
        """The agents whose budget is below the references' (PUBLISHED_FRAMES)."""
        return [a for a in self.agents if self.budgets[a] < PUBLISHED_FRAMES]

    def name(self, agent: str) -> str:
        """An agent as summary.md's tables write it: SHORT_BUDGET marks a short budget."""
        return f"{agent}{SHORT_BUDGET}" if agent in self.short_budget else agent

    def runs(self, agent: str, game: str) -> list[RunResult]:
        return [r for r in self.results if r.agent == agent and r.game == game]

    def finals(self, agent: str, game: str) -> np.ndarray:
        return np.array([r.final for r in self.runs(agent, game)])

    def evaluations(self, agent: str, game: str) -> np.ndarray:
        """The final evaluations of the agent's runs on the game that have one."""
        values = np.array([r.evaluation for r in self.runs(agent, game)])
        return values[np.isfinite(values)]

    @property
    def curves_csv(self) -> str:
        return os.path.join(self.logdir, CURVES_CSV)

    @property
    def evaluations_csv(self) -> str:
        return os.path.join(self.logdir, EVALUATIONS_CSV)

    @property
    def summary_md(self) -> str:
        return os.path.join(self.logdir, SUMMARY_MD)

    def figure(self, game: str) -> str:
        return os.path.join(self.logdir, f"{game}.png")


def mean_and_standard_error(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation, ddof 1, over sqrt(n); nan for n = 1)."""
    array = np.asarray(values, dtype=float)
    if array.size > 1:
        return float(array.mean()), float(array.std(ddof=1) / math.sqrt(array.size))
    return float(array.mean()), math.nan


def bootstrap_interval(
    scores: tuple[np.ndarray, ...],
    statistic: Callable[..., float],
    reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """(statistic, CI low, CI high) of `statistic(*scores)`, each score matrix [runs, games]:
    rliable's `get_interval_estimates`, a stratified bootstrap (runs resampled within each game,
    each matrix on its own) with a 95% percentile interval. rliable 1.2 draws its resamples from
    numpy's global generator and ignores the `random_state` it passes on, so the global generator
    is seeded with `seed` for the call (and given its state back after): the same scores give the
    same interval."""
    from rliable import library as rly

    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # arch 7 warns that rliable passes it a RandomState by its old keyword.
            warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
            arrays = tuple(np.asarray(m, dtype=float) for m in scores)
            points, intervals = rly.get_interval_estimates(
                # one matrix: rliable's StratifiedBootstrap; several: StratifiedIndependent...
                {"x": arrays[0] if len(arrays) == 1 else arrays},
                lambda *matrices: np.array([statistic(*matrices)]),
                reps=reps,
                confidence_interval_size=CONFIDENCE,
                random_state=np.random.RandomState(seed),
            )
    finally:
        np.random.set_state(saved)
    return float(points["x"][0]), float(intervals["x"][0, 0]), float(intervals["x"][1, 0])


def interquartile_mean(
    scores: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """(IQM, CI low, CI high) of a [runs, games] score matrix: rliable's `aggregate_iqm` and its
    stratified-bootstrap 95% confidence interval (`bootstrap_interval`)."""
    from rliable import metrics as rly_metrics

    return bootstrap_interval((scores,), rly_metrics.aggregate_iqm, reps, seed)


def _aggregate(
    results: Sequence[RunResult],
    agent: str,
    games: Sequence[str],
    seeds: Sequence[int],
    references: Mapping[str, Mapping[str, float]],
) -> Aggregate | None:
    by_key = {(r.game, r.seed): r for r in results if r.agent == agent}
    # choice: rliable's score matrix is runs x games, one run per game in each row: a seed counts
    # once its runs on every game reached the budget, so a partial grid aggregates finished seeds.
    complete = [s for s in seeds if all((g, s) in by_key and by_key[g, s].reached for g in games)]
    if not complete:
        return None
    scores = np.array(
        [
            [normalise(by_key[g, s].final, *normaliser(references, g)) for g in games]
            for s in complete
        ]
    )
    return Aggregate(tuple(complete), scores, *interquartile_mean(scores))


def _improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's `metrics.probability_of_improvement` (the Mann-Whitney U statistic over n·m per
    game, then the mean over games) as one array expression: the same numbers, and the bootstrap
    calls it thousands of times, where scipy's test per game took ~10 s per ordering."""
    pairs = x[:, None, :] - y[None, :, :]  # [runs of x, runs of y, games]
    return float(np.mean((pairs > 0) + 0.5 * (pairs == 0)))


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """(P(X > Y), CI low, CI high) of two [runs, games] score matrices: the probability that a run
    of X scores above a run of Y on a game drawn uniformly (ties count one half; rliable's
    `probability_of_improvement`, `_improvement`), with its stratified-bootstrap 95% confidence
    interval (`bootstrap_interval`: each agent's runs resampled within each game)."""
    return bootstrap_interval((x, y), _improvement, reps, seed)


# choice: with one run per agent and game the bootstrap has no spread to resample, and an interval
# collapses onto its estimate (an ordering's P is then 1.0 or 0.0 from a single pair of runs): no
# interval and no verdict below this many seeds.
MIN_BOOTSTRAP_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class OrderingResult:
    """An ordering a paper claims between two agents of the grid, `better` > `worse`, measured by
    the probability of improvement over the normalised scores of their aggregates' seeds."""

    better: str
    worse: str
    source: str  # the paper, and where it makes the claim
    probability: float
    low: float
    high: float
    seeds: int  # the fewer of the two agents' seeds

    @property
    def verdict(self) -> str:
        """holds: the interval lies above 0.5; reversed: below 0.5; unresolved: it holds 0.5, or
        there are fewer than MIN_BOOTSTRAP_SEEDS seeds."""
        if self.seeds < MIN_BOOTSTRAP_SEEDS:
            return "unresolved"
        if self.low > 0.5:
            return "holds"
        if self.high < 0.5:
            return "reversed"
        return "unresolved"

    def seeds_to_resolve(self) -> float:
        """The seeds per agent at which the interval of an unresolved ordering would leave 0.5 if
        the measured probability held: the interval's half-width shrinks as 1/√seeds, so seeds ·
        (half-width / |P − 0.5|)², rounded up, and at least one more seed than measured (an
        interval that ends at 0.5 itself gives the seeds it has); inf where P = 0.5 (no
        difference measured)."""
        gap = abs(self.probability - 0.5)
        if gap == 0:
            return math.inf
        needed = self.seeds * ((self.high - self.low) / 2 / gap) ** 2
        return float(max(math.ceil(round(needed, 9)), self.seeds + 1))  # 3 · 4.000000000000001: 12


def orderings(report: "GridReport") -> list[OrderingResult]:
    """Every ordering of `<paper>/ablations.py`'s ORDERINGS whose two variants are agents of the
    report (as `<paper>.<ablation>` or an alias such as gdi_h3) with an aggregate each."""
    named: dict[tuple[str, str], str] = {}
    for agent in report.agents:
        spec = agent_spec(agent)
        if spec.module is not None:  # a test stand-in
            continue
        # A paper's main with its defaults is the variant its ablations name after the paper
        # (reactor, dice, lbc: the same config), so `reactor` is `reactor.reactor` here.
        ablation = spec.ablation or default_variant(spec.paper)
        if ablation:
            named.setdefault((spec.paper, ablation), agent)
    results = []
    for paper in dict.fromkeys(paper for paper, _ in named):
        for better, worse, source in paper_ablations(paper).ORDERINGS:
            better_agent, worse_agent = named.get((paper, better)), named.get((paper, worse))
            if better_agent is None or worse_agent is None:
                continue
            x, y = report.aggregates[better_agent], report.aggregates[worse_agent]
            if x is None or y is None:
                continue
            results.append(
                OrderingResult(
                    better_agent,
                    worse_agent,
                    f"{paper} {source}",
                    *probability_of_improvement(x.scores, y.scores),
                    min(len(x.seeds), len(y.seeds)),
                )
            )
    return results


def _orderings_markdown(results: Sequence[OrderingResult]) -> list[str]:
    lines = [
        "",
        (
            "Orderings the papers claim among these agents (each paper's `ablations.py`, "
            "ORDERINGS). P(X > Y): the probability that a run of X scores above a run of Y on a "
            "game drawn at random (rliable `probability_of_improvement` over the normalised "
            "scores of the IQM's seeds, ties count ½; 0.5 = no difference), with its "
            f"{CONFIDENCE:.0%} stratified-bootstrap confidence interval ({BOOTSTRAP_REPS} "
            "repetitions). holds: the interval lies above 0.5; reversed: below; unresolved: it "
            "holds 0.5, and the last column estimates the seeds per agent that would resolve "
            "it if the measured P held (the interval narrows as 1/√seeds: seeds · (half-width "
            "/ |P − 0.5|)², and at least one more seed than measured)."
        ),
        "",
        "| claim X > Y | where | P(X > Y) [95% CI] | seeds | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        verdict = r.verdict
        if r.seeds < MIN_BOOTSTRAP_SEEDS:
            verdict += f" (one seed: no interval; {MIN_BOOTSTRAP_SEEDS} or more give a verdict)"
        elif verdict == "unresolved":
            needed = r.seeds_to_resolve()
            verdict += " (no difference)" if math.isinf(needed) else f" (~{needed:.0f} seeds)"
        lines.append(
            f"| {r.better} > {r.worse} | {r.source} | {r.probability:.2f} "
            f"[{r.low:.2f}, {r.high:.2f}] | {r.seeds} | {verdict} |"
        )
    return lines


def _cell_text(values: Sequence[float] | np.ndarray, short: bool, digits: int = 2) -> str:
    if not len(values):
        return "—"
    mean, se = mean_and_standard_error(values)
    text = f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"
    return f"{text} ({len(values)}){'†' if short else ''}"
