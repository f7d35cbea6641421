"""The three paper controllers (dice.controller.DiceController, gdi.controller.GdiController,
lbc.controller.LbcController) side by side: the shared interface (state_dict round trips, seeds,
clear errors), learning on toy objectives, Random Selection and the best-region evaluation.
"""

import io
import math

import numpy as np
import pytest

from dice import controller as dice_controller
from gdi import controller as gdi_controller
from lbc import controller as lbc_controller
from tests.controller_helpers import (
    LAST,
    LN51,
    last_mean_return,
    objective_1d,
    objective_3d,
    objective_gdi_3d,
    uniform_mean_return,
)

# ----------------------------------------------------------------------------- interface

CONTROLLERS = {
    "dice": lambda seed: dice_controller.DiceController(seed=seed),
    "gdi": lambda seed: gdi_controller.GdiController(seed=seed),
    "gdi_joint": lambda seed: gdi_controller.GdiController(seed=seed, factorized=False),
    "lbc": lambda seed: lbc_controller.LbcController(seed=seed),
    "lbc_joint_small": lambda seed: lbc_controller.LbcController(
        seed=seed, num_policies=2, factorized=False, eta_acc=0.5, omega_acc=0.25
    ),
}


def play(controller, episodes, rng):
    """Run episodes with a fixed toy return; return the proposals as flat arrays."""
    proposals = []
    for _ in range(episodes):
        params = controller.propose()
        proposals.append(np.concatenate([np.ravel(v) for v in params.values()]))
        controller.update(params, float(rng.normal()))
    return np.array(proposals)


@pytest.mark.parametrize("name", sorted(CONTROLLERS))
def test_state_dict_round_trip_continues_identically(name):
    # 60 + 60 episodes cross LBC's replacements at 50 and 100.
    episodes = 15 if name == "gdi_joint" else 60
    controller = CONTROLLERS[name](seed=0)
    play(controller, episodes, np.random.default_rng(1))
    buffer = io.BytesIO()
    np.savez(buffer, **controller.state_dict())
    buffer.seek(0)
    restored = CONTROLLERS[name](seed=12345)
    restored.load_state_dict(dict(np.load(buffer)))
    np.testing.assert_array_equal(
        play(restored, episodes, np.random.default_rng(2)),
        play(controller, episodes, np.random.default_rng(2)),
    )


@pytest.mark.parametrize("name", ["dice", "gdi", "lbc"])
def test_seed_makes_it_deterministic(name):
    first = play(CONTROLLERS[name](seed=7), 30, np.random.default_rng(0))
    np.testing.assert_array_equal(
        first, play(CONTROLLERS[name](seed=7), 30, np.random.default_rng(0))
    )
    assert not np.array_equal(first, play(CONTROLLERS[name](seed=8), 30, np.random.default_rng(0)))


def test_load_rejects_a_state_from_another_configuration():
    with pytest.raises(ValueError, match="missing"):
        gdi_controller.GdiController(seed=0).load_state_dict(
            dice_controller.DiceController(seed=0).state_dict()
        )
    with pytest.raises(ValueError, match="shape"):
        other = dice_controller.DiceController(seed=0, num_blocks=40).state_dict()
        dice_controller.DiceController(seed=0).load_state_dict(other)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="space"):
        gdi_controller.GdiController(space="tau")
    with pytest.raises(ValueError, match="num_candidates"):
        dice_controller.DiceController(num_blocks=5)
    with pytest.raises(ValueError, match="selection"):
        lbc_controller.LbcController(selection="random")
    with pytest.raises(ValueError, match="ucb_range"):
        lbc_controller.LbcController(ucb_range=(1.5, 0.5))
    dice = dice_controller.DiceController(seed=0)
    with pytest.raises(ValueError, match="episode_return"):
        dice.update(dice.propose(), float("nan"))
    with pytest.raises(ValueError, match="inverse temperature"):
        dice.update({"eta": -1.0}, 0.0)
    lbc = lbc_controller.LbcController(seed=0)
    params = lbc.propose()
    with pytest.raises(ValueError, match="omega_unnormalised"):
        lbc.update({"eta": params["eta"], "omega": params["omega"]}, 0.0)


# ----------------------------------------------------------------------------- learning

LEARNING_CASES = {
    "dice_1d": (dice_controller.DiceController, {}, lambda p: objective_1d(p["eta"])),
    "gdi_3d": (gdi_controller.GdiController, {}, objective_gdi_3d),
    "lbc_1d": (
        lbc_controller.LbcController,
        {"num_policies": 1},
        lambda p: objective_1d(p["eta"][0]),
    ),
    "lbc_3d": (
        lbc_controller.LbcController,
        {},
        lambda p: objective_3d(p["eta"][0], p["eta"][1], p["omega"][0]),
    ),
}


@pytest.mark.parametrize("case", sorted(LEARNING_CASES))
def test_controller_beats_uniform_selection(case):
    # Over 3 fixed seeds each run's mean return over the last 100 of 400 noisy episodes closes at least
    # 30% of the gap between uniform selection (~9) and the optimum (100); uniform itself stays near 9.
    make, kwargs, objective = LEARNING_CASES[case]
    uniform = uniform_mean_return(make, kwargs, objective)
    assert 5.0 < uniform < 13.0
    results = [last_mean_return(make(seed=seed, **kwargs), objective, seed) for seed in range(3)]
    print(f"{case}: last-{LAST} mean return per seed {np.round(results, 1)}, uniform {uniform:.1f}")
    assert min(results) > uniform + 0.3 * (100.0 - uniform), results


# ----------------------------------------------------------------------------- Random Selection


def ks_uniform(samples, low, high) -> float:
    """Kolmogorov-Smirnov statistic of `samples` against Uniform[low, high]."""
    x = np.sort((np.asarray(samples) - low) / (high - low))
    return float(np.max(np.abs(np.arange(1, x.size + 1) / x.size - x)))


def test_random_selection_is_uniform_in_the_papers_parameters():
    # GDI Table 20 "Uniform" over Table 6's ranges: 1/tau_1, 1/tau_2 ~ U[0, 50], eps ~ U[0, 1].
    n, ks_01 = 4000, 1.63 / math.sqrt(4000)  # the KS test at p = 0.01
    gdi = gdi_controller.GdiController(seed=0, selection="uniform")
    draws = [gdi.propose() for _ in range(n)]
    for name, high in (("eta1", 50.0), ("eta2", 50.0), ("epsilon", 1.0)):
        assert ks_uniform([d[name] for d in draws], 0.0, high) < ks_01, name
    assert np.median([d["eta1"] for d in draws]) == pytest.approx(25.0, abs=1.5)
    # LBC "the same behavior space as our main algorithm": tau_i on the log1p bandits' range
    # [0, e^4 - 1], omega_i's draws on [0, 1] (then normalised).
    lbc = lbc_controller.LbcController(seed=0, selection="uniform")
    draws = [lbc.propose() for _ in range(n)]
    for i in range(3):
        assert ks_uniform([d["eta"][i] for d in draws], 0.0, math.expm1(4.0)) < ks_01
        assert ks_uniform([d["omega_unnormalised"][i] for d in draws], 0.0, 1.0) < ks_01
    assert np.median([d["eta"][0] for d in draws]) == pytest.approx(math.expm1(4.0) / 2, abs=1.5)
    linear = lbc_controller.LbcController(seed=0, selection="uniform", eta_space="linear")
    assert ks_uniform([linear.propose()["eta"][0] for _ in range(n)], 0.0, math.e**4) < ks_01


def test_uniform_coordinate_selection_draws_the_bandit_coordinate_uniformly():
    # DiCE's `random` ablation (the initial bandits) and the old reading of Random Selection:
    # x = log(1 + eta) ~ U[0, ln 51], so the median eta is sqrt(51) - 1 = 6.14, not 25.
    for controller, name in (
        (dice_controller.DiceController(seed=0, selection="uniform_coordinate"), "eta"),
        (gdi_controller.GdiController(seed=0, selection="uniform_coordinate"), "eta1"),
    ):
        eta = np.array([controller.propose()[name] for _ in range(4000)])
        assert ks_uniform(np.log1p(eta), 0.0, LN51) < 1.63 / math.sqrt(eta.size)
        assert np.median(eta) == pytest.approx(math.sqrt(51) - 1, abs=0.6)


# ----------------------------------------------------------------------------- best region


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: dice_controller.DiceController(seed=3), "eta"),
        (lambda: gdi_controller.GdiController(seed=3), "eta1"),
        (lambda: gdi_controller.GdiController(seed=3, factorized=False), "eta1"),
    ],
    ids=["dice", "gdi_factorised", "gdi_joint"],
)
def test_best_region_plays_only_blocks_that_games_have_played(make, name):
    # The Pong case: 30 games at G ~ -20. The tile values start at 0 and learn towards -20 only
    # where games were played (and, through the tile coding, next to them), so an unplayed block
    # rates highest. The best region must still be one that a game has played.
    controller = make()
    rng = np.random.default_rng(0)
    played = set()
    ensemble = controller._selectors[0]
    axis = ensemble.grid.axes[0]
    assert axis.name == name
    for _ in range(30):
        params = controller.propose()
        played.add(
            ensemble.grid.block_of(controller.coordinates(params)[: len(ensemble.grid.axes)])
        )
        controller.update(params, -20.0 + rng.normal())
    values = ensemble.mean_values()
    unplayed = np.ones(values.size, bool)
    unplayed[list(played)] = False
    assert values[unplayed].max() > values[~unplayed].max()  # the trap: an unplayed block leads
    for _ in range(20):
        best = controller.propose_best()
        block = ensemble.grid.block_of(controller.coordinates(best)[: len(ensemble.grid.axes)])
        assert block in played
    assert ensemble.best_block() in played
    # TensorBoard's best_<name> is the centre of that block too.
    played_first_axis = {np.unravel_index(b, ensemble.grid.shape)[0] for b in played}
    reported = controller.summary()[f"best_{name}"]
    assert int(axis.block_of(axis.to_coordinate(reported))) in played_first_axis
