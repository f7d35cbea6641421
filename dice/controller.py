"""DiCE's behaviour meta-controller (numpy only, no TensorFlow): the Bandits Vote Algorithm
(DiCE §3.3, App. A, Algorithm 2, Eqs. (9)-(11)) over the inverse temperature eta = 1/tau;
`params = {"eta": float}`.

Built from the shared bandit parts of `common.control.bandits` (the interface, the conventions, the
checkpoint layout: that module's docstring): one `common.control.bandits.BanditEnsemble` of
tile-coded bandits with `common.control.bandits.NeighbourTiling` on one
`common.control.bandits.eta_axis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.control import bandits

from common.control import controllers


class DiceController(controllers.AxisController):
    """DiCE's Bandits Vote Algorithm (DiCE §3.3, App. A, Algorithm 2) over eta = 1/tau.

    `propose()` returns {"eta": float}; the actor plays softmax(eta * A) for the whole episode.

    Defaults (DiCE Table 5): M = 7 bandits, lr ~ U{0.05, 0.1, 0.2}, width ~ U{1, 2, 3}, d = 7
    candidates, UCB scaling c = 1.0, value normalisation (z-score) on, search range 1/tau in [0,
    50].

    Readings (docs/papers/dice.md#departures-from-the-paper):
    - `space="log1p"` (default): the bandit works on x = log(1 + eta) over [0, ln 51] (Table 5's
      range through App. A's transform). `"inv_tau"`: x = eta on [0, 50]. `"exp_literal"`: x on [0,
      50] with eta = e^x - 1. See `bandits.eta_axis`.
    - `num_blocks=50` (choice: acc is not printed; 50 blocks as GDI's acc 1.0 on [0, 50]).
    - `edge="valid"` (default) averages the existing neighbours at the borders of Eq. (9);
      `edge="zero_pad"` keeps the printed 1/(2 width + 1).
    - z-score 0 when all values are equal; ties broken at random; x = r is the last tile.
    - `selection="uniform_coordinate"`: the `random` ablation (Table 4, §4.3: the initial,
      never-updated BVA, which draws x uniformly on the box).
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        space: str = "log1p",
        eta_max: float = 50.0,
        num_blocks: int = 50,
        num_bandits: int = 7,
        num_candidates: int = 7,
        ucb_scale: float = 1.0,
        learning_rates: Sequence[float] = (0.05, 0.1, 0.2),
        widths: Sequence[int] = (1, 2, 3),
        edge: str = "valid",
        selection: str = "bandits",
    ) -> None:
        # eta_max: Table 5 "Bandit Search Range for 1/tau [0.0, 50.0]"; num_bandits: "Num. Bandits
        # 7"; num_candidates: "Num. Bandit Candidates 7"; ucb_scale: "Bandit UCB Scaling 1.0";
        # learning_rates: "Bandit Learning Rate Uniform([0.05, 0.1, 0.2])";
        # widths: "Bandit Tiling Width Uniform([1, 2, 3])"; num_blocks: choice,
        # docs/papers/dice.md#departures-from-the-paper.
        tiling = bandits.NeighbourTiling(tuple(widths), edge)

        def make(axes: list[bandits.Axis], rng: np.random.Generator) -> bandits.BanditEnsemble:
            return bandits.BanditEnsemble(
                axes,
                rng,
                tiling=tiling,
                num_bandits=num_bandits,
                num_candidates=num_candidates,
                ucb_scale=ucb_scale,
                learning_rates=learning_rates,
            )

        super().__init__(
            [bandits.eta_axis("eta", space, eta_max, num_blocks)],
            make,
            factorized=True,
            selection=selection,
            seed=seed,
        )

    def _params(self, x: np.ndarray) -> bandits.Params:
        return {"eta": float(self.axes[0].to_param(x[0]))}

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([self.axes[0].to_coordinate(float(params["eta"]))])

    def propose_best(self) -> bandits.Params:
        """Evaluation: eta uniform inside the played tile with the best ensemble-mean value V (no
        UCB term; `bandits.BanditEnsemble.propose_best`).

        DiCE §3.3/§4.1: "each bandit provides one evaluation for each tau and the final evaluation
        is the average of all bandits ... We use tau sampled from the best region"; best = argmax
        (our reading, docs/papers/dice.md#departures-from-the-paper).
        """
        (ensemble,) = self._selectors
        if not isinstance(ensemble, bandits.BanditEnsemble):
            # ValueError, as for every other check of how the controller was built.
            raise ValueError("propose_best needs selection='bandits'")  # noqa: TRY004
        return self._params(ensemble.propose_best())

    def summary(self) -> dict[str, float]:
        """What the bandits have learned, for TensorBoard: the best played tile's centre eta and
        ensemble-mean value, the mean value over tiles and the games learned from."""
        (selector,) = self._selectors
        if not isinstance(selector, bandits.BanditEnsemble):
            return {}
        values = selector.mean_values()
        best = selector.best_block()
        (axis,) = self.axes
        low, high = axis.block_bounds(best)
        return {
            "best_eta": float(axis.to_param((low + high) / 2)),
            "best_value": float(values[best]),
            "mean_value": float(np.mean(values)),
            "games": float(selector.bandits[0].counts.sum()),
        }
