"""What the five papers share (docs/architecture.md).

Importing `common` sets TensorFlow's oneDNN default before TensorFlow loads: TensorFlow 2.15
turns its oneDNN kernels on by itself only on CPUs with AVX-512-class features, and they are
faster on AVX2 CPUs too (benchmarks/throughput.py, README), so every process of this project
(learner, actors and evaluator are spawned and inherit the environment) asks for them. A user's
own choice wins: `TF_ENABLE_ONEDNN_OPTS=0` turns them off. Entry points import `common` before
anything that imports TensorFlow (Reverb does).
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
