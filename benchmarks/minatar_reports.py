"""The MinAtar grid's report (`benchmarks.minatar`): summary.md's tables, curves.csv, evaluations.csv
and one figure per game, from the runs of a log directory."""

import csv
import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure


from common.experiments import ablation_reports
from common.runtime import runlog
from benchmarks.minatar_references import normalise, normaliser, read_references
from benchmarks.minatar_runs import (
    AC_LAMBDA,
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    CURVES_COLUMNS,
    DQN,
    EVALUATIONS_COLUMNS,
    EVALUATIONS_CSV,
    GAMES,
    LAST_GAMES,
    PUBLISHED_FRAMES,
    RANDOM,
    REFERENCES_CSV,
    REFERENCE_NAMES,
    RunResult,
    SHORT_BUDGET,
    _last_row_frames,
    agent_spec,
    curve_grid,
    env_id,
    finished_elsewhere,
    read_curves,
    read_evaluations,
    read_result,
    run_dir,
)
from benchmarks.minatar_statistics import (
    GridReport,
    MIN_BOOTSTRAP_SEEDS,
    _aggregate,
    _cell_text,
    _orderings_markdown,
    orderings,
)


def return_at(run: RunResult, frames: int) -> float:
    """The run's curve at `frames` (the mean of its last games then), nan where its curve has no
    point there: not reached, or not on its grid (budget / CURVE_POINTS apart)."""
    hit = np.flatnonzero(np.isclose(run.curve_frames, frames, rtol=0, atol=0.5))
    return float(run.curve[hit[0]]) if hit.size else math.nan


def _evaluations_markdown(report: GridReport) -> list[str]:
    """The final evaluations, agent x game; nothing when no run has one."""
    if not any(report.evaluations(a, g).size for a in report.agents for g in report.games):
        return []
    lines = [
        "",
        (
            "Final evaluation: the mean return of the evaluation a run plays when it reaches its "
            "budget, after its last update, with its paper's own evaluator (the `eval_policy` and "
            "`eval_episodes` of `<paper>.main`; eval.csv). Each cell: mean ± standard error over "
            "the seeds that have one, (n seeds); — where none has (a run finished elsewhere brings "
            f"its evaluation from the {EVALUATIONS_CSV} beside its curves, where there is one). "
            "The training games above are played by the behaviour over the whole run, and where "
            "games are long beside the budget they lag the policy "
            "(on Freeway, 2,500 steps a game, a run of 160 environments ends its first games "
            "after 400,000 frames): this table measures the policy at the budget."
        ),
        "",
    ]
    return lines + _agent_table(report, lambda a, g: _cell_text(report.evaluations(a, g), False))


def _agent_table(report: GridReport, cell: Callable[[str, str], str]) -> list[str]:
    """A markdown table of agent x game with `cell(agent, game)` in each cell."""
    lines = ["| agent | " + " | ".join(report.games) + " |", "|---|" + "---|" * len(report.games)]
    for agent in report.agents:
        cells = [cell(agent, g) for g in report.games]
        lines.append(f"| {report.name(agent)} | " + " | ".join(cells) + " |")
    return lines


def _equal_frames_markdown(report: GridReport) -> list[str]:
    """Every agent at the budgets shorter than its own, read off its curve: whether an agent
    run short is behind because of its budget or learns slower per frame. Empty with one budget."""
    shorter = sorted({report.budgets[a] for a in report.agents})[:-1]
    if not shorter:
        return []
    games = report.games
    lines = [
        "",
        (
            "At equal frames: each agent at the budgets of the agents run shorter than it, the "
            f"mean return of its last {LAST_GAMES} training games at that frame count (its "
            "curve's point there, from the runs that reached it; — where none has a point "
            "there), and at its own budget its final returns as above. A longer run's schedules "
            "(learning rate, warm-up) anneal over its own budget, so it is at an earlier point "
            "of them there than a run of that budget. Each cell: mean ± standard error over "
            "seeds, (n seeds)."
        ),
        "",
        "| frames | agent | " + " | ".join(games) + " |",
        "|---|---|" + "---|" * len(games),
    ]
    for frames in shorter:
        for agent in report.agents:
            if report.budgets[agent] < frames:
                continue
            cells = []
            for g in games:
                runs = report.runs(agent, g)
                if report.budgets[agent] == frames:  # the table above's row
                    cells.append(
                        _cell_text(report.finals(agent, g), any(not r.reached for r in runs))
                    )
                    continue
                values = [return_at(r, frames) for r in runs]
                cells.append(_cell_text([v for v in values if not math.isnan(v)], short=False))
            lines.append(f"| {frames:,} | {report.name(agent)} | " + " | ".join(cells) + " |")
    return lines


def _summary_markdown(report: GridReport, command: str | None, template: str | None) -> str:
    games, refs = report.games, report.references
    short_budget = report.short_budget
    budgets = {report.budgets[a] for a in report.agents}
    if len(budgets) == 1:
        budget = f"budget {min(budgets):,} frames per run"
        at_budget = f"{min(budgets):,} frames"
    else:
        listed = ", ".join(f"{a} {report.budgets[a]:,}" for a in report.agents)
        budget = f"budget per run (frames): {listed}"
        at_budget = "its agent's budget"
    marked = (
        f"; {SHORT_BUDGET} = an agent run at fewer frames than the published curves (under the "
        "table)"
        if short_budget
        else ""
    )
    lines = [
        "# MinAtar grid",
        "",
        (
            f"Agents {', '.join(report.agents)}; games {', '.join(games)} "
            f"(`MinAtar/<Game>-v0`, all 6 actions); seeds {', '.join(map(str, report.seeds))}; "
            f"{budget}."
        ),
        "",
    ]
    if command:
        lines += [f"Grid (the same command resumes it): `{command}`", ""]
    if template:
        specs = {a: agent_spec(a) for a in report.agents}
        mapping = ", ".join(
            f"{a}: `{spec.module or spec.paper + '.main'}"
            f"{' --ablation=' + spec.ablation if spec.ablation else ''}`"
            for a, spec in specs.items()
        )
        lines += [f"Each run: `{template}` ({mapping}).", ""]
    lines += [
        (
            f"Final return of a run: the mean return of its last {LAST_GAMES} training games "
            f"that ended at or before {at_budget} (episodes.csv). Each cell: mean ± standard "
            "error (sample standard deviation / √n) over seeds, (n seeds); † = a run that has not "
            f"reached its budget (its last games so far){marked}. DQN and AC(λ=0.8): the "
            f"published curves at {PUBLISHED_FRAMES:,} frames (Young & Tian 2019, "
            "arXiv:1903.03176; the MinAtar README figure at "
            "kenjyoung/MinAtar@87c2bc825e0a4171040323a8164e9ecd32d14731, 30 runs each, read off "
            "by eye); random: a uniformly random policy measured with the installed minatar "
            "package (benchmarks/data/minatar_references.csv says how)."
        ),
        "",
    ]
    lines += _agent_table(
        report,
        lambda a, g: _cell_text(report.finals(a, g), any(not r.reached for r in report.runs(a, g))),
    )
    for name in (DQN, AC_LAMBDA, RANDOM):
        values = [refs.get(g, {}).get(name) for g in games]
        cells = ["—" if v is None else f"{v:.2f}" for v in values]
        lines.append(f"| {REFERENCE_NAMES[name]} | " + " | ".join(cells) + " |")
    if short_budget:
        listed = ", ".join(f"{a} {report.budgets[a]:,}" for a in short_budget)
        lines += [
            "",
            (
                f"{SHORT_BUDGET} Run at fewer frames than the references' {PUBLISHED_FRAMES:,}: "
                f"shorter than the published curves ({listed} frames)."
            ),
        ]
    lines += _evaluations_markdown(report)
    lines += [
        "",
        (
            "Normalised score per game: (final return − random) / (reference − random), "
            "reference = the better of the published DQN and AC(λ=0.8) returns (1 = the better "
            "published agent, 0 = random). Each cell: mean ± standard error over seeds. IQM: the "
            "interquartile mean (the mean of the middle 50%) of the normalised scores of all the "
            f"agent's runs on all games, with its {CONFIDENCE:.0%} stratified-bootstrap "
            "confidence interval (rliable `get_interval_estimates` with `aggregate_iqm`, "
            f"{BOOTSTRAP_REPS} repetitions resampling the runs within each game, seed "
            f"{BOOTSTRAP_SEED}), over the seeds whose runs reached their budget on every game."
        ),
        "",
        "| agent | " + " | ".join(games) + " | IQM [95% CI] | seeds in IQM |",
        "|---|" + "---|" * (len(games) + 2),
    ]
    for agent in report.agents:
        cells = []
        for g in games:
            runs = report.runs(agent, g)
            scores = normalise([r.final for r in runs], *normaliser(refs, g))
            cells.append(_cell_text(scores, any(not r.reached for r in runs)))
        aggregate = report.aggregates[agent]
        if aggregate is None:
            cells += ["—", "none on every game"]
        else:
            interval = f"[{aggregate.low:.2f}, {aggregate.high:.2f}]"
            if len(aggregate.seeds) < MIN_BOOTSTRAP_SEEDS:
                interval = "(one seed: no interval)"
            cells += [f"{aggregate.iqm:.2f} {interval}", ", ".join(map(str, aggregate.seeds))]
        lines.append(f"| {report.name(agent)} | " + " | ".join(cells) + " |")
    lines += _equal_frames_markdown(report)
    measured = orderings(report)
    if measured:
        lines += _orderings_markdown(measured)
    short = [r for r in report.results if not r.reached]
    missing = [
        f"{a}/{g}/seed{s}"
        for a in report.agents
        for g in games
        for s in report.seeds
        if not any(r.seed == s for r in report.runs(a, g))
    ]
    notes = []
    if short_budget:
        # choice: the scores of a short budget stay in the table and the IQM (what the grid ran),
        # named here, not dropped: the reader compares them knowing they are early.
        notes.append(
            f"{SHORT_BUDGET} Normalised scores and IQM of {', '.join(short_budget)}: at their "
            f"budgets (above), against the references at {PUBLISHED_FRAMES:,} frames."
        )
    if short:
        listed = ", ".join(f"{r.agent}/{r.game}/seed{r.seed} ({r.frames:,})" for r in short)
        notes.append(f"† Short of the budget (frames trained): {listed}.")
    if missing:
        notes.append(f"Not run yet: {', '.join(missing)}.")
    elsewhere = [f"{r.agent}/{r.game}/seed{r.seed}" for r in report.results if r.elsewhere]
    if elsewhere:
        notes.append(
            f"Finished elsewhere (their curves from {', '.join(report.curves_from)}; no run directory "
            f"here): {', '.join(elsewhere)}."
        )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _write_curves_csv(report: GridReport) -> None:
    with open(report.curves_csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CURVES_COLUMNS)
        for r in report.results:
            for frames, value in zip(r.curve_frames, r.curve):
                writer.writerow(
                    [
                        r.agent,
                        r.game,
                        r.seed,
                        ablation_reports._number(frames),
                        ablation_reports._number(value),
                    ]
                )


def _write_evaluations_csv(report: GridReport) -> None:
    with open(report.evaluations_csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(EVALUATIONS_COLUMNS)
        for r in report.results:
            if np.isfinite(r.evaluation):
                writer.writerow([r.agent, r.game, r.seed, ablation_reports._number(r.evaluation)])


def seed_mean_curve(
    runs: Sequence[RunResult], grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard error, seeds) over the runs' curves at each grid point, of the runs that
    have a point there (standard error nan where fewer than 2 do)."""
    values = np.full((len(runs), grid.size), np.nan)
    for i, r in enumerate(runs):
        values[i, np.searchsorted(grid, r.curve_frames)] = r.curve
    count = np.isfinite(values).sum(axis=0)
    masked = np.ma.masked_invalid(values)
    mean = masked.mean(axis=0).filled(np.nan)
    std = masked.std(axis=0, ddof=1).filled(np.nan) if len(runs) > 1 else np.full(grid.size, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(count > 1, std / np.sqrt(count), np.nan)
    return mean, se, count


# choice: a figure of more agents than this (a paper's whole study: IMPALA's has 18) puts its
# legend to the right of the axes, where it hides no curve.
LEGEND_INSIDE_MAX = 8


def agent_colours(count: int) -> list[tuple[float, ...]]:
    """One colour per agent, no two alike: matplotlib's ten up to ten agents; beyond, tab20's
    dark shades first and then its light ones (up to 20 agents; more reuse them in turn)."""
    if count <= 10:
        return [colormaps["tab10"](i) for i in range(count)]
    order = list(range(0, 20, 2)) + list(range(1, 20, 2))
    return [colormaps["tab20"](order[i % 20]) for i in range(count)]


def _plot_game(report: GridReport, game: str) -> Figure:
    """The game's figure, saved to `report.figure(game)` and returned."""
    outside = len(report.agents) > LEGEND_INSIDE_MAX
    figure = Figure(figsize=(11.5 if outside else 7.5, 4.5), layout="constrained")
    axes = figure.subplots()
    low, high, longest = [], [], 0
    for agent, colour in zip(report.agents, agent_colours(len(report.agents))):
        runs = [r for r in report.runs(agent, game) if r.curve.size]
        if not runs:
            continue
        # choice: each agent over its own budget on one frame axis; the references stay lines
        # across it (they are the published returns at 5M frames).
        grid = curve_grid(report.budgets[agent])
        mean, se, _ = seed_mean_curve(runs, grid)
        seeds = f"{len(runs)} seed{'' if len(runs) == 1 else 's'}"
        if agent in report.short_budget:
            seeds += f", {runlog.format_count(report.budgets[agent])} frames{SHORT_BUDGET}"
        axes.plot(grid, mean, color=colour, label=f"{agent} ({seeds})")
        axes.fill_between(grid, mean - se, mean + se, color=colour, alpha=0.2, linewidth=0)
        band = np.where(np.isfinite(se), se, 0.0)
        low.append(np.nanmin(mean - band))
        high.append(np.nanmax(mean + band))
        longest = max(longest, report.budgets[agent])
    references = report.references.get(game, {})
    # choice: when no curve reaches the references' frames (an ablation study at its budget), the
    # axis fits the curves and random play, which the references at 5M frames would otherwise
    # squeeze into the bottom of the figure; a reference above the axis is in the legend only.
    top = None
    if low and longest < PUBLISHED_FRAMES:
        measured = [references[RANDOM]] if RANDOM in references else []
        bottom, top = min(low + measured), max(high + measured)
        margin = 0.05 * (top - bottom) or 0.5
        bottom, top = bottom - margin, top + margin
        axes.set_ylim(bottom, top)
    styles = {DQN: ("--", "black"), AC_LAMBDA: (":", "black"), RANDOM: ("-.", "grey")}
    for name, (style, color) in styles.items():
        value = references.get(name)
        if value is not None:
            where = "published, 5M frames" if name != RANDOM else "measured"
            above = ", above the axis" if top is not None and value > top else ""
            axes.axhline(
                value,
                linestyle=style,
                color=color,
                linewidth=1,
                label=f"{REFERENCE_NAMES[name]} ({where}): {value:.1f}{above}",
            )
    axes.set_title(f"MinAtar {GAMES[game]} ({env_id(game)})")
    axes.set_xlabel("environment frames")
    axes.set_ylabel(f"mean return of the last {LAST_GAMES} training games")
    axes.grid(alpha=0.3)
    if outside:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        axes.legend(fontsize="small")
    figure.savefig(report.figure(game), dpi=100)
    return figure


def write_reports(
    logdir: str,
    agents: Sequence[str],
    games: Sequence[str],
    seeds: Sequence[int],
    budgets: Mapping[str, int],
    command: str | None = None,
    template: str | None = None,
    references: str = REFERENCES_CSV,
    curves_from: Sequence[str] = (),
    curves_only: bool = False,
) -> GridReport:
    """curves.csv, evaluations.csv, summary.md and <game>.png in `logdir` (with `curves_only`
    the two csv files alone) from the run directories of the grid that exist and the runs of
    `curves_from` finished elsewhere (module docstring); ValueError if there is none."""
    if not os.path.isdir(logdir):
        raise ValueError(f"logdir {logdir!r} is not a directory")
    table = read_references(references)
    for game in games:
        normaliser(table, game)  # every game has its references
    elsewhere = read_curves(curves_from)
    evaluations = read_evaluations(curves_from)
    found: list[RunResult] = []
    for s in seeds:
        for g in games:
            for a in agents:
                directory = run_dir(logdir, a, g, s)
                # A run that has not ended a game yet (its episodes.csv holds the header alone:
                # just started, or stopped before its first game) reports as not run yet.
                if (
                    _last_row_frames(os.path.join(directory, ablation_reports.EPISODES_CSV))
                    is not None
                ):
                    found.append(read_result(logdir, a, g, s, budgets[a]))
                elif not os.path.isdir(directory):  # a run directory here wins over the file
                    result = finished_elsewhere(elsewhere, a, g, s, budgets[a])
                    if result:
                        evaluation = evaluations.get((a, g, s), math.nan)
                        found.append(dataclasses.replace(result, evaluation=evaluation))
    results = tuple(found)
    if not results:
        raise ValueError(
            f"no {ablation_reports.EPISODES_CSV} of the grid under {logdir!r}; expected "
            f"<logdir>/<agent>/<game>/seed<S>/{ablation_reports.EPISODES_CSV}"
            + (f", or runs finished in {', '.join(curves_from)}" if curves_from else "")
        )
    report = GridReport(
        logdir=logdir,
        agents=tuple(agents),
        games=tuple(games),
        seeds=tuple(seeds),
        budgets={a: budgets[a] for a in agents},
        results=results,
        references=table,
        # choice: the aggregates' bootstrap intervals are only for summary.md.
        aggregates={
            a: None if curves_only else _aggregate(results, a, games, seeds, table) for a in agents
        },
        curves_from=tuple(curves_from),
    )
    _write_curves_csv(report)
    _write_evaluations_csv(report)
    if curves_only:
        return report
    with open(report.summary_md, "w") as f:
        f.write(_summary_markdown(report, command, template))
    for game in games:
        _plot_game(report, game)
    return report
