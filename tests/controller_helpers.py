"""Helpers of the bandit controllers' tests: the toy objectives and episode loops of the learning
checks (tests/test_controllers.py, tests/dice/test_controller.py, tests/gdi/test_controller.py),
and `EtaController`, a learning controller built from common.control.bandits' parts alone for the
tests of the shared machinery that takes a controller (tests/common/control/test_behaviour.py)."""

import math

import numpy as np

from common.control import bandits

from common.control import controllers

LN51 = math.log(51.0)


def bump(x, centre, width):
    return np.exp(-0.5 * ((x - centre) / width) ** 2)


# Narrow optima: Gaussian bumps of width 0.15 in x = log(1 + eta) (about 4% of DiCE/GDI's [0, ln
# 51]) and 0.04 in eps / omega_1; 100 at the optimum, about 9 on average under uniform selection.
def objective_1d(eta):
    return 100.0 * bump(np.log1p(eta), 2.0, 0.15)


def objective_3d(eta1, eta2, weight):
    return 100.0 * np.mean(
        [bump(np.log1p(eta1), 2.5, 0.15), bump(np.log1p(eta2), 1.0, 0.15), bump(weight, 0.7, 0.04)],
        axis=0,
    )


def objective_gdi_3d(params):
    """`objective_3d` of GDI's lambda = (1/tau_1, 1/tau_2, eps)."""
    return objective_3d(params["eta1"], params["eta2"], params["epsilon"])


EPISODES, LAST, NOISE = 400, 100, 10.0


def last_mean_return(controller, objective, seed, episodes=EPISODES):
    rng = np.random.default_rng(1000 + seed)
    returns = []
    for _ in range(episodes):
        params = controller.propose()
        returns.append(objective(params) + NOISE * rng.normal())
        controller.update(params, returns[-1])
    return float(np.mean(returns[-LAST:]))


def uniform_mean_return(make, kwargs, objective):
    uniform = make(seed=99, selection="uniform_coordinate", **kwargs)
    return float(np.mean([objective(uniform.propose()) for _ in range(4000)]))


class EtaController(controllers.AxisController):
    """A learning controller of one inverse temperature eta, from common.control.bandits' parts: 7
    tile-coded bandits (`NeighbourTiling`, DiCE Eq. (9)) on x = log(1 + eta), eta in [0, 50], in
    10 blocks, 3 candidates each. `propose_best` plays the best played block and `summary`
    reports it, the two hooks `common.control.behaviour` calls where a controller has them. It draws
    as
    `dice.controller.DiceController(num_blocks=10, num_candidates=3)` does, seed for seed."""

    def __init__(self, *, seed=None):
        tiling = bandits.NeighbourTiling()

        def make(axes, rng):
            return bandits.BanditEnsemble(
                axes,
                rng,
                tiling=tiling,
                num_bandits=7,
                num_candidates=3,
                ucb_scale=1.0,
                learning_rates=(0.05, 0.1, 0.2),
            )

        axis = bandits.eta_axis("eta", "log1p", 50.0, 10)
        super().__init__([axis], make, factorized=True, selection="bandits", seed=seed)

    def _params(self, x):
        return {"eta": float(self.axes[0].to_param(x[0]))}

    def coordinates(self, params):
        return np.array([self.axes[0].to_coordinate(float(params["eta"]))])

    def propose_best(self):
        (ensemble,) = self._selectors
        return self._params(ensemble.propose_best())

    def summary(self):
        (ensemble,) = self._selectors
        values = ensemble.mean_values()
        best = ensemble.best_block()
        low, high = self.axes[0].block_bounds(best)
        return {
            "best_eta": float(self.axes[0].to_param((low + high) / 2)),
            "best_value": float(values[best]),
            "mean_value": float(np.mean(values)),
            "games": float(ensemble.bandits[0].counts.sum()),
        }
