#!/usr/bin/env bash
# One entry point for a fresh machine that has Python 3.11:
#   ./dev.sh train [flags]   create or reuse .venv with the pinned versions, then train IMPALA on
#                            MinAtar Breakout (5M frames; --env=Pong for the paper's Atari agent)
#   ./dev.sh test  [args]    create or reuse .venv with the pinned versions, then run the test suite
#   ./dev.sh setup           only create or update .venv
#   ./dev.sh setup-gpu       .venv plus TensorFlow's CUDA libraries (tensorflow[and-cuda]==2.15.1),
#                            for a Linux machine with an NVIDIA GPU and driver
# Extra arguments go to `python -m impala.main` or to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

need="3.11"
why="dm-reverb 0.14.0 ships wheels for CPython 3.9-3.11 only and needs TensorFlow 2.15.x, which this project pins"

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.11 python3 python; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$need" ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

setup_venv() {
  if [ -x .venv/bin/python ] && [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$need" ]; then
    echo "dev.sh: .venv is not Python $need; recreating it." >&2
    rm -rf .venv
  fi
  if [ ! -x .venv/bin/python ]; then
    local python
    if ! python=$(find_python); then
      echo "dev.sh: this project needs Python $need ($why)." >&2
      echo "dev.sh: no python3.11 found on PATH; install it or set PYTHON=/path/to/python3.11." >&2
      exit 1
    fi
    "$python" -m venv .venv
  fi
  # Reinstall only when the pins change: the stamp is the hash of the files that define them.
  local stamp
  stamp=$(cat setup.cfg setup.py pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat .venv/.installed 2>/dev/null)" != "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade "pip>=23" "setuptools>=68" wheel
    .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[test]"
    echo "$stamp" > .venv/.installed
  fi
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  setup) setup_venv ;;
  setup-gpu)
    setup_venv
    # The same TensorFlow, with the CUDA and cuDNN wheels it was built against; the learner then
    # places its network and train step on the GPU, actors stay on the CPU (common/runtime/acting.py).
    .venv/bin/python -m pip install --quiet -c constraints.txt "tensorflow[and-cuda]==2.15.1"
    .venv/bin/python -c "import tensorflow as tf; print('GPUs:', tf.config.list_physical_devices('GPU'))" ;;
  # MinAtar Breakout at the protocol's settings: it visibly learns in minutes on a laptop, and its
  # final evaluation's first game is written as a GIF. --env=Pong trains the paper's Atari agent.
  train) setup_venv
    exec .venv/bin/python -m impala.main --env=MinAtar/Breakout-v0 --record_dir=runs/play \
      --record_games=1 "$@" ;;
  # One pytest worker per core (pytest-xdist); the end-to-end tests, which start processes of
  # their own, run at most two at a time (tests/conftest.py). `-n 0`: no workers.
  test)  setup_venv; exec .venv/bin/python -m pytest -n auto --dist loadgroup "$@" ;;
  *) echo "usage: ./dev.sh train|test|setup|setup-gpu [args]" >&2; exit 2 ;;
esac
