"""Each paper's throughput on this machine, in one run: the learner alone (L), the actor fleet
alone (F), full training, and the shared-core bound 1/(1/L + 1/F).

    python -m benchmarks.agent_throughput --env=MinAtar/Breakout-v0 --seconds=60 --warmup_s=60
    python -m benchmarks.agent_throughput --agents=gdi.gdi_h3,gdi.gdi_h3_shared_torso --env=Pong
    python -m benchmarks.agent_throughput --agents=reactor --env=Pong --rows=train -- --num_actors=4
    python -m benchmarks.agent_throughput --agents=impala --env=MinAtar/Breakout-v0 --rows=profile
    python -m benchmarks.agent_throughput --env=MinAtar/Breakout-v0 --baseline=a28bd76

Each agent, `<paper>` or `<paper>.<ablation>` (as common.experiments.compare names them), runs with
its paper's default config for `--env`, as `python -m <paper>.main --env=<env>
[--ablation=<ablation>]` builds it (arguments after `--` are flags of every agent's paper, e.g.
--num_actors=4), with no evaluator, no periodic checkpoint and a frame budget no run reaches.
Agents are measured one after the other, never together, each in a process of its own
(`--agent_worker=<agent>`: the papers' flags share names, so one process parses one paper's
command line), which measures its rows one after the other with `benchmarks.throughput`'s
functions, each over `--seconds` after `--warmup_s`:

- L, the learner alone (`throughput.measure_learner`): the paper's compiled train step on a
  synthetic batch already in memory, with the shapes and dtypes of the batches its replay
  delivers (`throughput.synthetic_batch`; values do not change the cost, and a note says if the
  losses were not finite on it); updates/s, and frames/s = updates/s x the paper's new frames per
  learner step (each config's `frames_per_learner_step`). The warm-up starts after the first
  step (tracing, compilation).
- F, the actor fleet alone (`actor_fleet.measure_fleet`): the paper's actor processes acting with
  its network (a fresh learner's weights) and writing through its writer to sink tables of the
  same names and signatures that drop their oldest items and never rate-limit, so neither
  IMPALA's queue nor Reactor's or the sample-k papers' samples-per-insert limiters (which wait
  for a learner) throttle them; no learner. Frames/s as the actors report them (per finished game
  and every 100 steps of each actor, `common.replay.reports`, each report with the frames since the
  actor's previous one). The warm-up starts at the first report; the window lasts until it also
  holds --reports_per_actor reports per actor (default 3), so that a slow fleet is not measured
  between two of its reports: with 80 envs per actor on Atari (DiCE, GDI, LBC) an actor reports
  every 32,000 frames, minutes apart on 2 cores, so these windows outlast --seconds there.
- full training (`throughput.measure_training`): actors, Reverb and the learner on this machine,
  the paper's own tables and limiters: the learner's frames/s (new frames per learner step),
  the actors' reported frames/s ("acted"), updates/s, and the replay ratio, agent steps trained
  on per agent step produced: updates x batch x trained steps per item (x k with
  --reuse_mode=repeat) / produced agent steps (IMPALA's queue: 1; the sample-k papers: k = 2 by
  design; Reactor: its acting : learning ratio). The window starts after the warm-up and one
  learner step, starts and ends between learner steps, and holds at least one learner step and
  --reports_per_actor of the actors' reports per actor.
- bound = 1/(1/(s L) + 1/F), the most any schedule reaches when one set of cores runs both, and
  full training's fraction of it. s ("real share") is the share of full training's trained
  positions that held real steps: the sample-k papers pad an item after its game's end and count
  only real steps as frames, while L trains full items (`real_share`); elsewhere s = 1. Their
  learners also skip most of a short game's padding inside the step
  (`common.burn_in.burn_in_learning`), which full items do not show: for them s L understates the
  learner, and full training may exceed the bound. It assumes that L and F each keep every core
  busy: with fewer actor processes than cores (CartPole's one actor on 2 cores), learner and actors
  also run side by side and full training may exceed it; so may a window too short for the replay's
  rate limiter to hold its ratio (the limiter lets either side run ahead by its error buffer).

- profile (only when --rows names it): actor 0 alone, writing to sink tables as in F, under
  cProfile for --seconds after --warmup_s (`actor_fleet.profile_actor`): the share of the
  window in each call its loop makes (policy step, environment step, replay write, game reports,
  ...), printed under the table. It says where an actor's time goes when full training falls
  short of the bound because F is low.

With --baseline=<git revision>, each agent is measured twice in turn, first by the code of that
revision (a git worktree of it in a temporary folder, its own `benchmarks.agent_throughput` as
the worker), then by the working tree's, so both see the same machine within minutes of each
other; the table then has a row before, a row now and the ratio of the two for each agent.

The CPU line (benchmarks.machine), TensorFlow's oneDNN and thread settings and each agent's
config are printed first, then one markdown table. A row that could not be measured says n/a,
and why under the table (the worker's full output is in the log directory printed at the start).
It prints figures; it asserts nothing.
"""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

from absl import app
from absl import flags

from benchmarks import throughput

from benchmarks import actor_fleet
from benchmarks.machine import cpu_line

FLAGS = flags.FLAGS

AGENTS = ("impala", "reactor", "dice", "gdi.gdi_h3", "lbc")
ROWS = ("learner", "fleet", "train", "profile")
DEFAULT_ROWS = ROWS[:3]
WORKER_FLAG = "--agent_worker="
# choice: a worker that takes this much longer than its rows' warm-ups and windows is stuck (an
# Atari replay filling and windows of 3 reports per actor take tens of minutes on 2 cores).
WORKER_SLACK_S = 3600.0


def define_flags(worker: bool) -> None:
    """This tool's flags; a worker takes --env (and every other flag) from its paper's main."""
    flags.DEFINE_list("agents", list(AGENTS), "Agents, <paper> or <paper>.<ablation>, in turn.")
    flags.DEFINE_float("seconds", 60.0, "Measured seconds per row (F, full: at least).")
    flags.DEFINE_float("warmup_s", 60.0, "Seconds before measuring each row.")
    flags.DEFINE_list("rows", list(DEFAULT_ROWS), f"Which of {', '.join(ROWS)} to measure.")
    flags.DEFINE_integer(
        "reports_per_actor",
        actor_fleet.REPORTS_PER_ACTOR,
        "F's and full training's windows last until they hold this many of the actors' frame "
        "reports per actor (0: --seconds only).",
    )
    flags.DEFINE_string(
        "baseline",
        None,
        "A git revision to measure beside the working tree: each agent's rows run first in a "
        "worktree of it, then in the working tree, and a ratio row (working tree / baseline) "
        "follows the two rows.",
    )
    flags.DEFINE_string("agent_worker", None, "Internal: measure this agent in this process.")
    flags.DEFINE_string("result_file", None, "Internal: where a worker writes its figures.")
    if not worker:
        flags.DEFINE_string("env", "Pong", "Game: Atari, MinAtar (MinAtar/Breakout-v0), CartPole.")


def worker_paper(argv: list[str]) -> str | None:
    """The paper of `--agent_worker=<paper>[.<ablation>]` in `argv`, or None (the driver)."""
    for arg in argv[1:]:
        if arg.startswith(WORKER_FLAG):
            return arg[len(WORKER_FLAG) :].partition(".")[0]
    return None


# ------------------------------------------------------------------------------------------------
# Worker: one agent's rows, in its own process


def trained_steps_per_update(experiment, config) -> int:
    """Agent steps one learner step trains on: batch x trained steps per item (IMPALA's unroll,
    Reactor's sequence - 1, the burn-in papers' sequence without burn-in), x k where
    --reuse_mode=repeat trains each batch k times in one step."""
    repeats = config.times_sampled if getattr(config, "reuse_mode", None) == "repeat" else 1
    return experiment.learner.batch_size * experiment.agent.replay.length * repeats


def measure_agent(
    agent: str, rows: list[str], warmup_s: float, seconds: float, reports_per_actor: int
) -> dict:
    """The rows of one agent (its paper's main imported, flags parsed); a failed row is an error
    entry, the other rows are still measured."""
    from common.runtime import acting
    from common.experiments import builder as builder_lib
    from common.experiments import cli
    from common.experiments import dataclass_flags
    from common.environments import protocols

    paper_name, _, ablation = agent.partition(".")
    paper = builder_lib.paper_builder(paper_name)
    config = cli.make_config(
        paper, dataclass_flags.given_values(paper.config_class), ablation or None
    )
    config = throughput.run_overrides(config)
    result: dict = dict(agent=agent, env=config.env, errors={})
    with tempfile.TemporaryDirectory() as logdir:
        experiment = builder_lib.build_experiment(paper(config), logdir)
        acting.configure_threads(experiment.learner_threads)  # before TensorFlow starts
        spec = throughput.env_spec(experiment)
        frames_per_step = protocols.frames_per_step(experiment.actor.env, experiment.actor.protocol)
        steps_per_update = trained_steps_per_update(experiment, config)
        result.update(
            describe=paper(config).describe(),
            tensorflow=throughput.tensorflow_line(experiment),
            frames_per_update=experiment.learner.frames_per_learner_step,
            trained_steps_per_update=steps_per_update,
            frames_per_step=frames_per_step,
        )
        parts = None
        if "learner" in rows:
            try:
                parts = experiment.agent.make_learner(spec)
                rate = throughput.measure_learner(experiment, spec, warmup_s, seconds, parts)
                result["learner"] = rate._asdict()
                print(f"[{agent}] learner alone: {rate}", flush=True)
            except Exception as error:
                result["errors"]["learner"] = _error(error)
        if "fleet" in rows or "profile" in rows:
            if parts is None:
                parts = experiment.agent.make_learner(spec)
            weights = [v.numpy() for v in parts.acting_variables]
        if "fleet" in rows:
            try:
                fleet = actor_fleet.measure_fleet(
                    experiment, spec, warmup_s, seconds, weights, reports_per_actor
                )
                result["fleet"] = dict(frames_per_s=fleet)
                print(f"[{agent}] fleet alone: {fleet:.0f} frames/s", flush=True)
            except Exception as error:
                result["errors"]["fleet"] = _error(error)
        if "train" in rows:
            try:
                training = throughput.measure_training(
                    experiment, spec, warmup_s, seconds, WORKER_SLACK_S / 2, reports_per_actor
                )
                result["train"] = dict(
                    training._asdict(),
                    frames_per_s=training.frames_per_s,
                    actor_frames_per_s=training.actor_frames_per_s,
                    updates_per_s=training.updates_per_s,
                    replay_ratio=training.replay_ratio(steps_per_update, frames_per_step),
                )
                print(f"[{agent}] full training: {result['train']}", flush=True)
            except Exception as error:
                result["errors"]["train"] = _error(error)
        if "profile" in rows:
            try:
                profile = actor_fleet.profile_actor(experiment, spec, warmup_s, seconds, weights)
                result["profile"] = profile._asdict()
                print(f"[{agent}] one actor's time: {profile.summary()}", flush=True)
            except Exception as error:
                result["errors"]["profile"] = _error(error)
    return result


def _error(error: Exception) -> str:
    """The exception's type and first line (the whole traceback goes to the worker's log)."""
    traceback.print_exc()
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


# ------------------------------------------------------------------------------------------------
# Driver: the agents in turn, one table


def run_worker(
    agent: str,
    env: str,
    rows: list[str],
    warmup_s: float,
    seconds: float,
    reports_per_actor: int,
    paper_flags: list[str],
    log_dir: str,
    code_dir: str | None = None,
) -> dict:
    """One agent's worker process, running the code in `code_dir` (default: this checkout);
    its figures, or {"agent", "errors"} if it failed."""
    tag = "" if code_dir is None else "_baseline"
    result_file = os.path.join(log_dir, f"{agent}{tag}.json")
    log_file = os.path.join(log_dir, f"{agent}{tag}.log")
    command = [
        sys.executable,
        "-m",
        "benchmarks.agent_throughput",
        f"{WORKER_FLAG}{agent}",
        f"--env={env}",
        f"--rows={','.join(rows)}",
        f"--warmup_s={warmup_s}",
        f"--seconds={seconds}",
        f"--reports_per_actor={reports_per_actor}",
        f"--result_file={result_file}",
        *paper_flags,
    ]
    timeout_s = len(rows) * (warmup_s + seconds) + WORKER_SLACK_S
    with open(log_file, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        environment = dict(os.environ)
        if code_dir is not None:  # its packages before any installed copy of this checkout's
            environment["PYTHONPATH"] = code_dir
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=code_dir, env=environment
        )
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()  # its actors die with it (common.launchers.launch)
            process.wait()
            return dict(agent=agent, errors={"worker": f"no result within {timeout_s:.0f} s"})
    failed = None
    if process.returncode != 0:
        with open(log_file) as log:
            last = [line.strip() for line in log if line.strip()][-1:] or ["no output"]
        failed = f"exit status {process.returncode}: {last[0]}"
    if not os.path.exists(result_file):  # written last: the worker died before the end
        return dict(agent=agent, errors={"worker": failed or "no result"})
    with open(result_file) as f:
        result = json.load(f)
    if failed:
        result["errors"]["worker"] = failed
    return result


def _get(result: dict, row: str, key: str) -> float:
    return float(result.get(row, {}).get(key, math.nan))


def real_share(result: dict) -> float:
    """The share of full training's trained positions that held real steps: 1 unless items are
    padded after a game's end (the sample-k papers; on MinAtar's short early games, most of an
    item). The learner counts only real steps as frames (`common.runtime.learning`), while L trains
    full synthetic items, so L times this share is the learner's rate in the frames full training
    counts, and the bound uses it (taking 1 without a full-training row, where this is NaN)."""
    train = result.get("train", {})
    if not train.get("updates") or "frames_per_update" not in result:
        return math.nan
    return train["frames"] / (train["updates"] * result["frames_per_update"])


def table_cells(result: dict) -> dict[str, float]:
    """One agent's figures, with the bound and full training's fraction of it."""
    learner = _get(result, "learner", "frames_per_s")
    fleet = _get(result, "fleet", "frames_per_s")
    full = _get(result, "train", "frames_per_s")
    share = real_share(result)
    bound = throughput.shared_core_bound(learner * (1.0 if math.isnan(share) else share), fleet)
    return {
        "L": learner,
        "L updates/s": _get(result, "learner", "updates_per_s"),
        "real share": share,
        "F": fleet,
        "full": full,
        "full, acted": _get(result, "train", "actor_frames_per_s"),
        "bound": bound,
        "full / bound": throughput.ratio(full, bound),
        "updates/s": _get(result, "train", "updates_per_s"),
        "replay ratio": _get(result, "train", "replay_ratio"),
    }


def ratio_cells(result: dict, baseline: dict) -> dict[str, float]:
    """Each figure of `result` over the same figure of `baseline`."""
    new, old = table_cells(result), table_cells(baseline)
    return {column: throughput.ratio(new[column], old[column]) for column in new}


def _cell(column: str, value: float, ratio: bool = False) -> str:
    if math.isnan(value):
        return "n/a"
    if ratio:
        return f"{value:.2f}x"
    if column in ("full / bound", "real share"):
        return f"{value:.0%}"
    if column in ("L updates/s", "updates/s", "replay ratio"):
        return f"{value:.3g}"
    return f"{value:,.0f}"


def markdown_table(env: str, results: list[dict], baselines: list[dict] | None = None) -> str:
    """agent | L | L updates/s | F | full | full, acted | bound | full / bound | updates/s |
    replay ratio; frames/s are environment frames (action repeats included). With `baselines`
    (one per result, measured on a baseline revision), each agent has three rows: the
    baseline's, the working tree's and their ratio."""
    columns = list(table_cells({}))
    lines = [
        f"| {env} | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]

    def row(name: str, cells: dict, ratio: bool = False) -> str:
        return f"| {name} | " + " | ".join(_cell(c, cells[c], ratio) for c in columns) + " |"

    for i, result in enumerate(results):
        agent = result["agent"]
        if baselines is None:
            lines.append(row(agent, table_cells(result)))
            continue
        lines.append(row(f"{agent}, before", table_cells(baselines[i])))
        lines.append(row(agent, table_cells(result)))
        lines.append(row(f"{agent}, ratio", ratio_cells(result, baselines[i]), ratio=True))
    return "\n".join(lines)


def notes(results: list[dict]) -> list[str]:
    """Each agent's config, new frames per update, and what kept a row from being measured."""
    lines = []
    for result in results:
        agent = result["agent"]
        if "describe" in result:
            lines.append(
                f"- {agent}: {result['describe']}; per update {result['frames_per_update']:,} new "
                f"frames and {result['trained_steps_per_update']:,} trained agent steps; frames "
                f"per agent step: {result['frames_per_step']}"
            )
        if "profile" in result:
            profile = result["profile"]
            parts = tuple(tuple(part) for part in profile["parts"])
            summary = actor_fleet.ActorProfile(
                profile["steps"], profile["seconds"], parts
            ).summary()
            lines.append(f"- {agent}: one actor alone, profiled: {summary}")
        non_finite = result.get("learner", {}).get("non_finite")
        if non_finite:
            lines.append(f"- {agent}: L's stats on the synthetic batch not finite: {non_finite}")
        for row, error in result.get("errors", {}).items():
            lines.append(f"- {agent}: no {row} row: {error}")
    return lines


def main(argv):
    rows = [row for row in ROWS if row in FLAGS.rows]
    unknown = sorted(set(FLAGS.rows) - set(ROWS))
    if unknown:
        raise app.UsageError(f"--rows: {unknown} not among {', '.join(ROWS)}")
    if FLAGS.agent_worker:
        result = measure_agent(
            FLAGS.agent_worker, rows, FLAGS.warmup_s, FLAGS.seconds, FLAGS.reports_per_actor
        )
        with open(FLAGS.result_file, "w") as f:
            json.dump(result, f, indent=1)
        return
    paper_flags = list(argv[1:])
    log_dir = tempfile.mkdtemp(prefix="agent_throughput_")
    print(cpu_line())
    print(
        f"{FLAGS.env}: {', '.join(rows)} rows of {FLAGS.seconds:.0f} s (F and full: and "
        f"{FLAGS.reports_per_actor} reports per actor) after {FLAGS.warmup_s:.0f} s warm-up; "
        f"agents one at a time; worker logs in {log_dir}",
        flush=True,
    )
    results, baselines = [], []
    with baseline_worktree(FLAGS.baseline) as baseline_dir:
        for agent in FLAGS.agents:
            runs = [(baselines, baseline_dir, "before")] if baseline_dir else []
            for into, code_dir, label in runs + [(results, None, "")]:
                result = run_worker(
                    agent,
                    FLAGS.env,
                    rows,
                    FLAGS.warmup_s,
                    FLAGS.seconds,
                    FLAGS.reports_per_actor,
                    paper_flags,
                    log_dir,
                    code_dir,
                )
                into.append(result)
                figures = {k: _cell(k, v) for k, v in table_cells(result).items()}
                errors = result.get("errors") or "none"
                print(f"{agent}{label and ', ' + label}: {figures}; errors: {errors}", flush=True)
    tensorflow = next((r["tensorflow"] for r in results if "tensorflow" in r), None)
    env = next((r["env"] for r in results if "env" in r), FLAGS.env)
    print()
    print(cpu_line())
    if tensorflow:
        print(tensorflow)
    if FLAGS.baseline:
        print(f"before: git {FLAGS.baseline}, measured just before the working tree, per agent")
    print(f"\n{markdown_table(env, results, baselines if FLAGS.baseline else None)}\n")
    print("\n".join(notes(results)))


@contextlib.contextmanager
def baseline_worktree(revision: str | None):
    """A detached git worktree of `revision` in a temporary folder (None: no worktree), removed
    afterwards."""
    if not revision:
        yield None
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = os.path.join(tempfile.mkdtemp(prefix="agent_throughput_baseline_"), "tree")
    git = ["git", "-C", root, "worktree"]
    subprocess.run([*git, "add", "--detach", folder, revision], check=True, capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run([*git, "remove", "--force", folder], check=False, capture_output=True)


if __name__ == "__main__":
    paper = worker_paper(sys.argv)
    if paper is not None:  # the paper's flags, --env among them
        from common.experiments import builder as builder_lib
        from common.experiments import cli

        cli.define_flags(builder_lib.paper_builder(paper))
    define_flags(worker=paper is not None)
    app.run(main)
