"""The trials of the MinAtar settings protocol (docs/guides/minatar_protocol.md): run, score, choose.

    python -m benchmarks.protocol --agent=impala --trials=0-23 --logdir=runs/protocol
    python -m benchmarks.protocol --agent=dice --report_only --logdir=runs/protocol

A trial is one row of the agent's table in docs/guides/minatar_protocol.md (its flags), run on both
tuning games with both tuning seeds at the agent's trial budget through the MinAtar grid tool:

    python -m benchmarks.minatar --agents=<agent> --games=breakout,space_invaders
        --seeds=100,101 --total_frames=<budget> --logdir=<logdir>/<agent>/trial<k> -- <flags>

so a trial that stopped resumes as any grid does (the same command again). After each trial, its
four runs' final returns (the mean of the last 100 training games at the budget) are normalised as
the grid normalises them, a run that did not reach the budget scoring 0 (random play), and the
trial's score is their interquartile mean (of four: the mean of the middle two). Every trial whose
four runs reached the budget, or whose grid stopped on a run's error, is written to
`--results_dir/<agent>.csv` (one row each, rewritten after every trial, to be committed as trials
finish; the rows of trials run elsewhere are kept, and a trial with a row and no run directory here
is not run again: a result is never replaced), and the choice so far is printed: the highest score,
a tie within 0.01 going to the lower trial index.

A trial outlives the machine it started on through its runs' curves: while its grid runs, the
grid's curves.csv and evaluations.csv (rewritten each time a run reaches the budget) are copied to
`--results_dir/<agent>/trial<k>/`, to be committed with the agent's csv; the same command on
another machine passes that curves.csv to the grid (`--curves_from`), which does not run again the
runs it holds to the budget, and scores them from it. The protocol's tables are not read from the
markdown: they are built here and `tests/benchmarks/test_protocol.py` checks that they equal it.
"""

import csv
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

import numpy as np
from absl import app, flags


from benchmarks import minatar_references

from benchmarks import minatar_runs

TUNING_GAMES = ("breakout", "space_invaders")
TUNING_SEEDS = (100, 101)
TIE = 0.01  # scores within this of the best tie (the protocol's selection rule)
POLL_S = 30.0  # how often a running trial's curves are copied to the results


def impala_trials() -> list[dict[str, float]]:
    """IMPALA's 24 combinations from Table D.1's ranges (§5.2), drawn as the protocol says and
    rounded to the three significant digits its table shows (the values the trials run)."""
    rng = np.random.default_rng(20180205)
    trials = []
    for _ in range(24):
        entropy = math.exp(rng.uniform(math.log(5e-5), math.log(1e-2)))
        learning_rate = math.exp(rng.uniform(math.log(5e-6), math.log(5e-3)))
        epsilon = [1e-1, 1e-3, 1e-5, 1e-7][rng.integers(4)]
        trials.append(
            dict(
                entropy_cost=float(f"{entropy:.3g}"),
                learning_rate=float(f"{learning_rate:.3g}"),
                rmsprop_epsilon=epsilon,
            )
        )
    return trials


def burn_in_trials(learning_rate: float) -> list[dict[str, float]]:
    """DiCE's, GDI-H3's and LBC's grid: the paper's learning rate doubled three times x batch 64
    (the paper's) and 16, the paper's values first."""
    return [
        dict(learning_rate=float(f"{learning_rate * 2**k:.3g}"), batch_size=batch)
        for batch in (64, 16)
        for k in range(4)
    ]


def reactor_trials() -> list[dict[str, float]]:
    """Reactor's learning rate (x5 steps from §3.4.1's) x acting steps per learner step (§3.4's
    5, and 20)."""
    return [
        dict(learning_rate=rate, acting_steps_per_learner_step=steps)
        for steps in (5, 20)
        for rate in (5e-5, 2.5e-4, 1.25e-3)
    ]


# agent: (trials, frames per trial run)
AGENTS = {
    "impala": (impala_trials(), 1_000_000),
    "dice": (burn_in_trials(5e-4), 500_000),  # Table 5
    "gdi_h3": (burn_in_trials(5e-4), 500_000),  # Table 6
    "lbc": (burn_in_trials(5.3e-4), 500_000),  # Table 3
    "reactor": (reactor_trials(), 200_000),
}


# agent: the factor of one more step beyond the grid's top learning rate (the edge rule)
LEARNING_RATE_STEPS = {"dice": 2, "gdi_h3": 2, "lbc": 2, "reactor": 5}


def edge_trials(agent: str, iqms: Mapping[int, float]) -> list[dict[str, float]]:
    """The edge rule's rows, once every trial of the agent's table has a score: one more row
    beyond the chosen trial's learning rate if it is the grid's top one (the next step up), and
    beyond its batch if it is the grid's smallest (half of it; burn-in papers), at the chosen
    trial's other values. They follow the table (trials 8 and 9 of a table of 8, in that order)."""
    base, _ = AGENTS[agent]
    if agent not in LEARNING_RATE_STEPS or any(i not in iqms for i in range(len(base))):
        return []
    chosen = base[choose({i: iqms[i] for i in range(len(base))})]
    rows = []
    if chosen["learning_rate"] == max(t["learning_rate"] for t in base):
        rate = chosen["learning_rate"] * LEARNING_RATE_STEPS[agent]
        rows.append({**chosen, "learning_rate": float(f"{rate:.3g}")})
    if "batch_size" in chosen and chosen["batch_size"] == min(t["batch_size"] for t in base):
        rows.append({**chosen, "batch_size": chosen["batch_size"] // 2})
    return rows


def agent_trials(agent: str, path: str) -> list[dict[str, float]]:
    """The agent's table, then its edge rows once the results in `path` score the whole table."""
    base, _ = AGENTS[agent]
    recorded = {index: float(row[-1]) for index, row in recorded_rows(path).items()}
    return base + edge_trials(agent, recorded)


def trial_flags(trial: Mapping[str, float]) -> list[str]:
    return [f"--{name}={value:g}" for name, value in trial.items()]


def trial_logdir(logdir: str, agent: str, index: int) -> str:
    return os.path.join(logdir, agent, f"trial{index}")


def kept_curves(path: str, index: int) -> str:
    """Where the curves of a trial's runs are kept beside the agent's results file `path`:
    <results_dir>/<agent>/trial<k>/curves.csv."""
    return os.path.join(os.path.splitext(path)[0], f"trial{index}", minatar_runs.CURVES_CSV)


def keep_curves(logdir: str, agent: str, index: int, path: str) -> None:
    """Copies the trial grid's curves.csv and evaluations.csv (those it has) beside `path`."""
    kept = os.path.dirname(kept_curves(path, index))
    for name in (minatar_runs.CURVES_CSV, minatar_runs.EVALUATIONS_CSV):
        source = os.path.join(trial_logdir(logdir, agent, index), name)
        if os.path.isfile(source):
            os.makedirs(kept, exist_ok=True)
            shutil.copyfile(source, os.path.join(kept, name))


def grid_command(
    agent: str,
    trial: Mapping[str, float],
    index: int,
    logdir: str,
    parallel: int,
    curves_from: str | None = None,
) -> list[str]:
    _, budget = AGENTS[agent]
    return [
        sys.executable,
        "-m",
        minatar_runs.TOOL,
        f"--agents={agent}",
        f"--games={','.join(TUNING_GAMES)}",
        f"--seeds={','.join(map(str, TUNING_SEEDS))}",
        f"--total_frames={budget}",
        f"--logdir={trial_logdir(logdir, agent, index)}",
        f"--parallel={parallel}",
        *([f"--curves_from={curves_from}"] if curves_from else []),
        "--",
        *trial_flags(trial),
    ]


def run_scores(
    returns: Mapping[tuple[str, int], float], references: Mapping[str, Mapping[str, float]]
) -> dict[tuple[str, int], float]:
    """Normalised score of each tuning run; a run without a final return (nan: it did not reach
    the budget) scores 0, random play."""
    scores = {}
    for game in TUNING_GAMES:
        random, reference = minatar_references.normaliser(references, game)
        for seed in TUNING_SEEDS:
            value = returns.get((game, seed), math.nan)
            scores[game, seed] = (
                float(minatar_references.normalise(value, random, reference))
                if math.isfinite(value)
                else 0.0
            )
    return scores


def interquartile_mean(values: Sequence[float]) -> float:
    """The mean of the values left after dropping the lowest and highest quarter (rliable's IQM;
    of four values, the middle two)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    cut = len(ordered) // 4
    return float(ordered[cut : len(ordered) - cut].mean())


def choose(scores: Mapping[int, float]) -> int:
    """The trial with the highest score; scores within `TIE` of the best go to the lowest index."""
    best = max(scores.values())
    return min(index for index, score in scores.items() if score >= best - TIE)


def trial_returns(
    logdir: str, agent: str, index: int, kept: str | None = None
) -> dict[tuple[str, int], float]:
    """Final return of each tuning run of a trial that has a run directory (nan short of the
    budget), or without one, whose curve in the kept curves.csv `kept` reaches the budget."""
    _, budget = AGENTS[agent]
    curves = minatar_runs.read_curves([kept] if kept and os.path.isfile(kept) else [])
    returns = {}
    for game in TUNING_GAMES:
        for seed in TUNING_SEEDS:
            directory = minatar_runs.run_dir(trial_logdir(logdir, agent, index), agent, game, seed)
            if not os.path.isdir(directory):
                elsewhere = minatar_runs.finished_elsewhere(curves, agent, game, seed, budget)
                if elsewhere:
                    returns[game, seed] = elsewhere.final
                continue
            try:
                result = minatar_runs.read_result(
                    trial_logdir(logdir, agent, index), agent, game, seed, budget
                )
            except ValueError:  # stopped before its first game ended: no episodes yet
                returns[game, seed] = math.nan
                continue
            returns[game, seed] = result.final if result.reached else math.nan
    return returns


def write_results(
    path: str, agent: str, results: Mapping[int, Mapping[tuple[str, int], float]], references
) -> dict[int, float]:
    """Writes one row per trial (flags, the four runs' returns and normalised scores, the IQM),
    keeping the rows already in `path` of trials without runs here (trials run elsewhere, whose
    rows were committed), and returns {trial: IQM} of all of them."""
    trials, budget = agent_trials(agent, path), AGENTS[agent][1]
    runs = [(game, seed) for game in TUNING_GAMES for seed in TUNING_SEEDS]
    header = ["trial", *trials[0], "budget"]
    header += [f"return_{game}_{seed}" for game, seed in runs]
    header += [f"score_{game}_{seed}" for game, seed in runs] + ["iqm"]
    rows = {index: row for index, row in recorded_rows(path).items() if index not in results}
    for index, returns in results.items():
        scores = run_scores(returns, references)
        iqm = interquartile_mean(list(scores.values()))
        rows[index] = (
            [str(index), *(f"{v:g}" for v in trials[index].values()), str(budget)]
            + [f"{returns.get(run, math.nan):.4g}" for run in runs]
            + [f"{scores[run]:.4f}" for run in runs]
            + [f"{iqm:.4f}"]
        )
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows[index] for index in sorted(rows))
    return {index: float(row[-1]) for index, row in rows.items()}


def recorded_rows(path: str) -> dict[int, list[str]]:
    """{trial: its row} of a results file (empty without one)."""
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {int(row[0]): row for row in list(csv.reader(f))[1:]}


def parse_trials(text: str, count: int) -> list[int]:
    """'0-3,7' -> [0, 1, 2, 3, 7]; ValueError naming the flag on a bad or out-of-range index."""
    indices: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            indices += range(int(low), int(high or low) + 1)
        except ValueError:
            raise ValueError(f"--trials={text}: write indices and ranges, e.g. 0-3,7") from None
    bad = [i for i in indices if not 0 <= i < count]
    if bad:
        raise ValueError(f"--trials={text}: the table has trials 0-{count - 1}, not {bad}")
    return indices


FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_enum("agent", None, list(AGENTS), "The agent whose trials run.")
    flags.DEFINE_string("trials", None, "Trial indices and ranges, e.g. 0-23 (default: all).")
    flags.DEFINE_string("logdir", "runs/protocol", "Where the trials' runs go.")
    flags.DEFINE_string(
        "results_dir", "docs/results/minatar_protocol", "Where <agent>.csv is written."
    )
    flags.DEFINE_integer("parallel", 1, "Runs of a trial at a time (benchmarks.minatar's).")
    flags.DEFINE_bool("report_only", False, "Score the trials that have runs; run nothing.")
    flags.mark_flag_as_required("agent")


def main(argv):
    del argv
    path = os.path.join(FLAGS.results_dir, f"{FLAGS.agent}.csv")
    trials = agent_trials(FLAGS.agent, path)
    try:
        indices = parse_trials(FLAGS.trials or f"0-{len(trials) - 1}", len(trials))
    except ValueError as error:
        sys.exit(str(error))
    references = minatar_references.read_references()
    for index in [] if FLAGS.report_only else indices:
        if index in recorded_rows(path) and not os.path.isdir(
            trial_logdir(FLAGS.logdir, FLAGS.agent, index)
        ):
            print(f"[protocol] {FLAGS.agent} trial {index}: in {path} already, not run again")
            continue
        kept = kept_curves(path, index)
        command = grid_command(
            FLAGS.agent,
            trials[index],
            index,
            FLAGS.logdir,
            FLAGS.parallel,
            curves_from=kept if os.path.isfile(kept) else None,
        )
        print(f"[protocol] {FLAGS.agent} trial {index}: {' '.join(command[1:])}", flush=True)
        failed = []
        if run_keeping_curves(command, FLAGS.logdir, FLAGS.agent, index, path) > 0:
            # A run failed (not a signal: a stop).
            print(f"[protocol] trial {index}: the grid stopped; its unfinished runs score 0")
            failed = [index]
        elif not trial_returns(FLAGS.logdir, FLAGS.agent, index, kept):
            sys.exit(f"[protocol] trial {index}: the grid exited 0 but started no run: {command}")
        report(FLAGS.agent, FLAGS.logdir, path, references, failed)
    report(FLAGS.agent, FLAGS.logdir, path, references)


def run_keeping_curves(command: list[str], logdir: str, agent: str, index: int, path: str) -> int:
    """Runs a trial's grid, copying its curves to the results every `POLL_S` seconds and at the
    end; its exit status."""
    process = subprocess.Popen(command)
    try:
        while True:
            try:
                process.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                keep_curves(logdir, agent, index, path)
    except KeyboardInterrupt:  # the grid had the same signal: let it stop its runs
        process.wait()
        raise
    keep_curves(logdir, agent, index, path)
    return process.returncode


def report(agent: str, logdir: str, path: str, references, failed: Sequence[int] = ()) -> None:
    """Scores the trials whose four runs reached the budget, and those of `failed` (their grid
    stopped on a run's error: its unfinished runs score 0); a trial still under way is not
    scored."""
    trials = agent_trials(agent, path)
    runs = len(TUNING_GAMES) * len(TUNING_SEEDS)
    results = {}
    for index in range(len(trials)):
        returns = trial_returns(logdir, agent, index, kept_curves(path, index))
        finished = len(returns) == runs and all(map(math.isfinite, returns.values()))
        if finished or (returns and index in failed):
            results[index] = returns
    if not results and not recorded_rows(path):
        print(f"[protocol] {agent}: no trial has runs under {logdir} or a row in {path}")
        return
    iqms = write_results(path, agent, results, references)
    chosen = choose(iqms)
    trials = agent_trials(agent, path)
    edges = range(len(AGENTS[agent][0]), len(trials))
    if any(index not in iqms for index in edges):
        print(
            f"[protocol] {agent}: the choice is on the grid's edge; trials {list(edges)} run next"
        )
    print(
        f"[protocol] {agent}: {len(iqms)} of {len(trials)} trials scored ({path}); best so far "
        f"trial {chosen} ({' '.join(trial_flags(trials[chosen]))}), IQM {iqms[chosen]:.3f}",
        flush=True,
    )


if __name__ == "__main__":
    define_flags()
    app.run(main)
