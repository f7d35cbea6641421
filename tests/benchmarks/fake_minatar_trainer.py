"""Test-only stand-in for a paper's main in the MinAtar grid: its command line and resuming.

    python -m fake_minatar_trainer [--ablation=A] --seed=S --logdir=<root>/<agent>/<game>/seed<S>
        --env=MinAtar/<Game>-v0 --total_frames=N [--stop_at=F] [--check_flags]

It "trains" from the frames of the last row of LOGDIR/episodes.csv (0 without one: a resumed run
goes on where it stopped, as a paper's main does from its checkpoint) to N frames, one game per
EPISODE_FRAMES frames, appending rows with episode_return = SLOPES[agent] * frames / N + seed (the
agent is the logdir's third-last part). It appends the frames it started from to
LOGDIR/starts.txt. --stop_at=F stops at F frames with status 0 (a run stopped from outside);
--ablation=broken writes a traceback to stderr and exits 3; --check_flags exits 0 after checking
that the env is a MinAtar v0 id and that no unknown flag was given (status 2 and one line if not),
writing nothing.
"""

import argparse
import csv
import os
import sys

SLOPES = {"fast": 20.0, "slow": 5.0, "broken": 0.0}
EPISODE_FRAMES = 1000
STARTS = "starts.txt"


def last_frames(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    return int(rows[-1][0]) if rows else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ablation")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--total_frames", type=int, required=True)
    parser.add_argument("--stop_at", type=int)
    parser.add_argument("--check_flags", action="store_true")
    args, unknown = parser.parse_known_args()
    if args.check_flags:
        if unknown:
            print(f"error: unknown flag {unknown[0]}", file=sys.stderr)
            sys.exit(2)
        if not (args.env.startswith("MinAtar/") and args.env.endswith("-v0")):
            print(f"error: --env={args.env!r} is not a MinAtar v0 game", file=sys.stderr)
            sys.exit(2)
        print("[fake] flags ok")
        return
    if args.ablation == "broken":
        print(
            "Traceback (most recent call last):\nRuntimeError: fake failure in the learner",
            file=sys.stderr,
        )
        sys.exit(3)
    agent = os.path.normpath(args.logdir).split(os.sep)[-3]
    os.makedirs(args.logdir, exist_ok=True)
    path = os.path.join(args.logdir, "episodes.csv")
    start = last_frames(path)
    with open(os.path.join(args.logdir, STARTS), "a") as f:
        f.write(f"{start}\n")
    print(f"fake training of {agent} on {args.env} seed {args.seed} from {start} frames")
    end = args.total_frames if args.stop_at is None else min(args.stop_at, args.total_frames)
    is_new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.writer(f)
        if is_new:
            writer.writerow(["frames", "episode_return", "episode_length", "wall_time"])
        for t in range(start + EPISODE_FRAMES, end + 1, EPISODE_FRAMES):
            episode_return = SLOPES[agent] * t / args.total_frames + args.seed
            writer.writerow([t, episode_return, EPISODE_FRAMES, t / 1e5])


if __name__ == "__main__":
    main()
