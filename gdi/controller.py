"""GDI's behaviour meta-controller (numpy only, no TensorFlow): the Bandits Controller (GDI
App. G, Algorithm 4, Eqs. (13)-(15)) over lambda = (1/tau_1, 1/tau_2, eps) of Eq. (2); the same for
GDI-I3 and GDI-H3; `params = {"eta1": float, "eta2": float, "epsilon": float}`.

Built from the shared bandit parts of `common.control.bandits` (the interface, the conventions, the
checkpoint layout: that module's docstring): `common.control.bandits.BanditEnsemble`s of tile-coded
bandits with `common.control.bandits.OffsetTiling`, one per coordinate or one on the joint grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.control import bandits

from common.control import controllers


class GdiController(controllers.AxisController):
    """GDI's Bandits Controller (GDI §4.1, App. G, Algorithm 4) over lambda = (1/tau_1, 1/tau_2,
    eps).

    `propose()` returns {"eta1": float, "eta2": float, "epsilon": float}; the actor plays
    eps * softmax(eta1 * A_1) + (1 - eps) * softmax(eta2 * A_2) (Eq. (2)); GDI-I3 uses A_1 = A_2 =
    A, GDI-H3 two advantage heads; the controller is the same.

    Defaults (GDI Table 6): M = 7 bandits, lr ~ U{0.05, 0.1, 0.2}, d = 3 candidates, c = 1.0,
    1/tau_1 and 1/tau_2 in [0, 50] at accuracy 1.0 (50 blocks), eps in [0, 1] at accuracy 0.1 (10
    blocks); tile codings per `bandits.OffsetTiling` (K ~ U{2,3,4} tilings of U{2,3,4} blocks,
    offsets U[0, 60] %).

    Readings (docs/papers/gdi.md#departures-from-the-paper):
    - `space="log1p"` (default): x = log(1 + eta) over [0, ln 51] in 50 equal blocks; `"inv_tau"`
      and `"exp_literal"` as in `bandits.eta_axis`. eps is its own coordinate (App. G: x_3 = eps).
    - `factorized=True` (default): three independent 1-D ensembles (Algorithm 4 run per
      coordinate), each updated with (x_d, G). `factorized=False` is App. G literally: every bandit
      works on the 50 x 50 x 10 = 25,000-block product grid, with the z-score and UCB over all
      blocks.
    - UCB counts per block; z-score 0 when all values are equal; ties at random; x = r is the last
      block.
    - `selection="uniform"`: "Random Selection", Table 20's uniform P over Lambda: 1/tau_1,
      1/tau_2 uniform on [0, eta_max] and eps on [0, 1] (Table 6's search ranges);
      `"uniform_coordinate"` draws x uniformly over the box of the chosen space instead.
    - `held`: parameters the bandits do not choose, {name: value}; App. K.1's one-parameter
      ablations: "Boltzmann Selection" learns eta1 only (held eps = 1), "eps-greedy Selection" eps
      only (held eta1 = 0 and a large eta2). Their axes are left out of every bandit.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        held: Mapping[str, float] | None = None,
        space: str = "log1p",
        factorized: bool = True,
        eta_max: float = 50.0,
        eta_acc: float = 1.0,
        epsilon_acc: float = 0.1,
        num_bandits: int = 7,
        num_candidates: int = 3,
        ucb_scale: float = 1.0,
        learning_rates: Sequence[float] = (0.05, 0.1, 0.2),
        num_tilings: Sequence[int] = (2, 3, 4),
        tile_sizes: Sequence[int] = (2, 3, 4),
        tile_offset_percent: tuple[float, float] = (0.0, 60.0),
        selection: str = "bandits",
    ) -> None:
        # Table 6: "Bandit Search Range for 1/tau_1, 1/tau_2 [0.0, 50.0]", "for eps [0.0, 1.0]";
        # "Accuracy of Search Range for [1/tau_1, 1/tau_2, eps] [1.0, 1.0, 0.1]"; "Num. Bandits 7";
        # "Num. Bandit Candidates 3"; "Bandit UCB Scaling 1.0"; "Bandit Learning Rate Uniform([0.05,
        # 0.1, 0.2])"; "Bandit Tiling Width Uniform([2, 3, 4])"; "Accuracy of Tile coding
        # Uniform([2, 3, 4])"; "Offset of Tile coding Uniform([0, 60])".
        eta_blocks = max(1, math.ceil(eta_max / eta_acc - bandits.INDEX_TOLERANCE))
        axes = [
            bandits.eta_axis("eta1", space, eta_max, eta_blocks),
            bandits.eta_axis("eta2", space, eta_max, eta_blocks),
            bandits.Axis("epsilon", 0.0, 1.0, epsilon_acc),
        ]
        self.held = {name: float(value) for name, value in (held or {}).items()}
        unknown = set(self.held) - {axis.name for axis in axes}
        if unknown or len(self.held) == len(axes):
            raise ValueError(
                f"held must name some of eta1, eta2, epsilon and leave one to learn, got "
                f"{sorted(self.held)}"
            )
        axes = [axis for axis in axes if axis.name not in self.held]
        offset_range = (tile_offset_percent[0], tile_offset_percent[1])
        tiling = bandits.OffsetTiling(tuple(num_tilings), tuple(tile_sizes), offset_range)

        def make(group: list[bandits.Axis], rng: np.random.Generator) -> bandits.BanditEnsemble:
            return bandits.BanditEnsemble(
                group,
                rng,
                tiling=tiling,
                num_bandits=num_bandits,
                num_candidates=num_candidates,
                ucb_scale=ucb_scale,
                learning_rates=learning_rates,
            )

        super().__init__(axes, make, factorized=factorized, selection=selection, seed=seed)

    def _params(self, x: np.ndarray) -> bandits.Params:
        learned = {axis.name: float(axis.to_param(xi)) for axis, xi in zip(self.axes, x)}
        return {**learned, **self.held}

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([axis.to_coordinate(float(params[axis.name])) for axis in self.axes])

    def propose_best(self) -> bandits.Params:
        """Evaluation option (DiCE's rule; GDI prints none): each coordinate uniform inside its
        ensemble's played block of best mean value (factorised: each coordinate's block has
        been played, by the games that ensemble learned from), or the best played 3-D block
        (joint); `bandits.BanditEnsemble.propose_best`."""
        ensembles = [s for s in self._selectors if isinstance(s, bandits.BanditEnsemble)]
        if len(ensembles) != len(self._selectors):
            raise ValueError("propose_best needs selection='bandits'")
        return self._params(np.concatenate([ensemble.propose_best() for ensemble in ensembles]))

    def summary(self) -> dict[str, float]:
        """What the bandits have learned, for TensorBoard: per ensemble (one per learned
        parameter when factorised, one for all when joint), the centre of its best played block in
        each parameter, that block's ensemble-mean value and the mean value over blocks; the games
        learned from."""
        report = {}
        for selector in self._selectors:
            if not isinstance(selector, bandits.BanditEnsemble):
                return {}
            values = selector.mean_values()
            best = selector.best_block()
            names = "_".join(axis.name for axis in selector.grid.axes)
            multi = np.unravel_index(best, selector.grid.shape)
            for axis, index in zip(selector.grid.axes, multi):
                low, high = axis.block_bounds(index)
                report[f"best_{axis.name}"] = float(axis.to_param((low + high) / 2))
            report[f"best_value_{names}"] = float(values[best])
            report[f"mean_value_{names}"] = float(np.mean(values))
            report["games"] = float(selector.bandits[0].counts.sum())
        return report
