"""What the five papers share (docs/architecture.md#module-map), in layers: a module imports only
from its own layer and the layers listed before it (`LAYERS`, lowest first; tests/test_layers.py
checks the imports).

Importing `common` sets TensorFlow's oneDNN default before TensorFlow loads: TensorFlow 2.15 turns
its oneDNN kernels on by itself only on CPUs with AVX-512-class features, and they are faster on
AVX2 CPUs too (benchmarks/throughput.py, docs/results/throughput/summary.md), so every process of
this project (learner, actors and evaluator are spawned and inherit the environment) asks for them.
A user's own choice wins: `TF_ENABLE_ONEDNN_OPTS=0` turns them off. Entry points import `common`
before anything that imports TensorFlow (Reverb does).

It also quiets TensorFlow's C++ log (`TF_CPP_MIN_LOG_LEVEL=3`), which on a machine where nothing
is wrong prints about twenty lines per process before the project's first: "Unable to register
cuDNN / cuFFT / cuBLAS factory" at error level (TensorFlow 2.15's wheel registers its CUDA plugins
twice), no CUDA driver, no TensorRT, the CPU's instruction sets. Failures still reach the console
as Python exceptions, which carry TensorFlow's message. `TF_CPP_MIN_LOG_LEVEL=0` brings every
line back.
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The sub-packages, lowest layer first.
LAYERS = (
    "environments",  # batched Atari, MinAtar, CartPole; recorded play
    "settings",  # config fields, checks and shared parts (no TensorFlow)
    "equations",  # returns, distributions, policies, transforms, schedules, instruments, metrics
    "models",  # the networks
    "control",  # bandit meta-controllers and per-game behaviour selection
    "replay",  # Reverb tables, writers, datasets, parameters; replay patterns; reports
    "runtime",  # actors, evaluator, learner loop, agent, run logs
    "burn_in",  # what DiCE, GDI and LBC share: learner, dueling critic, dynamics, acting
    "launchers",  # a run's processes: one machine, several hosts, Ray
    "experiments",  # builders, command lines, ablation studies, comparisons
    "population",  # population based training on Ray Tune: App. F's rules, members, scheduler
)
