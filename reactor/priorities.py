"""Lazy prioritisation of overlapping sequences (§3.3, App. 6.3): pure numpy, so the rules can be
checked against hand-worked numbers (docs/papers/reactor.md#worked-test-numbers, Tests 13-14).

Two estimators of the priority of keys that were never through the learner ("unknown" keys):

1. `ContextualPriorityTree`: the paper's Contextual Priority Tree, with Fig. 5's rules a-f (only
   drawn) as we reconstruct them (docs/papers/reactor.md#departures-from-the-paper): every
   node's summary is the count-weighted mean of the known parts of its subtree; an unknown part
   inherits the estimate of the smallest enclosing subtree that knows something. Keys are in
   time order in an AVL tree whose summaries are recomputed after every change and rotation;
   insert, delete, sampling and the probability query are O(log n), and a key whose priority
   is set is removed and put back as a leaf (App. 6.3). The partition is the tree's shape: it
   depends on which keys were inserted, deleted and set, not on the values written (the
   condition of §3.3 for unbiased estimates). `ContextualPriorityTree.balanced` builds Test
   13's tree directly.

2. The Reverb mapping (`PriorityEstimates`, `ReplayModel`): Reverb takes a priority when a key
   is inserted and lets the learner rewrite only keys it has sampled (actors never learn the keys
   Reverb gives their items, and Reverb cannot list them), so a key never sampled keeps the
   priority it entered with: a design chooses that priority. In the tree, an unassigned key's
   estimate is the count-weighted mean of the assigned keys around it, and since a key shares 31
   of its 32 transitions with the next, that follows the key's own priority: the tree gives the
   unassigned keys, on the whole, the mean of their own priorities. That is lower than the mean
   of all keys, because prioritised sampling has already assigned the high-priority regions.
   `lazy` inserts new keys at the learner's estimate of it: the Horvitz-Thompson mean
   sum_i w_i p_i / sum_i w_i of the priorities it assigns to keys it samples for the first time
   (the keys that were unassigned), w_i = 1 / (N P(s_i)), the inverse of the density at which it
   found them, which is what §3.3's cell sizes w_i = |I_i| estimate (footnote 2): as E_P[w f] =
   mean f (Test 14), the ratio estimates the unassigned keys' mean without favouring the keys
   sampled more often.
   It is a moving average over recent batches, published to the actors, which insert with it.
   `lazy_global` averages every sampled key's priority (the mean of all keys). Replaying one
   stream through numpy models of both and of the tree (benchmarks/reactor_priorities.py), lazy
   samples closer to the tree; docs/papers/reactor.md#departures-from-the-paper has the
   distances.

Uniform mixing (§3.3): Reverb samples in proportion to priority ** alpha. Writing
(p ** alpha + eps / (1 - eps) * m) ** (1 / alpha), with m the mean of p ** alpha over the keys,
samples exactly eps uniform + (1 - eps) proportional (Test 14), and the importance weight
1 / (N P(k)) uses the probability Reverb reports, the one actually used, so it stays exact when
m is only an estimate.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

Key = Any  # any ordered value: the replay's time steps
Numeric = Any  # a float, a numpy array or a TensorFlow tensor (arithmetic operators only)


class Node:
    """One key of the tree: its priority (NaN: unknown) and its subtree's summary (Fig. 5)."""

    __slots__ = ("key", "priority", "left", "right", "height", "count", "mean")

    def __init__(self, key: Key, priority: float) -> None:
        self.key = key
        self.priority = float(priority)
        self.left: Node | None = None
        self.right: Node | None = None
        self.height = 1
        self.count = 1  # keys in the subtree (always known)
        self.mean = self.priority  # count-weighted mean of its known parts (NaN: none known)

    def summarise(self) -> None:
        """Recompute height, count and mean from the children (after any change below or a
        rotation): our reconstruction of Fig. 5's rules a-f."""
        parts = [(1, self.priority)]
        height = 0
        for child in (self.left, self.right):
            if child is not None:
                parts.append((child.count, child.mean))
                height = max(height, child.height)
        self.height = height + 1
        self.count = sum(count for count, _ in parts)
        known = [(count, mean) for count, mean in parts if not np.isnan(mean)]
        weight = sum(count for count, _ in known)
        self.mean = sum(count * mean for count, mean in known) / weight if known else np.nan

    def masses(self, inherited: float) -> tuple[float, np.ndarray]:
        """(this node's effective mean, the masses of left subtree / own key / right subtree),
        unknowns filled with the effective mean (the orange proportions of Fig. 5)."""
        estimate = inherited if np.isnan(self.mean) else self.mean

        def mass(child: Node | None) -> float:
            if child is None:
                return 0.0
            return child.count * (estimate if np.isnan(child.mean) else child.mean)

        own = estimate if np.isnan(self.priority) else self.priority
        return estimate, np.array([mass(self.left), own, mass(self.right)])


def _height(node: Node | None) -> int:
    return 0 if node is None else node.height


def _rotate_right(node: Node) -> Node:
    top = node.left
    assert top is not None  # rotated only towards its taller side
    node.left, top.right = top.right, node
    node.summarise()
    top.summarise()
    return top


def _rotate_left(node: Node) -> Node:
    top = node.right
    assert top is not None  # rotated only towards its taller side
    node.right, top.left = top.left, node
    node.summarise()
    top.summarise()
    return top


def _rebalance(node: Node) -> Node:
    """Summarise `node` and restore the AVL condition at it (one single or double rotation)."""
    node.summarise()
    balance = _height(node.left) - _height(node.right)
    if balance > 1:
        left = node.left
        assert left is not None  # the taller side
        if _height(left.left) < _height(left.right):
            node.left = _rotate_left(left)
        return _rotate_right(node)
    if balance < -1:
        right = node.right
        assert right is not None  # the taller side
        if _height(right.right) < _height(right.left):
            node.right = _rotate_right(right)
        return _rotate_left(node)
    return node


def _insert(node: Node | None, new: Node) -> Node:
    if node is None:
        return new
    if new.key < node.key:
        node.left = _insert(node.left, new)
    elif new.key > node.key:
        node.right = _insert(node.right, new)
    else:
        raise KeyError(f"key {new.key!r} is already in the tree")
    return _rebalance(node)


def _pop_min(node: Node) -> tuple[Node, Node | None]:
    """(the leftmost node, the subtree without it)."""
    if node.left is None:
        return node, node.right
    smallest, node.left = _pop_min(node.left)
    return smallest, _rebalance(node)


def _delete(node: Node | None, key: Key) -> Node | None:
    if node is None:
        raise KeyError(f"key {key!r} is not in the tree")
    if key < node.key:
        node.left = _delete(node.left, key)
    elif key > node.key:
        node.right = _delete(node.right, key)
    else:
        if node.left is None or node.right is None:
            return node.left or node.right
        successor, right = _pop_min(node.right)  # the next key in time takes the node's place
        successor.left, successor.right = node.left, right
        node = successor
    return _rebalance(node)


class ContextualPriorityTree:
    """The CPT (App. 6.3): keys in an AVL tree ordered by time, each with a priority or NaN
    (unknown), every node summarising its subtree (module docstring).

    Insert, delete, set, sample, estimate and probability query are O(log n) (the tree's height
    stays below 1.45 log2(n + 2)). Keys are any ordered values (the replay's time steps). Where
    every known priority is 0 there is no mass to sample (the replay adds a floor).
    """

    def __init__(self, root_estimate: float = 1.0) -> None:
        self.root: Node | None = None
        # The estimate the root passes down is arbitrary; with nothing known every key gets it,
        # i.e. uniform sampling.
        self.root_estimate = root_estimate

    @classmethod
    def balanced(
        cls, priorities: Sequence[float] | np.ndarray, keys: Sequence[Key] | None = None
    ) -> ContextualPriorityTree:
        """The perfectly balanced tree over `keys` (default 0..n-1) in one pass: the node of the
        keys [lo, hi] is key (lo + hi + 1) // 2 (Test 13's tree in
        docs/papers/reactor.md#worked-test-numbers)."""
        values = np.asarray(priorities, dtype=np.float64)
        if values.ndim != 1 or len(values) == 0:
            raise ValueError(f"priorities must be a non-empty vector, got {values.shape}")
        for priority in values:
            _check_priority(priority)
        ordered = list(range(len(values)) if keys is None else keys)
        if len(ordered) != len(values) or any(a >= b for a, b in zip(ordered, ordered[1:])):
            raise ValueError("keys must be strictly increasing, one per priority")

        def build(lo: int, hi: int) -> Node | None:
            if lo > hi:
                return None
            middle = (lo + hi + 1) // 2
            node = Node(ordered[middle], values[middle])
            node.left, node.right = build(lo, middle - 1), build(middle + 1, hi)
            node.summarise()
            return node

        tree = cls()
        tree.root = build(0, len(ordered) - 1)
        return tree

    def __len__(self) -> int:
        return 0 if self.root is None else self.root.count

    def insert(self, key: Key, priority: float = np.nan) -> None:
        """Add `key`; a new sequence enters with its priority unknown (§3.3)."""
        _check_priority(priority)
        self.root = _insert(self.root, Node(key, priority))

    def delete(self, key: Key) -> None:
        """Remove `key` (the replay's eviction of its oldest sequence)."""
        self.root = _delete(self.root, key)

    def set_priority(self, key: Key, priority: float) -> None:
        """Set or update `key`'s priority after the learner saw it. App. 6.3: the key is removed
        and placed back so that it becomes a leaf, next to the keys whose estimates it should
        inform. Inserting makes it a leaf; when that insertion needs a double rotation, the
        rotation lifts it to the parent of two leaves (AVL rebalancing, which the paper keeps)."""
        _check_priority(priority)
        self.delete(key)
        self.insert(key, priority)

    def _locate(self, key: Key) -> tuple[float, float]:
        """(key's estimated priority, its tree probability): the walk from the root to it, with
        the product of the branch probabilities along the path."""
        node, inherited, probability = self.root, self.root_estimate, 1.0
        while node is not None:
            estimate, masses = node.masses(inherited)
            branch = 1 if key == node.key else (0 if key < node.key else 2)
            probability *= masses[branch] / masses.sum()
            if branch == 1:
                return float(masses[1]), probability
            node, inherited = (node.left if branch == 0 else node.right), estimate
        raise KeyError(f"key {key!r} is not in the tree")

    def estimate(self, key: Key) -> float:
        """p_hat: the key's priority if known, else the estimate its context gives (§3.3)."""
        return self._locate(key)[0]

    def probability(self, key: Key, uniform_epsilon: float = 0.0) -> float:
        """P(k) = eps / N + (1 - eps) * tree probability of k (§3.3)."""
        return uniform_epsilon / len(self) + (1.0 - uniform_epsilon) * self._locate(key)[1]

    def sample(self, rng: np.random.Generator, uniform_epsilon: float = 0.0) -> Key:
        """One key: uniformly with probability eps, else by walking down from the root choosing
        left subtree / own key / right subtree in proportion to their estimated masses."""
        if self.root is None:
            raise ValueError("cannot sample from an empty tree")
        if rng.random() < uniform_epsilon:
            return self._select(int(rng.integers(len(self))))
        node: Node | None = self.root
        inherited = self.root_estimate
        while True:
            assert node is not None  # an empty subtree has no mass to be chosen
            estimate, masses = node.masses(inherited)
            branch = rng.choice(3, p=masses / masses.sum())
            if branch == 1:
                return node.key
            node, inherited = (node.left if branch == 0 else node.right), estimate

    def _select(self, rank: int) -> Key:
        """The key with `rank` earlier keys (subtree counts make this O(log n))."""
        node = self.root
        while True:
            assert node is not None  # rank < len(self)
            before = 0 if node.left is None else node.left.count
            if rank == before:
                return node.key
            if rank < before:
                node = node.left
            else:
                rank -= before + 1
                node = node.right

    def table(self) -> tuple[list, np.ndarray, np.ndarray]:
        """(keys in time order, their estimates, their tree probabilities) in one O(n) pass."""
        rows: list[tuple] = []

        def descend(node: Node, inherited: float, probability: float) -> None:
            estimate, masses = node.masses(inherited)
            shares = probability * masses / masses.sum()
            if node.left is not None:
                descend(node.left, estimate, shares[0])
            rows.append((node.key, masses[1], shares[1]))
            if node.right is not None:
                descend(node.right, estimate, shares[2])

        if self.root is not None:
            descend(self.root, self.root_estimate, 1.0)
        keys = [key for key, _, _ in rows]
        return keys, np.array([r[1] for r in rows]), np.array([r[2] for r in rows])

    def probabilities(self, uniform_epsilon: float = 0.0) -> np.ndarray:
        """P(k) of every key in time order."""
        _, _, tree_probabilities = self.table()
        return uniform_epsilon / len(self) + (1.0 - uniform_epsilon) * tree_probabilities


def _check_priority(priority: float) -> None:
    if not (np.isnan(priority) or (np.isfinite(priority) and priority >= 0)):
        raise ValueError(f"a priority must be NaN (unknown) or finite and >= 0, got {priority}")


def importance_weights(
    probabilities: np.ndarray | Sequence[float],
    table_size: int | np.ndarray,
    exponent: float = 1.0,
    normalise: bool = True,
) -> np.ndarray:
    """w_k = (1 / (N P(k))) ** exponent (Eq. (2), §3.3: exponent 1), divided by the batch
    maximum when `normalise` (our choice, PER's convention)."""
    weights = (1.0 / (np.asarray(table_size, np.float64) * np.asarray(probabilities))) ** exponent
    return weights / weights.max() if normalise else weights


def horvitz_thompson_mean(
    values: np.ndarray | Sequence[float],
    probabilities: np.ndarray | Sequence[float],
    table_size: int | np.ndarray,
) -> float:
    """sum_k w_k v_k / sum_k w_k with w_k = 1 / (N P(k)) over sampled keys: an estimate of the
    mean of v over all N keys that does not favour the keys sampled more often."""
    weights = importance_weights(probabilities, table_size, normalise=False)
    return float(np.sum(weights * np.asarray(values)) / np.sum(weights))


def sampling_priorities(
    priorities: Numeric, mean_weight: Numeric, uniform_epsilon: float, exponent: float
) -> Numeric:
    """The priority to write to Reverb so that its `priority ** exponent` sampling is the §3.3
    mixture eps * uniform + (1 - eps) * proportional to priority ** exponent, given
    `mean_weight`, the mean of priority ** exponent over the table (module docstring).

    Written with arithmetic operators only: works on numpy arrays and TensorFlow tensors.
    """
    if exponent == 0:
        return priorities  # every priority ** 0 is 1: uniform sampling already
    offset = uniform_epsilon / (1.0 - uniform_epsilon) * mean_weight
    return (priorities**exponent + offset) ** (1.0 / exponent)


PRIORITISATIONS = ("lazy", "lazy_global", "max", "uniform")  # reactor.config's, same order


class PriorityEstimates:
    """The learner's priority state in numpy (`reactor.learning.update_priority_state` is the
    TensorFlow original; a test holds them equal): the model the benchmark
    (benchmarks/reactor_priorities.py) and the Reverb test replay. `update` takes a batch's new
    priorities, the probabilities Reverb sampled them with, the table size and which keys were
    sampled for the first time; it returns the priorities to write and moves `insert_priority`,
    what actors insert new keys with:

    - `lazy`: the Horvitz-Thompson mean of priority ** alpha over the keys sampled for the first
      time, i.e. over the keys that were still unassigned, plus the uniform share;
    - `lazy_global`: the same mean over every sampled key;
    - `max`: the largest priority written so far (PER, App. 6.5);
    - `uniform`: nothing (sampling ignores priorities).

    The means are ratios of moving sums (rate `rate` per batch), so batches without a first
    sample leave the unassigned mean where it was.
    """

    def __init__(
        self, prioritisation: str, epsilon: float, rate: float, exponent: float = 1.0
    ) -> None:
        if prioritisation not in PRIORITISATIONS:
            raise ValueError(f"prioritisation must be one of {PRIORITISATIONS}")
        self.prioritisation, self.epsilon, self.rate = prioritisation, epsilon, rate
        self.exponent = exponent
        self.mean_weight = 1.0  # mean of priority ** alpha over the replay
        self.unassigned_sum = 1.0  # moving sum_first w p ** alpha, sum_first w: their ratio is
        self.unassigned_count = 1.0  # the mean over unassigned keys
        self.insert_priority = 1.0

    def offset(self) -> float:
        """The uniform share folded into every priority ** alpha (`sampling_priorities`)."""
        return self.epsilon / (1.0 - self.epsilon) * self.mean_weight

    def update(
        self,
        priorities: np.ndarray | Sequence[float],
        probabilities: np.ndarray | Sequence[float],
        table_size: int | np.ndarray,
        first: np.ndarray | Sequence[bool],
    ) -> np.ndarray:
        p = np.asarray(priorities, np.float64)
        alpha = self.exponent
        if self.prioritisation == "uniform" or alpha == 0:
            return p
        weights, ht = p**alpha, importance_weights(probabilities, table_size, normalise=False)
        first = np.asarray(first, bool)
        self.mean_weight += self.rate * (np.sum(ht * weights) / np.sum(ht) - self.mean_weight)
        self.unassigned_sum += self.rate * (np.sum(ht * weights * first) - self.unassigned_sum)
        self.unassigned_count += self.rate * (np.sum(ht * first) - self.unassigned_count)
        written = sampling_priorities(p, self.mean_weight, self.epsilon, alpha)
        if self.prioritisation == "max":
            self.insert_priority = max(self.insert_priority, float(np.max(written)))
            return written
        level = self.mean_weight
        if self.prioritisation == "lazy" and self.unassigned_count > 0:
            level = self.unassigned_sum / self.unassigned_count
        self.insert_priority = float(
            sampling_priorities(level ** (1 / alpha), self.mean_weight, self.epsilon, alpha)
        )
        return written


class ReplayModel:
    """Reverb's prioritised table as Reactor configures it, in numpy: keys in insertion order,
    the oldest evicted beyond `capacity`, each sampled with probability priority ** exponent /
    sum over the table; a write to a key no longer held is ignored (`common.replay.replay`)."""

    def __init__(self, capacity: int, exponent: float) -> None:
        self.capacity, self.exponent = capacity, exponent
        self.priorities: dict[Key, float] = {}  # insertion-ordered

    def __len__(self) -> int:
        return len(self.priorities)

    def insert(self, key: Key, priority: float) -> None:
        self.priorities[key] = float(priority)
        if len(self.priorities) > self.capacity:
            del self.priorities[next(iter(self.priorities))]

    def update(self, keys: Sequence[Key], priorities: np.ndarray | Sequence[float]) -> None:
        for key, priority in zip(keys, priorities):
            if key in self.priorities:
                self.priorities[key] = float(priority)

    def probabilities(self, keys: Sequence[Key]) -> np.ndarray:
        weights = np.array(list(self.priorities.values())) ** self.exponent
        return np.array([self.priorities[k] ** self.exponent for k in keys]) / weights.sum()
