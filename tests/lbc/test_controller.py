"""Tests for lbc/controller.py: LBC's population-based MAB (Sec. 4.2, App. E, Algorithm 1) over
psi = (tau_1..tau_N, omega_1..omega_N): its arms, its params, its greedy arm and its summary.
Hand-worked numbers cite their test number in docs/papers/lbc.md#worked-test-numbers."""

import math

import numpy as np
import pytest

from common.control import bandits
from lbc import controller as lbc_controller


def test_lbc_discretisation():
    # docs/papers/lbc.md#worked-test-numbers (Test 11): eps-style axis of 10 arms, the last bin
    # closed (LBC App. E.1, Example 1); tau in log1p space (20 arms) or linear.
    omega = bandits.Axis("omega1", 0.0, 1.0, 0.1)
    np.testing.assert_array_equal(omega.block_of([0.0, 0.05, 0.1, 0.95, 1.0]), [0, 0, 1, 9, 9])
    controller = lbc_controller.LbcController(seed=0)
    tau = controller.axes[0]
    assert tau.num_blocks == 20
    lower, upper = tau.block_bounds(np.arange(20))
    np.testing.assert_allclose(tau.to_param(lower), np.expm1(0.2 * np.arange(20)), atol=1e-12)
    np.testing.assert_allclose(tau.to_param(upper[-1]), 53.598150, atol=1e-6)
    linear = lbc_controller.LbcController(seed=0, eta_space="linear", factorized=True)
    assert linear.axes[0].num_blocks == 273  # ceil(e^4 / 0.2)
    assert [axis.name for axis in controller.axes] == [
        "eta1",
        "eta2",
        "eta3",
        "omega1",
        "omega2",
        "omega3",
    ]


def test_lbc_best_arm_after_learning():
    # Return = 10 omega_1's draw + eta_2's draw (statistical, fixed seed; each coordinate's
    # return is noisy through the others'): after 600 games the greedy arms are among the top two
    # blocks of omega_1 ([0.8, 1]) and of eta_2 (x = log(1 + eta) in [3.6, 4]), of 10 and 20.
    controller = lbc_controller.LbcController(seed=0)
    for _ in range(600):
        params = controller.propose()
        controller.update(params, 10.0 * params["omega_unnormalised"][0] + params["eta"][1])
    for _ in range(10):
        best = controller.propose_best()
        assert best["omega_unnormalised"][0] >= 0.8 - 1e-9
        assert np.log1p(best["eta"][1]) >= 3.6 - 1e-9
    with pytest.raises(ValueError, match="selection='bandits'"):
        lbc_controller.LbcController(seed=0, selection="uniform").propose_best()


def test_lbc_params():
    controller = lbc_controller.LbcController(seed=0)
    for _ in range(20):
        params = controller.propose()
        assert params["eta"].shape == params["omega"].shape == (3,)
        assert np.all(params["eta"] >= 0) and np.all(params["eta"] <= math.exp(4) - 1)
        assert params["omega"].sum() == pytest.approx(1.0) and np.all(params["omega"] >= 0)
        raw = params["omega_unnormalised"]
        np.testing.assert_allclose(params["omega"], raw / raw.sum())
        controller.update(params, 1.0)
    # docs/papers/lbc.md#worked-test-numbers (Test 11): an all-zero draw gives uniform weights.
    np.testing.assert_allclose(
        lbc_controller.normalised_weights([0.0, 0.0, 0.0]), [1 / 3, 1 / 3, 1 / 3]
    )
    np.testing.assert_allclose(
        lbc_controller.normalised_weights([0.2, 0.6, 0.0]), [0.25, 0.75, 0.0]
    )
    single = lbc_controller.LbcController(seed=0, num_policies=1).propose()
    np.testing.assert_array_equal(single["omega"], [1.0])


def test_lbc_summary_reports_each_population_s_preferred_arm():
    controller = lbc_controller.LbcController(seed=0)
    assert controller.summary()["games"] == 0.0
    for _ in range(300):  # return = omega_1's draw: omega_1's top arm pays
        params = controller.propose()
        controller.update(params, 10.0 * params["omega_unnormalised"][0])
    summary = controller.summary()
    assert summary["games"] == 300.0
    assert set(summary) == {"games"} | {
        f"{name}{i}/{stat}"
        for name in ("eta", "omega")
        for i in (1, 2, 3)
        for stat in ("most_pulled", "most_pulled_value", "mean_value")
    }
    assert summary["omega1/most_pulled"] > 0.5
    assert summary["omega1/most_pulled_value"] > summary["omega1/mean_value"]
    assert all(0.0 <= summary[f"eta{i}/most_pulled"] <= np.e**4 for i in (1, 2, 3))
    assert lbc_controller.LbcController(seed=0, selection="uniform").summary() == {}


def arms_played(controller, games, seed):
    """tau_1's arm (its block of x = log(1 + tau_1)) in each of `games` games whose return is x
    plus unit Gaussian noise: a weak preference for high tau_1 under heavy noise."""
    axis = controller.axes[0]
    noise = np.random.default_rng(seed)
    arms = []
    for _ in range(games):
        params = controller.propose()
        x = np.log1p(params["eta"][0])
        arms.append(int(axis.block_of([x])[0]))
        controller.update(params, float(x + noise.normal()))
    return arms


@pytest.mark.parametrize("seed", [0, 1])
def test_without_the_ucb_term_the_bandits_play_fewer_arms(seed):
    # docs/papers/lbc.md#worked-test-numbers (after Test 9), App. K.3: with c = 0 the
    # populations rank arms by mean return alone and settle on a few; with Table 3's c they keep
    # visiting the whole axis. Seeds 0 and 1 played 20 vs 4 arms in the last 500 of 1,000 games.
    last = {}
    for ucb_range in [(0.5, 1.5), (0.0, 0.0)]:
        controller = lbc_controller.LbcController(seed=seed, ucb_range=ucb_range)
        last[ucb_range] = arms_played(controller, 1_000, seed + 100)[-500:]
    main, without_ucb = (len(set(last[r])) for r in [(0.5, 1.5), (0.0, 0.0)])
    assert main >= 15 and without_ucb <= 6, (main, without_ucb)
