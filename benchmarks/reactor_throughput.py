"""Reactor throughput on this machine: actors + Reverb + learner, in one run.

    python -m benchmarks.reactor_throughput --env=Pong --seconds=90 --warmup_s=40

Every `reactor.main` flag applies (defaults: those of `python -m reactor.main`). The run starts
the launcher's pieces in this process (Reverb server and learner) and spawns the actors, trains
for `--warmup_s` (compilation, filling the replay to --min_replay_size), then measures for
`--seconds`:
- environment frames/s the actors produced (their reports, action repeats included);
- learner updates/s;
- the achieved replay ratio: transitions trained (updates x batch x (sequence_length - 1)) per
  agent step acted (reactor.md §5.3: 21.3-32 at 4-6 acting steps per learning step).
It prints figures; it asserts nothing.
"""

import common  # noqa: F401  (first: TensorFlow's oneDNN default, common/__init__.py)

import tempfile
import time

from absl import app
from absl import flags

from common import agent as agent_lib
from common import cli
from common import launch
from common import replay
from reactor import experiment as reactor_experiment
from reactor import main as reactor_main

_SECONDS = flags.DEFINE_float("seconds", 90.0, "Measured seconds.")
_WARMUP = flags.DEFINE_float("warmup_s", 40.0, "Seconds of training before measuring.")


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return f"{names[0] if names else 'unknown CPU'}, {len(names)} logical CPUs"


def main(argv):
    del argv
    config = cli.config_from_flags(reactor_main.PAPER)
    print(f"[reactor_throughput] {cpu_model()}; {reactor_main.describe(config)}", flush=True)
    with tempfile.TemporaryDirectory() as logdir:
        experiment = reactor_experiment.build_experiment(config, logdir)
        spec = agent_lib.probe_env(config.env, experiment.actor.protocol)
        server = launch.start_server(experiment, spec)
        supervisor = launch.Supervisor()
        try:
            learner = launch.build_learner(experiment, spec, replay.address_of(server))
            launch.start_actors(supervisor, experiment, replay.address_of(server))
            warm_until = time.monotonic() + _WARMUP.value
            learner.run(lambda: time.monotonic() > warm_until, on_idle=supervisor.restart_dead)
            steps, frames = int(learner.step.numpy()), int(learner.actor_frames.numpy())
            start = time.monotonic()
            learner.run(
                lambda: time.monotonic() > start + _SECONDS.value,
                on_idle=supervisor.restart_dead,
            )
            seconds = time.monotonic() - start
            steps = int(learner.step.numpy()) - steps
            frames = int(learner.actor_frames.numpy()) - frames
            learner.close()
        finally:
            supervisor.stop()
            server.stop()
    agent_steps = frames / config.frames_per_step
    trained = steps * config.batch_size * (config.sequence_length - 1)
    print(
        f"[reactor_throughput] {seconds:.0f} s: {frames / seconds:.0f} env frames/s, "
        f"{steps / seconds:.2f} learner updates/s, replay ratio "
        f"{trained / max(agent_steps, 1):.1f} trained transitions per acted step, "
        f"{agent_steps / max(steps, 1):.2f} acting steps per update",
        flush=True,
    )


if __name__ == "__main__":
    app.run(main, flags_parser=cli.parse_flags)
