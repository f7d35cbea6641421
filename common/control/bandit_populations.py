"""LBC's bandit populations (LBC Algorithm 1, App. E.4): M bandits on one grid of arms that vote
for an arm each episode; the parts and conventions are `common.control.bandits`'."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from common.control.bandits import (
    Axis,
    Grid,
    StateDict,
    check_choice,
    check_positive_int,
    copy_into,
    most_voted,
    ucb_scores,
)


class BanditPopulation:
    """LBC Algorithm 1 (population-based MAB, actor-wise) on one grid of arms.

    Bandit m keeps visit counts N_m (Eq. (22)) and return sums per arm, so its value is the
    empirical mean return V_m = S_m / N_m (Eq. (23), read as (1/N) * sum R; the printed N * sum R is
    a typo, docs/papers/lbc.md#errata). The M bandits differ only in their UCB coefficient c_m ~
    U[ucb_range] (App. E.4.1). Each episode every bandit votes for its top-D arms by `ucb_scores`
    (Eq. (25); ties at random), the most-voted arm wins (ties uniform) and psi is drawn uniformly
    inside it (App. E.4.2). Every bandit is updated once with (arm, G) (the second update printed in
    Algorithm 1 is a typo, docs/papers/lbc.md#errata). After every `replace_every`-th episode one
    bandit, chosen uniformly, is replaced by a fresh one with a new c and zero counts (App. E.4.4).
    `pick="softmax"` makes each bandit draw its D arms with softmax(score) probabilities instead
    (Sec. 4.2 samples the arm from softmax(Score); with M = D = 1 this is exactly Sec. 4.2, and
    `pick="top"` with M = D = 1 is the single argmax bandit of App. E.2-E.3). The population is
    stored as [M, arms] arrays, one row per bandit.
    """

    def __init__(
        self,
        axes: Sequence[Axis],
        rng: np.random.Generator,
        *,
        num_bandits: int,
        top_d: int,
        ucb_range: tuple[float, float],
        replace_every: int | None,
        pick: str,
        standardise: bool,
        ucb_sum: str,
    ) -> None:
        check_positive_int("num_bandits", num_bandits)
        check_positive_int("top_d", top_d)
        check_choice("pick", pick, ("top", "softmax"))
        check_choice("ucb_sum", ucb_sum, ("all", "others"))
        if replace_every is not None:
            check_positive_int("replace_every", replace_every)
        if not 0.0 <= ucb_range[0] <= ucb_range[1]:
            raise ValueError(
                f"ucb_range must satisfy 0 <= low <= high, got ucb_range={ucb_range!r}"
            )
        self.grid, self._rng = Grid(axes), rng
        if top_d > self.grid.size:
            raise ValueError(f"top_d={top_d} exceeds the {self.grid.size} arms")
        self._ucb_range = (ucb_range[0], ucb_range[1])
        self._top_d, self._replace_every = top_d, replace_every
        self._pick = pick
        self.ucb_scales = rng.uniform(*self._ucb_range, size=num_bandits)
        self.counts = np.zeros((num_bandits, self.grid.size))
        self.return_sums = np.zeros((num_bandits, self.grid.size))
        self.episodes = 0
        self.scoring = (self.counts.shape, standardise, ucb_sum)  # `scores_of` stacks alike ones

    def values(self) -> np.ndarray:
        """V_m per arm, [M, arms]; 0 for unvisited arms."""
        return _mean_returns(self.return_sums, self.counts)

    def scores(self) -> np.ndarray:
        return BanditPopulation.scores_of([self])[0]

    @staticmethod
    def scores_of(populations: Sequence[BanditPopulation]) -> np.ndarray:
        """The `scores()` of populations of one `scoring`, [P, M, arms], in one `ucb_scores` call
        on their stacked arrays (numpy's cost per call dominates at LBC's sizes); rows are scored
        apart, so each is the population's own."""
        counts = np.array([population.counts for population in populations])
        sums = np.array([population.return_sums for population in populations])
        scales = np.array([population.ucb_scales for population in populations])[..., None]
        _, standardise, ucb_sum = populations[0].scoring
        values = _mean_returns(sums, counts)
        return ucb_scores(
            values, counts, scales, standardise=standardise, over=counts > 0, ucb_sum=ucb_sum
        )

    def votes(self, scores: np.ndarray | None = None) -> np.ndarray:
        """The M*D arms voted for (each bandit's D arms are distinct); `scores` as `scores()`."""
        scores = self.scores() if scores is None else scores
        # "top": sort by score, ties by an independent uniform key per bandit and arm.
        if self._pick == "top":
            order = np.lexsort((self._rng.random(scores.shape), -scores), axis=-1)
        else:  # Gumbel-top-D: D draws without replacement from softmax(score)
            order = np.argsort(-(scores + self._rng.gumbel(size=scores.shape)), axis=-1)
        return order[:, : self._top_d].ravel()

    def propose(self, scores: np.ndarray | None = None) -> np.ndarray:
        arm = most_voted(self.votes(scores), self._rng)
        return self.grid.point_in(arm, self._rng)

    def propose_best(self) -> np.ndarray:
        """Evaluation option: a point uniform in the population's greedy arm. Each bandit that
        has visited an arm votes once, for its visited arm of highest mean return V_m (no UCB
        term, ties at random; an unvisited arm has no V, not V = 0), and the most-voted arm
        wins (ties uniform). A top-D vote would tie the D arms the bandits agree on."""
        visited = self.counts > 0
        if not visited.any():
            return self.propose()
        values = np.where(visited, self.values(), -np.inf)
        order = np.lexsort((self._rng.random(values.shape), -values), axis=-1)
        arm = most_voted(order[visited.any(-1), 0], self._rng)
        return self.grid.point_in(arm, self._rng)

    def update(self, x: npt.ArrayLike, episode_return: float) -> None:
        arm = self.grid.block_of(x)
        self.counts[:, arm] += 1.0
        self.return_sums[:, arm] += episode_return
        self.episodes += 1
        if self._replace_every and self.episodes % self._replace_every == 0:
            m = self._rng.integers(len(self.ucb_scales))
            self.ucb_scales[m] = self._rng.uniform(*self._ucb_range)
            self.counts[m] = 0.0
            self.return_sums[m] = 0.0

    def state_dict(self) -> StateDict:
        return {
            "episodes": np.array(self.episodes),
            "ucb_scales": self.ucb_scales.copy(),
            "counts": self.counts.copy(),
            "return_sums": self.return_sums.copy(),
        }

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        for key in ("ucb_scales", "counts", "return_sums"):
            copy_into(getattr(self, key), state[key], key)
        self.episodes = int(state["episodes"])


def _mean_returns(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """S/N (LBC Eq. (23)), 0 where N = 0."""
    return np.divide(sums, counts, out=np.zeros_like(counts), where=counts > 0)
