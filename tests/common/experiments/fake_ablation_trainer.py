"""Test-only stand-in for a paper's training module: the ablation runner's contract and nothing else.

    python -m fake_ablation_trainer --ablation=VARIANT --seed=SEED --logdir=DIR [--total_frames=N] [--eval]

It "trains" for N frames, one episode per EPISODE_FRAMES frames, and writes DIR/episodes.csv (and
DIR/eval.csv with --eval) with known returns: episode_return = SLOPES[variant] * frames / N + seed.
Variant "broken" writes to stderr and exits with status 3; variant "silent" exits 0 without writing.
"""

import argparse
import csv
import os
import sys

SLOPES = {"fast": 20.0, "slow": 5.0}
EPISODE_FRAMES = 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ablation", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--total_frames", type=int, default=10 * EPISODE_FRAMES)
    parser.add_argument("--eval", action="store_true")
    args = parser.parse_args()
    print(f"fake training of {args.ablation} seed {args.seed}")  # goes to stdout.log
    if args.ablation == "broken":
        print(
            "Traceback (most recent call last):\nRuntimeError: fake failure in the learner",
            file=sys.stderr,
        )
        sys.exit(3)
    if args.ablation == "silent":
        return
    os.makedirs(args.logdir, exist_ok=True)
    frames = range(EPISODE_FRAMES, args.total_frames + 1, EPISODE_FRAMES)
    with open(os.path.join(args.logdir, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "episode_return", "episode_length", "wall_time"])
        for i, t in enumerate(frames):
            episode_return = SLOPES[args.ablation] * t / args.total_frames + args.seed
            writer.writerow([t, episode_return, EPISODE_FRAMES // 4, 0.5 * i])
    if args.eval:
        with open(os.path.join(args.logdir, "eval.csv"), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["frames", "episode_return", "hns", "wall_time"])
            writer.writerow([args.total_frames, 2 * SLOPES[args.ablation] + args.seed, "", 1.0])


if __name__ == "__main__":
    main()
