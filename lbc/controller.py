"""LBC's behaviour meta-controller (numpy only, no TensorFlow): the population-based MAB (LBC
Sec. 4.2, App. E, Algorithm 1, Eqs. (22)-(25)) over psi = (tau_1..tau_N, omega_1..omega_N) of
Eq. (10); `params = {"eta": [N], "omega": [N], "omega_unnormalised": [N]}` (LBC's tau_i multiplies
the logits, so it is an inverse temperature and is returned as `eta`; LBC §4.1).

Built from the shared bandit parts of `common.control.bandits` (the interface, the conventions, the
checkpoint layout: that module's docstring): `common.control.bandit_populations.BanditPopulation`s,
one per coordinate or one on the joint grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from common.control import bandits

from common.control import controllers

from common.control import bandit_populations


def normalised_weights(raw: npt.ArrayLike) -> np.ndarray:
    """omega / sum(omega), and uniform weights when the draws sum to less than 1e-8 (our reading
    of LBC Table 3's omega_i in [0, 1], docs/papers/lbc.md#departures-from-the-paper)."""
    raw = np.asarray(raw, dtype=np.float64)
    total = raw.sum()
    return raw / total if total >= 1e-8 else np.full(raw.shape, 1.0 / raw.size)


class LbcController(controllers.AxisController):
    """LBC's meta-controller (LBC §4.2, App. E, Algorithm 1) over psi = (tau_1..tau_N,
    omega_1..omega_N).

    `propose()` returns {"eta": [N], "omega": [N], "omega_unnormalised": [N]}: the actor plays sum_i
    omega_i softmax(eta_i * A_i) (Eq. (10); LBC's tau_i multiplies the logits, so it is `eta`).
    `omega` sums to 1; `omega_unnormalised` is the draw the bandits credit and must be passed back
    to `update()` with the rest of `params`. With `num_policies=1` there is no omega bandit and
    omega = [1].

    Defaults (LBC Table 3): N = 3 policies, population of 7 bandits, c ~ U[0.5, 1.5], top-D with D =
    4, replacement interval 50, range of tau_i [0, exp 4] at accuracy 0.2, omega_i in [0, 1] at
    accuracy 0.1.

    Readings (docs/papers/lbc.md#departures-from-the-paper):
    - `eta_space="log1p"` (default): the bandit works on x = log(1 + tau_i) over [0, 4] in
      20 blocks of 0.2 (tau_i up to e^4 - 1 = 53.6, the GDI/DiCE coordinate). `"linear"` is the
      literal reading: tau_i on [0, e^4] at accuracy 0.2 (273 arms).
    - `factorized=True` (default): one population per coordinate (N eta populations and N
      omega populations, each M = 7, D = 4, replacement 50), all updated with the same G.
      `factorized=False`: one population on the joint grid of all 2N coordinates (8,000,000 arms for
      the defaults; only practical for small grids).
    - omega: each omega_i is drawn by its own bandits, then normalised; all-zero draws
      give uniform omega. The bandits are credited with the unnormalised draws.
    - Scores: `standardise=True` is Eq. (25) (z-score over visited arms, unvisited z = 0); False is
      Eq. (24). `ucb_sum="all"` is Eqs. (24)-(25); `"others"` is Sec. 4.2's sum over j != k.
    - `pick="top"` is Algorithm 1's top-D vote; `"softmax"` draws each bandit's D arms from
      softmax(score) as Sec. 4.2 samples arms (see `bandit_populations.BanditPopulation`).
    - `ucb_range=(0, 0)` is App. K.3's "w/o UCB item" ablation; `selection="uniform"` is "Random
      Selection" (psi uniform over Psi: each tau_i uniform on [0, e^4 - 1], the range the log1p
      bandits cover, or [0, e^4] on the linear axis, each omega_i on [0, 1], then normalised);
      `"uniform_coordinate"` draws x = log(1 + tau_i) uniformly instead.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        num_policies: int = 3,
        eta_space: str = "log1p",
        eta_max: float = math.exp(4.0),
        eta_acc: float = 0.2,
        omega_acc: float = 0.1,
        factorized: bool = True,
        num_bandits: int = 7,
        top_d: int = 4,
        ucb_range: tuple[float, float] = (0.5, 1.5),
        replace_every: int | None = 50,
        pick: str = "top",
        standardise: bool = True,
        ucb_sum: str = "all",
        selection: str = "bandits",
    ) -> None:
        # Table 3: "Range of tau_i [0, exp 4]", "Discrete Accuracy of tau_i 0.2", "Range of omega_i
        # [0, 1]", "Discrete Accuracy of omega_i 0.1", "Population Num. 7", "UCB c Uniformly sampled
        # from [0.5, 1.5]", "D of Top-D 4", "Replacement Interval T_replace 50"; N = 3 policies
        # (Sec. 5.1.2).
        bandits.check_positive_int("num_policies", num_policies)
        bandits.check_choice("eta_space", eta_space, ("log1p", "linear"))
        self.num_policies = num_policies
        hi = math.log(eta_max) if eta_space == "log1p" else eta_max
        axes = [
            bandits.Axis(f"eta{i + 1}", 0.0, hi, eta_acc, log1p=(eta_space == "log1p"))
            for i in range(num_policies)
        ]
        if num_policies > 1:
            axes += [
                bandits.Axis(f"omega{i + 1}", 0.0, 1.0, omega_acc) for i in range(num_policies)
            ]

        def make(
            group: list[bandits.Axis], rng: np.random.Generator
        ) -> bandit_populations.BanditPopulation:
            return bandit_populations.BanditPopulation(
                group,
                rng,
                num_bandits=num_bandits,
                top_d=top_d,
                ucb_range=ucb_range,
                replace_every=replace_every,
                pick=pick,
                standardise=standardise,
                ucb_sum=ucb_sum,
            )

        super().__init__(axes, make, factorized=factorized, selection=selection, seed=seed)

    def _params(self, x: np.ndarray) -> bandits.Params:
        n = self.num_policies
        eta = np.array([axis.to_param(xi) for axis, xi in zip(self.axes[:n], x[:n])])
        raw = x[n:] if n > 1 else np.ones(1)
        return {"eta": eta, "omega": normalised_weights(raw), "omega_unnormalised": raw.copy()}

    def propose_best(self) -> bandits.Params:
        """Evaluation option (`--eval_policy=best_arm`): each population's greedy arm
        (`bandit_populations.BanditPopulation.propose_best`)."""
        populations = self._populations()
        if len(populations) != len(self._selectors):
            raise ValueError("propose_best needs selection='bandits'")
        return self._params(
            np.concatenate([population.propose_best() for population in populations])
        )

    def _populations(self) -> list[bandit_populations.BanditPopulation]:
        """The selectors that are bandit populations (all of them, unless Random Selection)."""
        return [
            selector
            for selector in self._selectors
            if isinstance(selector, bandit_populations.BanditPopulation)
        ]

    def summary(self) -> dict[str, float]:
        """What the factorised populations have learned, for TensorBoard: per coordinate
        (`eta<i>`, `omega<i>`), the centre of the arm the population has pulled most, that arm's
        mean return and the mean return over visited arms (counts and returns pooled over the
        population's bandits), and the games learned from. Empty for a joint grid or Random
        Selection."""
        populations = self._populations()
        if len(self._selectors) != len(self.axes) or len(populations) != len(self._selectors):
            return {}
        summary = {"games": float(populations[0].episodes)}
        for axis, population in zip(self.axes, populations):
            counts, sums = population.counts.sum(0), population.return_sums.sum(0)
            arm = int(np.argmax(counts))
            low, high = axis.block_bounds(arm)
            visited = counts > 0
            means = sums[visited] / counts[visited]
            summary[f"{axis.name}/most_pulled"] = float(axis.to_param((low + high) / 2))
            summary[f"{axis.name}/most_pulled_value"] = float(sums[arm] / max(counts[arm], 1.0))
            summary[f"{axis.name}/mean_value"] = float(means.mean()) if visited.any() else 0.0
        return summary

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        n = self.num_policies
        eta = np.asarray(params["eta"], dtype=np.float64)
        if eta.shape != (n,):
            raise ValueError(f"params['eta'] must have shape ({n},), got {eta.shape}")
        x = [axis.to_coordinate(value) for axis, value in zip(self.axes[:n], eta)]
        if n > 1:
            if "omega_unnormalised" not in params:
                raise ValueError(
                    "LbcController.update needs params['omega_unnormalised'] as returned by "
                    "propose(): the bandits are credited with the unnormalised omega draws"
                )
            raw = np.asarray(params["omega_unnormalised"], dtype=np.float64)
            if raw.shape != (n,):
                raise ValueError(
                    f"params['omega_unnormalised'] must have shape ({n},), got {raw.shape}"
                )
            x += [axis.to_coordinate(value) for axis, value in zip(self.axes[n:], raw)]
        return np.array(x, dtype=np.float64)
