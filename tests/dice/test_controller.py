"""Tests for dice/controller.py: DiCE's Bandits Vote Algorithm (App. A, Algorithm 2) and its
best-region evaluation (§3.3, §4.1). Hand-worked numbers cite their test number in
docs/papers/dice.md#worked-test-numbers."""

import math

import numpy as np
import pytest

from common.control import bandits
from dice import controller as dice_controller
from tests.controller_helpers import LN51, last_mean_return, objective_1d


def test_untrained_dice_ensemble_is_uniform_in_x():
    # docs/papers/dice.md#worked-test-numbers (Test 7): 49 candidates, x ~ Uniform[0, ln 51]:
    # KS statistic, median and mean of eta.
    axis = bandits.eta_axis("eta", "log1p", 50.0, 50)
    ensemble = bandits.BanditEnsemble(
        [axis],
        np.random.default_rng(0),
        tiling=bandits.NeighbourTiling(),
        num_bandits=7,
        num_candidates=7,
        ucb_scale=1.0,
        learning_rates=(0.05, 0.1, 0.2),
    )
    assert ensemble.candidates().shape == (49, 1)
    controller = dice_controller.DiceController(seed=0)
    eta = np.array([controller.propose()["eta"] for _ in range(2500)])
    x = np.sort(np.log1p(eta))
    empirical = np.arange(1, x.size + 1) / x.size
    ks = np.max(np.abs(empirical - x / LN51))
    assert ks < 1.63 / math.sqrt(x.size)  # the KS test at p = 0.01
    assert np.median(eta) == pytest.approx(math.sqrt(51) - 1, abs=0.6)  # 6.1414
    assert np.mean(eta) == pytest.approx(50 / LN51 - 1, abs=1.0)  # 11.717


def test_dice_best_region_after_learning():
    # DiCE §3.3 evaluation: after learning, eta from the best tile sits at the optimum x = 2 (+- 2
    # tiles).
    controller = dice_controller.DiceController(seed=0)
    last_mean_return(controller, lambda p: objective_1d(p["eta"]), 0, episodes=300)
    assert abs(np.log1p(controller.propose_best()["eta"]) - 2.0) < 2 * LN51 / 50


def test_best_region_before_any_game_draws_as_training_does():
    # Nothing measured yet: the evaluator plays what training plays, the bandits' first draw.
    controller, twin = (
        dice_controller.DiceController(seed=5),
        dice_controller.DiceController(seed=5),
    )
    assert controller.propose_best() == twin.propose()
