"""Agent steps per second of `common.environments.envs.make_env` on MinAtar against a loop over
MinAtar's own
`minatar.Environment` objects doing the same work (act, reset on game end, read the state),
random actions, one process; CPU time of the process (`time.process_time`), so that other
processes on the machine slow it less.

    python -m benchmarks.minatar_envs --games=breakout,space_invaders --batches=1,16 --steps=20000

(as a module: run as a script, `benchmarks/` comes first on sys.path, where a file named
minatar.py would shadow the package).
"""

import sys
import time

import numpy as np
from absl import app, flags

from common.environments import envs

FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_list("games", ["breakout", "space_invaders"], "MinAtar games (module names).")
    flags.DEFINE_list("batches", ["1", "16"], "Batch sizes B.")
    flags.DEFINE_integer("steps", 20_000, "Env steps per measurement (B envs x steps / B calls).")
    flags.DEFINE_integer("repeats", 3, "Measurements per case; the best is reported.")


def _raw_steps_per_s(game: str, batch: int, steps: int) -> float:
    from minatar import Environment

    games = [Environment(game) for _ in range(batch)]
    for i, env in enumerate(games):
        env.seed(i)
        env.reset()
    actions = np.random.default_rng(0).integers(0, 6, (steps // batch, batch)).tolist()
    start = time.process_time()
    for row in actions:
        for env, action in zip(games, row):
            _, terminal = env.act(action)
            if terminal:
                env.reset()
            env.state()
    return len(actions) * batch / (time.process_time() - start)


def _batched_steps_per_s(game: str, batch: int, steps: int) -> float:
    env = envs.make_env(f"minatar:{game}", batch, 0)
    env.reset()
    actions = np.random.default_rng(0).integers(0, env.num_actions, (steps // batch, batch))
    start = time.process_time()
    for row in actions:
        env.step(row)
    elapsed = time.process_time() - start
    env.close()
    return len(actions) * batch / elapsed


def main(argv):
    del argv
    print("game            B  raw steps/s  make_env steps/s  ratio")
    for game in FLAGS.games:
        for batch in map(int, FLAGS.batches):
            raw = ours = 0.0
            for _ in range(FLAGS.repeats):  # interleaved, so both see the same machine load
                raw = max(raw, _raw_steps_per_s(game, batch, FLAGS.steps))
                ours = max(ours, _batched_steps_per_s(game, batch, FLAGS.steps))
            print(f"{game:14s} {batch:2d} {raw:12,.0f} {ours:17,.0f} {ours / raw:6.2f}")
            sys.stdout.flush()


if __name__ == "__main__":
    define_flags()
    app.run(main)
