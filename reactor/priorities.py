"""Lazy prioritisation of overlapping sequences (§3.3, App. 6.3; reactor.md §2.8, §5.4, §9 Tests
13-14): pure numpy, so the rules can be checked against the spec's worked numbers.

Two estimators of the priority of keys that were never through the learner ("unknown" keys):

1. `ContextualPriorityTree`: the paper's Contextual Priority Tree, with the rules of Fig. 5
   (image lost) as reactor.md §2.8 reconstructs them: every node's summary is the count-weighted
   mean of the known parts of its subtree; an unknown part inherits the estimate of the smallest
   enclosing subtree that knows something. Keys are in time order on a balanced tree whose node
   for the keys [lo, hi] is key (lo + hi + 1) // 2: a fixed, priority-independent partition
   (allowed by reactor.md §8 #4; it is exactly Test 13's tree). The paper's AVL insert/delete
   with "a key whose priority is set becomes a leaf" is not implemented.

2. The Reverb mapping (`horvitz_thompson_mean`, `sampling_priorities`): Reverb cannot list the
   keys it holds nor keep an "unknown" priority, so the learner cannot re-estimate unknown keys in
   place (reactor.md §5.4 assumed a shadow index of item keys; actors never learn the keys Reverb
   gives their items). Instead every new key enters with the estimate of its context at insertion
   time: new keys are the newest in time order, and their context is the recently assigned keys.
   The estimate is Eq. (H) with one cell per recently assigned key s_i, cell size |I_i| =
   1 / (N P(s_i)): the inverse of the density at which the learner found that key, which is what
   the cell sizes of Eq. (H) estimate (footnote 2). The self-normalised mean
   sum_i w_i p_i / sum_i w_i is then an estimate of the mean priority of all keys that high
   priorities do not inflate, because E_P[w p] = mean p (Test 14). The learner keeps it as a
   moving average over recent batches and publishes it; actors insert new keys with it.

Uniform mixing (§3.3): Reverb samples in proportion to priority ** alpha. Writing
(p ** alpha + eps / (1 - eps) * m) ** (1 / alpha), with m the mean of p ** alpha over the keys,
samples exactly eps uniform + (1 - eps) proportional (reactor.md §5.4), and the importance weight
1 / (N P(k)) uses the probability Reverb reports, the one actually used, so it stays exact when
m is only an estimate.
"""

from __future__ import annotations

import numpy as np


class ContextualPriorityTree:
    """CPT estimates and sampling probabilities of keys in time order (module docstring).

    `priorities[k]` is key k's priority, NaN where unknown. Known priorities must be > 0 where
    all are 0 no mass is left to sample (the replay adds a floor).
    """

    def __init__(self, priorities):
        self.priorities = np.asarray(priorities, dtype=np.float64)
        if self.priorities.ndim != 1 or len(self.priorities) == 0:
            raise ValueError(f"priorities must be a non-empty vector, got {self.priorities.shape}")
        known = self.priorities[~np.isnan(self.priorities)]
        if np.any(known < 0):
            raise ValueError("known priorities must be >= 0")
        n = len(self.priorities)
        self._count = np.zeros(n, np.int64)  # keys in the subtree rooted at each key
        self._mean = np.full(n, np.nan)  # count-weighted mean of its known parts (NaN: none)
        self._summarise(0, n - 1)
        self.estimates = np.empty(n)
        self.tree_probabilities = np.empty(n)
        # The root's inherited estimate is arbitrary (reactor.md §2.8): with nothing known every
        # key gets it, i.e. uniform sampling.
        self._descend(0, n - 1, inherited=1.0, probability=1.0)

    @staticmethod
    def root_of(lo: int, hi: int) -> int:
        return (lo + hi + 1) // 2

    def _summary(self, lo: int, hi: int) -> tuple[int, float]:
        if lo > hi:
            return 0, np.nan
        root = self.root_of(lo, hi)
        return int(self._count[root]), float(self._mean[root])

    def _summarise(self, lo: int, hi: int) -> None:
        if lo > hi:
            return
        root = self.root_of(lo, hi)
        self._summarise(lo, root - 1)
        self._summarise(root + 1, hi)
        parts = [self._summary(lo, root - 1), (1, self.priorities[root])]
        parts.append(self._summary(root + 1, hi))
        known = [(c, m) for c, m in parts if c > 0 and not np.isnan(m)]
        self._count[root] = sum(c for c, _ in parts)
        if known:
            self._mean[root] = sum(c * m for c, m in known) / sum(c for c, _ in known)

    def _descend(self, lo: int, hi: int, inherited: float, probability: float) -> None:
        """Estimates and path-product probabilities of the subtree [lo, hi]: at each node choose
        left subtree / own key / right subtree in proportion to their estimated mass."""
        root = self.root_of(lo, hi)
        own_mean = self._mean[root]
        estimate = inherited if np.isnan(own_mean) else own_mean
        children = [(lo, root - 1), (root + 1, hi)]
        masses = []
        for child in children:
            count, mean = self._summary(*child)
            masses.append(count * (estimate if np.isnan(mean) else mean))
        own = self.priorities[root]
        own = estimate if np.isnan(own) else own
        total = own + sum(masses)
        self.estimates[root] = own
        self.tree_probabilities[root] = probability * own / total
        for child, mass in zip(children, masses):
            if child[0] <= child[1]:
                self._descend(*child, estimate, probability * mass / total)

    def probabilities(self, uniform_epsilon: float = 0.0) -> np.ndarray:
        """P(k) = eps / N + (1 - eps) * tree probability of k (§3.3)."""
        n = len(self.priorities)
        return uniform_epsilon / n + (1.0 - uniform_epsilon) * self.tree_probabilities

    def sample(self, rng: np.random.Generator, uniform_epsilon: float = 0.0) -> int:
        """One key: uniformly with probability eps, else by walking down from the root."""
        n = len(self.priorities)
        if rng.random() < uniform_epsilon:
            return int(rng.integers(n))
        lo, hi = 0, n - 1
        while True:
            root = self.root_of(lo, hi)
            left, right = (lo, root - 1), (root + 1, hi)
            masses = np.array(
                [self._subtree_mass(*left), self.estimates[root], self._subtree_mass(*right)]
            )
            choice = rng.choice(3, p=masses / masses.sum())
            if choice == 1:
                return root
            lo, hi = left if choice == 0 else right

    def _subtree_mass(self, lo: int, hi: int) -> float:
        return float(self.estimates[lo : hi + 1].sum()) if lo <= hi else 0.0


def importance_weights(
    probabilities, table_size, exponent: float = 1.0, normalise: bool = True
) -> np.ndarray:
    """w_k = (1 / (N P(k))) ** exponent (Eq. (2), §3.3: exponent 1), divided by the batch
    maximum when `normalise` (reactor.md §8 #3, PER's convention)."""
    weights = (1.0 / (np.asarray(table_size, np.float64) * np.asarray(probabilities))) ** exponent
    return weights / weights.max() if normalise else weights


def horvitz_thompson_mean(values, probabilities, table_size) -> float:
    """sum_k w_k v_k / sum_k w_k with w_k = 1 / (N P(k)) over sampled keys: an estimate of the
    mean of v over all N keys that does not favour the keys sampled more often."""
    weights = importance_weights(probabilities, table_size, normalise=False)
    return float(np.sum(weights * np.asarray(values)) / np.sum(weights))


def sampling_priorities(priorities, mean_weight, uniform_epsilon: float, exponent: float):
    """The priority to write to Reverb so that its `priority ** exponent` sampling is the §3.3
    mixture eps * uniform + (1 - eps) * proportional to priority ** exponent, given
    `mean_weight`, the mean of priority ** exponent over the table (module docstring).

    Written with arithmetic operators only: works on numpy arrays and TensorFlow tensors.
    """
    if exponent == 0:
        return priorities  # every priority ** 0 is 1: uniform sampling already
    offset = uniform_epsilon / (1.0 - uniform_epsilon) * mean_weight
    return (priorities**exponent + offset) ** (1.0 / exponent)
