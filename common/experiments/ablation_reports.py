"""An ablation study's runs read back and reported: `<logdir>/curves.csv`, `<logdir>/summary.md` and
`<logdir>/curves.png` (`write_reports`), from run directories `<logdir>/<variant>/seed<seed>` that
`common.experiments.ablation_runner` or anything else wrote.

A run's directory holds `episodes.csv` with the header
`frames,episode_return,episode_length,wall_time` (training episodes; frames = environment frames
consumed when the episode ended; wall_time = seconds since the run started), and may hold `eval.csv`
with the header `frames,episode_return,hns,wall_time`.

Choices (the papers compare final scores and learning curves but fix no procedure for seeds):

* final score of a run = mean return of the episodes that ended in the last 10% of that run's frames
  (the same rule for training and evaluation episodes); a variant reports the mean ± sample standard
  deviation (ddof = 1) of its runs' final scores over seeds;
* HNS, where the game is an Atari (or DMLab-30) game, comes from `common.equations.metrics` with a
  named normaliser, and every HNS column names it; the `hns` column of eval.csv is not used, so all
  numbers share one table;
* curves are sampled on one frames grid shared by all runs (100 points); each point is the mean
  return of the run's episodes that ended in the trailing 5% of the largest frame count; the plot
  shows the mean over seeds and shades the range between the lowest and highest seed.
"""

import csv
import dataclasses
import os
import re
from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.figure import Figure

from common.equations import metrics
from common.runtime import runlog

# What a run writes, as common.runtime.runlog defines it (the reports only read it).
EPISODES_CSV, EVAL_CSV = runlog.EPISODES_CSV, runlog.EVAL_CSV
EPISODES_COLUMNS, EVAL_COLUMNS = runlog.EPISODES_HEADER, runlog.EVAL_HEADER
CURVES_COLUMNS = ("variant", "seed", "source", "frames", "wall_time", "episode_return", "hns")
CURVES_CSV, SUMMARY_MD, CURVES_PNG = "curves.csv", "summary.md", "curves.png"

# choice: the final score averages the episodes of the last 10% of frames: late enough to be
# "final", wide enough to average over many episodes (training episodes are noisy; see the module
# docstring).
FINAL_FRACTION = 0.1
# choice: 100 curve points and a trailing window of 5% of the frames: smooth, still shows the trend.
GRID_POINTS = 100
SMOOTHING_FRACTION = 0.05


@dataclasses.dataclass(frozen=True)
class Episodes:
    """The episodes of one CSV file, in file order."""

    frames: np.ndarray
    returns: np.ndarray
    wall_time: np.ndarray


@dataclasses.dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    train: Episodes
    eval: Episodes | None


@dataclasses.dataclass(frozen=True)
class SeedStat:
    """One number per seed, with its mean and sample standard deviation (nan for a single seed)."""

    per_seed: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_seed))

    @property
    def std(self) -> float:
        return float(np.std(self.per_seed, ddof=1)) if len(self.per_seed) > 1 else float("nan")


@dataclasses.dataclass(frozen=True)
class VariantSummary:
    """Final scores (see `final_score`), frames and wall time of one variant over its seeds.

    The HNS fields are None without a game; the eval fields are None unless every run wrote
    eval.csv.
    """

    variant: str
    seeds: tuple[int, ...]
    final_return: SeedStat
    final_hns: SeedStat | None
    final_eval_return: SeedStat | None
    final_eval_hns: SeedStat | None
    frames: SeedStat
    wall_time: SeedStat


@dataclasses.dataclass(frozen=True)
class AblationSummary:
    logdir: str
    game: str | None
    normaliser: str | None
    variants: tuple[VariantSummary, ...]

    def __getitem__(self, variant: str) -> VariantSummary:
        for summary in self.variants:
            if summary.variant == variant:
                return summary
        raise KeyError(f"no variant {variant!r}; variants are {[v.variant for v in self.variants]}")

    @property
    def curves_csv(self) -> str:
        return os.path.join(self.logdir, CURVES_CSV)

    @property
    def summary_md(self) -> str:
        return os.path.join(self.logdir, SUMMARY_MD)

    @property
    def curves_png(self) -> str:
        return os.path.join(self.logdir, CURVES_PNG)


def run_logdir(logdir: str, variant: str, seed: int | str) -> str:
    """Where the run of `variant` with `seed` writes its logs: <logdir>/<variant>/seed<seed>."""
    return os.path.join(logdir, variant, f"seed{seed}")


# ---------------------------------------------------------------------------------------------------
# Reading runs.


def read_episodes(path: str, columns: Sequence[str]) -> Episodes:
    """Frames, returns and wall times from a CSV with (at least) `columns`; ValueError naming the
    file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"{path}: header {reader.fieldnames} lacks {missing}; expected {','.join(columns)}"
            )
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path} has a header but no episodes")
    try:
        values = {
            c: np.array([float(row[c]) for row in rows])
            for c in ("frames", "episode_return", "wall_time")
        }
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{path}: frames, episode_return and wall_time must be numbers ({error})"
        ) from None
    return Episodes(values["frames"], values["episode_return"], values["wall_time"])


def read_run(logdir: str, variant: str, seed: int) -> Run:
    directory = run_logdir(logdir, variant, seed)
    eval_path = os.path.join(directory, EVAL_CSV)
    return Run(
        variant=variant,
        seed=seed,
        train=read_episodes(os.path.join(directory, EPISODES_CSV), EPISODES_COLUMNS),
        eval=read_episodes(eval_path, EVAL_COLUMNS) if os.path.exists(eval_path) else None,
    )


def discover_runs(logdir: str) -> dict[str, list[int]]:
    """{variant: seeds} for every <logdir>/<variant>/seed<N>/episodes.csv, sorted by name and
    seed."""
    found: dict[str, list[int]] = {}
    for variant in sorted(os.listdir(logdir)):
        variant_dir = os.path.join(logdir, variant)
        if not os.path.isdir(variant_dir):
            continue
        seeds = sorted(
            int(match.group(1))
            for entry in os.listdir(variant_dir)
            if (match := re.fullmatch(r"seed(-?\d+)", entry))
            and os.path.isfile(os.path.join(variant_dir, entry, EPISODES_CSV))
        )
        if seeds:
            found[variant] = seeds
    return found


# ---------------------------------------------------------------------------------------------------
# Scores and curves.


def final_score(episodes: Episodes, fraction: float = FINAL_FRACTION) -> float:
    """Mean return of the episodes that ended in the last `fraction` of the run's frames.

    The window [(1 - fraction) * max frames, max frames] always holds the last episode, so it is
    never empty.
    """
    in_window = episodes.frames >= (1.0 - fraction) * episodes.frames.max()
    return float(np.mean(episodes.returns[in_window]))


def smoothed_curve(episodes: Episodes, grid: np.ndarray, window: float) -> np.ndarray:
    """At each grid point g, the mean return of the episodes that ended in (g - window, g]; nan if
    none."""
    order = np.argsort(episodes.frames, kind="stable")
    frames, returns = episodes.frames[order], episodes.returns[order]
    cumulative = np.concatenate([[0.0], np.cumsum(returns)])
    end = np.searchsorted(frames, grid, side="right")
    start = np.searchsorted(frames, grid - window, side="right")
    count = end - start
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (cumulative[end] - cumulative[start]) / count, np.nan)


# Returns -> HNS in percent for the reported game; None without a game.
HnsFn = Callable[[Sequence[float] | np.ndarray], np.ndarray] | None


def _summarize_variant(runs: Sequence[Run], hns: HnsFn) -> VariantSummary:
    def stat(values) -> SeedStat:
        return SeedStat(tuple(float(v) for v in values))

    train = [final_score(run.train) for run in runs]
    evals = [run.eval for run in runs if run.eval is not None]
    evaluations = [final_score(e) for e in evals] if len(evals) == len(runs) else None
    return VariantSummary(
        variant=runs[0].variant,
        seeds=tuple(run.seed for run in runs),
        final_return=stat(train),
        final_hns=stat(hns(train)) if hns else None,
        final_eval_return=stat(evaluations) if evaluations else None,
        final_eval_hns=stat(hns(evaluations)) if hns and evaluations else None,
        frames=stat(run.train.frames.max() for run in runs),
        wall_time=stat(run.train.wall_time.max() for run in runs),
    )


# ---------------------------------------------------------------------------------------------------
# Reports.


def _number(x) -> str:
    """Shortest exact text for a number: '1000' for frames, '20.5' for a return."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def _write_curves_csv(path: str, runs: Sequence[Run], hns: HnsFn) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CURVES_COLUMNS)
        for run in runs:
            for source, episodes in (("train", run.train), ("eval", run.eval)):
                if episodes is None:
                    continue
                normalised = (
                    map(_number, hns(episodes.returns)) if hns else [""] * len(episodes.returns)
                )
                for frames, wall, ret, h in zip(
                    episodes.frames, episodes.wall_time, episodes.returns, normalised
                ):
                    numbers = [_number(frames), _number(wall), _number(ret)]
                    writer.writerow([run.variant, run.seed, source, *numbers, h])


def _format_stat(stat: SeedStat | None) -> str:
    if stat is None:
        return "—"
    return f"{stat.mean:.2f}" if len(stat.per_seed) == 1 else f"{stat.mean:.2f} ± {stat.std:.2f}"


def _summary_markdown(summary: AblationSummary, command: str | None, heading: str) -> str:
    columns = [
        ("variant", lambda v: v.variant),
        ("seeds", lambda v: ", ".join(map(str, v.seeds))),
        ("final return", lambda v: _format_stat(v.final_return)),
    ]
    if summary.game:
        columns.append((f"final HNS % ({summary.normaliser})", lambda v: _format_stat(v.final_hns)))
    if any(v.final_eval_return is not None for v in summary.variants):
        columns.append(("final eval return", lambda v: _format_stat(v.final_eval_return)))
        if summary.game:
            columns.append(
                (
                    f"final eval HNS % ({summary.normaliser})",
                    lambda v: _format_stat(v.final_eval_hns),
                )
            )
    columns += [
        ("frames (mean)", lambda v: f"{v.frames.mean:,.0f}"),
        ("wall time (mean)", lambda v: runlog.format_duration(v.wall_time.mean)),
    ]
    lines = [f"# {heading}", ""]
    if command:
        lines += [f"Each run: `{command}`", ""]
    if summary.game:
        assert summary.normaliser is not None  # set with the game (`write_reports`)
        source = metrics.get_normaliser(summary.normaliser).source
        lines += [f"Game: {summary.game}. HNS normaliser: `{summary.normaliser}` ({source}).", ""]
    lines += [
        f"Final score of a run: mean return of the episodes that ended in the last {FINAL_FRACTION:.0%} of "
        "its frames (training episodes from episodes.csv, evaluation episodes from eval.csv). "
        "Each cell: mean ± sample standard deviation (ddof = 1) over seeds.",
        "",
        "| " + " | ".join(name for name, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(cell(v) for _, cell in columns) + " |" for v in summary.variants]
    return "\n".join(lines) + "\n"


def _plot_curves(path: str, runs: Sequence[Run], variants: Sequence[str], title: str) -> None:
    sources = [("train", "training episodes")]
    if any(r.eval is not None for r in runs):
        sources.append(("eval", "evaluation episodes"))
    max_frames = max(
        float(ep.frames.max()) for r in runs for ep in (r.train, r.eval) if ep is not None
    )
    grid = np.linspace(max_frames / GRID_POINTS, max_frames, GRID_POINTS)
    window = SMOOTHING_FRACTION * max_frames
    figure = Figure(figsize=(7 * len(sources), 4.5), layout="constrained")
    for axes, (source, label) in zip(figure.subplots(1, len(sources), squeeze=False)[0], sources):
        for variant in variants:
            curves = [
                smoothed_curve(getattr(r, source), grid, window)
                for r in runs
                if r.variant == variant and getattr(r, source) is not None
            ]
            if not curves:
                continue
            seeds = np.ma.masked_invalid(
                np.stack(curves)
            )  # masked: no warnings where all seeds are nan
            # Markers keep sparse curves (a few evaluations) visible where a line has no two
            # neighbours.
            (line,) = axes.plot(
                grid,
                seeds.mean(axis=0).filled(np.nan),
                marker="o" if source == "eval" else None,
                markersize=3,
                label=f"{variant} ({len(curves)} seed{'' if len(curves) == 1 else 's'})",
            )
            axes.fill_between(
                grid,
                seeds.min(axis=0).filled(np.nan),
                seeds.max(axis=0).filled(np.nan),
                color=line.get_color(),
                alpha=0.2,
                linewidth=0,
            )
        axes.set_title(f"{title}: {label}")
        axes.set_xlabel("environment frames")
        axes.set_ylabel(f"episode return (mean over trailing {SMOOTHING_FRACTION:.0%} of frames)")
        axes.grid(alpha=0.3)
        axes.legend()
    figure.savefig(path, dpi=100)


def write_reports(
    logdir: str,
    variants: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    game: str | None = None,
    normaliser: str = metrics.DEFAULT_NORMALISER,
    command: str | None = None,
    heading: str = "Ablation summary",
) -> AblationSummary:
    """Write curves.csv, summary.md and curves.png into `logdir` from its run directories.

    variants / seeds: the runs to report (every <variant>/seed<N>/episodes.csv under `logdir` when
    None). game: an Atari-57 or DMLab-30 name known to `common.equations.metrics`; adds HNS with
    `normaliser`. command: the run command template, quoted in summary.md; heading: its title.
    """
    if not os.path.isdir(logdir):
        raise ValueError(f"logdir {logdir!r} is not a directory")
    found = discover_runs(logdir)
    variants = list(found) if variants is None else list(variants)
    plan = {v: found.get(v, []) if seeds is None else list(seeds) for v in variants}
    missing = [f"{v}/seed{s}" for v, ss in plan.items() for s in ss if s not in found.get(v, [])]
    missing += [f"{v}/seed*" for v, ss in plan.items() if not ss]
    if not variants or missing:
        raise ValueError(
            f"no {EPISODES_CSV} for {missing or 'any run'} under {logdir!r}; "
            f"expected <logdir>/<variant>/seed<N>/{EPISODES_CSV}"
        )
    hns: HnsFn = None
    if game is not None:
        table = metrics.get_normaliser(normaliser)
        game = table.game(game)

        def hns(returns: Sequence[float] | np.ndarray) -> np.ndarray:
            return np.atleast_1d(
                metrics.human_normalized_score(game, np.asarray(returns, dtype=float), table)
            )

    runs = [read_run(logdir, v, s) for v, ss in plan.items() for s in ss]
    summary = AblationSummary(
        logdir=logdir,
        game=game,
        normaliser=normaliser if game is not None else None,
        variants=tuple(
            _summarize_variant([r for r in runs if r.variant == v], hns) for v in variants
        ),
    )
    _write_curves_csv(summary.curves_csv, runs, hns)
    with open(summary.summary_md, "w") as f:
        f.write(_summary_markdown(summary, command, heading))
    _plot_curves(
        summary.curves_png, runs, variants, game or os.path.basename(os.path.abspath(logdir))
    )
    return summary
