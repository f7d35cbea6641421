"""How the behaviour meta-controllers of DiCE, GDI and LBC (`<paper>/controller.py`) explore and
settle on synthetic objectives.

Every episode a controller proposes behaviour parameters, the "episode return" is a noisy function
of them with a narrow optimum, and the controller learns from it. The objectives are means of
Gaussian bumps (height 100, noise N(0, 10^2)) on a few coordinates of the behaviour parameters:

- 1-D: x = log(1 + eta) with the optimum at x = 2 (eta = 6.39), width 0.15;
- 3-D: (log(1 + eta1), log(1 + eta2), weight) with optima (2.5, 1.0, 0.7) and widths (0.15, 0.15,
  0.04), where the weight is GDI's eps or LBC's normalised omega_1.

Uniform selection in those coordinates (each controller's `selection="uniform_coordinate"`) averages
about 9 on both.

Prints a table of the mean return over the last episodes (per seed) against uniform selection, and
writes a PNG: per case, the chosen coordinates over episodes (seed 0, scaled to the search box, the
optimum dashed) and the returns (seed 0 dots, moving averages of all seeds, uniform and optimum
lines).

    python benchmarks/bandits.py --out=/tmp/bandits.png --episodes=1000 --seeds=3
"""

import dataclasses
import math
import time
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from common.control import controllers  # noqa: E402
from dice import controller as dice_controller  # noqa: E402
from gdi import controller as gdi_controller  # noqa: E402
from lbc import controller as lbc_controller  # noqa: E402

FLAGS = flags.FLAGS


def define_flags() -> None:
    """This tool's flags, defined when it runs (not when it is imported)."""
    flags.DEFINE_string("out", "/tmp/bandits.png", "Where to write the PNG.")
    flags.DEFINE_integer("episodes", 1000, "Episodes per run.")
    flags.DEFINE_integer("last", 200, "The table averages the returns of this many last episodes.")
    flags.DEFINE_integer("seeds", 3, "Seeds per case (0, 1, ...).")
    flags.DEFINE_boolean(
        "joint", True, "Also run GDI's literal joint grid (about 6 ms per episode)."
    )


NOISE = 10.0
WINDOW = 50  # moving-average window of the return curves


@dataclasses.dataclass(frozen=True)
class Objective:
    """100 * mean_d exp(-(f_d - centre_d)^2 / (2 width_d^2)) with f = features(params)."""

    name: str
    features: Callable[[dict], np.ndarray]
    centres: tuple[float, ...]
    widths: tuple[float, ...]
    spans: tuple[float, ...]  # the search box of each feature, for plotting on [0, 1]
    labels: tuple[str, ...]

    def __call__(self, params) -> float:
        f = self.features(params)
        return 100.0 * float(
            np.mean(np.exp(-0.5 * ((f - self.centres) / np.asarray(self.widths)) ** 2))
        )


def one_d(eta_of: Callable[[dict], float], span: float) -> Objective:
    return Objective(
        "1-D",
        lambda p: np.array([math.log1p(eta_of(p))]),
        (2.0,),
        (0.15,),
        (span,),
        ("log(1+eta)",),
    )


def three_d(features: Callable[[dict], np.ndarray], span: float, weight: str) -> Objective:
    return Objective(
        "3-D",
        features,
        (2.5, 1.0, 0.7),
        (0.15, 0.15, 0.04),
        (span, span, 1.0),
        ("log(1+eta1)", "log(1+eta2)", weight),
    )


LN51, LBC_SPAN = math.log(51.0), 4.0
GDI_3D = three_d(
    lambda p: np.array([math.log1p(p["eta1"]), math.log1p(p["eta2"]), p["epsilon"]]), LN51, "eps"
)
LBC_3D = three_d(
    lambda p: np.array([math.log1p(p["eta"][0]), math.log1p(p["eta"][1]), p["omega"][0]]),
    LBC_SPAN,
    "omega1",
)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: Callable[..., controllers.AxisController]  # make(seed=..., selection=...)
    objective: Objective


def cases(with_joint: bool) -> list[Case]:
    listed = [
        Case("DiCE", dice_controller.DiceController, one_d(lambda p: p["eta"], LN51)),
        Case("GDI", gdi_controller.GdiController, one_d(lambda p: p["eta1"], LN51)),
        Case("GDI", gdi_controller.GdiController, GDI_3D),
        Case(
            "GDI joint (literal)",
            lambda **kw: gdi_controller.GdiController(factorized=False, **kw),
            GDI_3D,
        ),
        Case(
            "LBC N=1",
            lambda **kw: lbc_controller.LbcController(num_policies=1, **kw),
            one_d(lambda p: p["eta"][0], LBC_SPAN),
        ),
        Case("LBC N=3", lbc_controller.LbcController, LBC_3D),
    ]
    return [case for case in listed if with_joint or "joint" not in case.name]


def run(case: Case, seed: int, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Features chosen and returns received over one run."""
    controller, rng = case.make(seed=seed), np.random.default_rng(1000 + seed)
    features: list[np.ndarray] = []
    returns: list[float] = []
    for _ in range(episodes):
        params = controller.propose()
        features.append(case.objective.features(params))
        returns.append(case.objective(params) + NOISE * rng.normal())
        controller.update(params, returns[-1])
    return np.array(features), np.array(returns)


def uniform_mean(case: Case, draws: int = 20000) -> float:
    uniform = case.make(seed=99, selection="uniform_coordinate")
    return float(np.mean([case.objective(uniform.propose()) for _ in range(draws)]))


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    return np.convolve(values, np.ones(window) / window, mode="valid")


def main(argv):
    del argv
    selected = cases(FLAGS.joint)
    figure, axes = plt.subplots(len(selected), 2, figsize=(13, 2.6 * len(selected)), squeeze=False)
    print(
        f"{'controller':<20} {'objective':<9} {'mean of last ' + str(FLAGS.last):>22} {'per seed':<24} "
        f"{'uniform':>7} {'ratio':>6} {'ms/episode':>10}"
    )
    for row, case in zip(axes, selected):
        started = time.process_time()
        runs = [run(case, seed, FLAGS.episodes) for seed in range(FLAGS.seeds)]
        cost_ms = 1e3 * (time.process_time() - started) / (FLAGS.seeds * FLAGS.episodes)
        finals = np.array([returns[-FLAGS.last :].mean() for _, returns in runs])
        uniform = uniform_mean(case)
        print(
            f"{case.name:<20} {case.objective.name:<9} {finals.mean():>15.1f} ± {finals.std():<4.1f} "
            f"{str(np.round(finals, 1)):<24} {uniform:>7.1f} {finals.mean() / uniform:>6.1f} "
            f"{cost_ms:>10.2f}"
        )
        plot_case(row, case, runs, uniform)
        row[0].set_title(f"{case.name}, {case.objective.name}: choices (seed 0)", fontsize=10)
        row[1].set_title(
            f"{case.name}, {case.objective.name}: returns (last {FLAGS.last}: "
            f"{finals.mean():.1f} vs uniform {uniform:.1f})",
            fontsize=10,
        )
    for ax in axes[-1]:
        ax.set_xlabel("episode")
    figure.tight_layout()
    figure.savefig(FLAGS.out, dpi=90)
    print(f"wrote {FLAGS.out}")


def plot_case(row, case: Case, runs, uniform: float) -> None:
    choices, returns = row
    objective = case.objective
    features, seed0_returns = runs[0]
    episodes = np.arange(len(seed0_returns))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for d, label in enumerate(objective.labels):
        scaled = features[:, d] / objective.spans[d]
        choices.scatter(episodes, scaled, s=3, alpha=0.5, color=colours[d], label=label)
        choices.axhline(
            objective.centres[d] / objective.spans[d], color=colours[d], linestyle="--", lw=1
        )
    choices.set_ylim(-0.02, 1.02)
    choices.set_ylabel("position in box")
    choices.legend(loc="upper right", fontsize=7, markerscale=3)
    returns.scatter(episodes, seed0_returns, s=3, alpha=0.25, color="grey", label="seed 0")
    for seed, (_, seed_returns) in enumerate(runs):
        smooth = moving_average(seed_returns, WINDOW)
        returns.plot(
            np.arange(WINDOW - 1, len(seed_returns)), smooth, lw=1.2, label=f"seed {seed} mean"
        )
    returns.axhline(uniform, color="black", linestyle=":", lw=1.2, label="uniform")
    returns.axhline(100.0, color="black", linestyle="--", lw=0.8, label="optimum")
    returns.set_ylim(-30, 130)
    returns.set_ylabel("return")
    returns.legend(loc="upper left", fontsize=7, ncol=3)


if __name__ == "__main__":
    define_flags()
    app.run(main)
