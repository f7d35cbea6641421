"""Behaviour meta-controllers of DiCE, GDI and LBC (numpy only, no TensorFlow).

Each actor owns one controller (DiCE Algorithm 1 and GDI Algorithms 2-3 build the bandits inside
the actor; LBC's Algorithm 1 is "Actor-Wise"). One interface:

    params = controller.propose()              # at episode start: the paper's own variables
    ...run one episode with these params...
    controller.update(params, episode_return)  # at episode end: the raw undiscounted return G = sum r

- `DiceController`: DiCE's Bandits Vote Algorithm (DiCE App. A, Algorithm 2, Eqs. (9)-(11)) over the
  inverse temperature; `params = {"eta": float}`.
- `GdiController`: GDI's Bandits Controller (GDI App. G, Algorithm 4, Eqs. (13)-(15)) over
  lambda = (1/tau_1, 1/tau_2, eps) of Eq. (2); the same for GDI-I3 and GDI-H3;
  `params = {"eta1": float, "eta2": float, "epsilon": float}`.
- `LbcController`: LBC's population-based MAB (LBC Sec. 4.2, App. E, Algorithm 1, Eqs. (22)-(25)) over
  psi = (tau_1..tau_N, omega_1..omega_N) of Eq. (10); `params = {"eta": [N], "omega": [N],
  "omega_unnormalised": [N]}` (LBC's tau_i multiplies the logits, so it is an inverse temperature and is
  returned as `eta`; LBC §4.1).

Conventions:
- Inverse temperatures `eta = 1/tau` (docs/architecture.md#conventions); `eta = 0` is the uniform
  policy.
- The bandits work on a coordinate x per behaviour parameter (an `Axis`): x = log(1 + eta) for the
  temperatures in the default readings, x = eps or x = omega for weights. An axis is a box [lo, hi] cut
  into blocks ("tiles" in DiCE, "blocks" in GDI, "arms"/"regions" in LBC) of width `acc`; block i is
  [lo + i*acc, lo + (i+1)*acc), the last block is closed and ends at hi.
- `update()` recomputes x from `params` (the papers' "receive (tau, g), transform tau to x"), so a
  controller needs no memory of what it proposed. Points are drawn at least 1e-8 of a block width below
  a block's upper edge so that the eta = expm1(x) -> log1p(eta) round trip credits the proposed block.
- Factorised (one bandit set per coordinate) vs joint (one bandit set on the product grid): see each
  controller; `factorized=False` is the papers' literal reading.
- `selection="uniform"` bypasses learning: each behaviour parameter is uniform over its own range
  (eta = 1/tau on [0, eta_max], eps and omega on [0, 1]: GDI's Table 20 "Uniform" over Table 6's
  search ranges, LBC's Random Selection over the main algorithm's behaviour space), and `update()`
  only checks its input. `selection="uniform_coordinate"` draws the bandit coordinate x uniformly
  over the box instead (DiCE's `random` ablation: the initial, never-updated bandits); on a log1p
  axis eta = e^x - 1 is then far from uniform (median about 6 of [0, 50]).
- Determinism and checkpoints: `seed` fixes every random draw. `state_dict()` returns a flat
  `dict[str, np.ndarray]` (bandit hyper-parameters, weights, counts and the PCG64 state as uint64 words)
  that `np.savez` can store; `load_state_dict()` restores it into a controller built with the same
  arguments, after which the two produce identical proposals.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

Params = dict[str, Any]
StateDict = dict[str, np.ndarray]

# choice: floor((x - l)/acc) is computed with this slack, so that 0.3/0.1 = 2.9999999999999996
# lands in block 3, not 2 (GDI Test 7 in docs/papers/gdi.md#worked-test-numbers).
INDEX_TOLERANCE = 1e-9
# choice: a proposed point keeps this fraction of a block width below the block's upper edge, so that
# block_of (which adds INDEX_TOLERANCE) after update()'s eta = expm1(x) -> log1p(eta) round trip (a few ulp)
# credits the block propose() drew from.
EDGE_MARGIN = 1e-8
# The z-score is 0 when the std (ddof 0) is below this, e.g. at init, where DiCE Eq. (11) and
# GDI Eq. (15) would divide by 0 (docs/papers/dice.md#departures-from-the-paper).
STD_FLOOR = 1e-8

SPACES = ("log1p", "inv_tau", "exp_literal")
SELECTIONS = ("bandits", "uniform", "uniform_coordinate")


def _check_choice(name: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {name}={value!r}")


def _check_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")


# ----------------------------------------------------------------------------- coordinates


@dataclasses.dataclass(frozen=True)
class Axis:
    """One behaviour parameter as a bandit sees it.

    The parameter p maps to the bandit coordinate x = log1p(p) when `log1p` is true (DiCE App. A and GDI
    App. G: x = log(1 + 1/tau)), else x = p. The box [lo, hi] in x is cut into `num_blocks` blocks of
    width `acc`; x is clipped into the box (DiCE App. A "each x is clipped"; GDI App. G).
    """

    name: str
    lo: float
    hi: float
    acc: float
    log1p: bool = False

    def __post_init__(self):
        if not (np.isfinite(self.lo) and np.isfinite(self.hi) and self.hi > self.lo):
            raise ValueError(
                f"axis {self.name!r} needs finite lo < hi, got lo={self.lo}, hi={self.hi}"
            )
        if not self.acc > 0:
            raise ValueError(f"axis {self.name!r} needs acc > 0, got acc={self.acc}")

    @property
    def num_blocks(self) -> int:
        """ceil((hi - lo)/acc): LBC Table 3's range [0, e^4] at accuracy 0.2 gives 273 blocks
        (LBC Test 11 in docs/papers/lbc.md#worked-test-numbers)."""
        return max(1, math.ceil((self.hi - self.lo) / self.acc - INDEX_TOLERANCE))

    def block_of(self, x) -> np.ndarray:
        """Block index floor((min(max(x, l), r) - l)/acc) (DiCE Eq. (10), GDI App. G), clamped to
        num_blocks - 1 so that x = r, which the printed index puts one past the last block, is
        the last block (docs/papers/dice.md#departures-from-the-paper)."""
        clipped = np.clip(np.asarray(x, dtype=np.float64), self.lo, self.hi)
        index = np.floor((clipped - self.lo) / self.acc + INDEX_TOLERANCE).astype(np.int64)
        return np.minimum(index, self.num_blocks - 1)

    def block_bounds(self, blocks) -> tuple[np.ndarray, np.ndarray]:
        """[lower, upper] edges of blocks in x (the last block ends at hi)."""
        blocks = np.asarray(blocks)
        lower = self.lo + blocks * self.acc
        return lower, np.minimum(lower + self.acc, self.hi)

    def to_param(self, x) -> np.ndarray:
        """Behaviour parameter of a bandit coordinate: eta = exp(x) - 1 = 1/tau (DiCE App. A)."""
        return np.expm1(x) if self.log1p else np.asarray(x, dtype=np.float64)

    def to_coordinate(self, value) -> np.ndarray:
        """Bandit coordinate of a behaviour parameter: x = log(1 + 1/tau) (DiCE App. A, GDI App. G)."""
        value = np.asarray(value, dtype=np.float64)
        if np.any(np.isnan(value)):
            raise ValueError(f"behaviour parameter {self.name!r} is NaN: {value!r}")
        if self.log1p and np.any(value < 0):
            raise ValueError(
                f"{self.name!r} is an inverse temperature and must be >= 0, got {value!r}"
            )
        return np.log1p(value) if self.log1p else value


def eta_axis(name: str, space: str, eta_max: float, num_blocks: int) -> Axis:
    """An inverse-temperature axis under one of the three readings of DiCE Table 5 / GDI Table 6
    ("search range for 1/tau [0, 50]") together with DiCE App. A / GDI App. G (tau = 1/(exp(x) - 1)).

    - "log1p" (default; the `bandit_space` rows of docs/papers/dice.md#departures-from-the-paper
      and docs/papers/gdi.md#departures-from-the-paper): x = log(1 + eta) on
      [0, log(1 + eta_max)] in `num_blocks` equal blocks; the printed range bounds eta, the
      printed transform gives x.
    - "inv_tau": x = eta on [0, eta_max] (the table read alone; GDI's acc 1.0 gives 50 blocks).
    - "exp_literal": x on [0, eta_max] with eta = exp(x) - 1 (range and transform both taken literally;
      eta then reaches e^50 and most blocks are effectively greedy; GDI Test 7 in
      docs/papers/gdi.md#worked-test-numbers lists the block edges).
    """
    _check_choice("space", space, SPACES)
    _check_positive_int("num_blocks", num_blocks)
    hi = math.log1p(eta_max) if space == "log1p" else float(eta_max)
    return Axis(name, 0.0, hi, hi / num_blocks, log1p=(space != "inv_tau"))


class Grid:
    """The product of a few axes, with blocks numbered by a flat (C-order) index."""

    def __init__(self, axes: Sequence[Axis]):
        self.axes = tuple(axes)
        self.shape = tuple(axis.num_blocks for axis in self.axes)
        self.size = int(np.prod(self.shape))

    def block_of(self, x) -> int:
        """Flat block index of one point x (shape [len(axes)])."""
        index = [int(axis.block_of(xi)) for axis, xi in zip(self.axes, np.atleast_1d(x))]
        return int(np.ravel_multi_index(index, self.shape))

    def sample_in(self, blocks, rng: np.random.Generator) -> np.ndarray:
        """One point drawn uniformly inside each flat block ("sample d candidates from these blocks,
        one uniformly from a block", DiCE App. A / GDI App. G; "uniformly sample psi from the region",
        LBC Algorithm 1). Shape [len(blocks), len(axes)]."""
        multi = np.unravel_index(np.asarray(blocks), self.shape)
        points = []
        for axis, index in zip(self.axes, multi):
            lower, upper = axis.block_bounds(index)
            fraction = rng.random(index.shape) * (1.0 - EDGE_MARGIN)
            points.append(lower + fraction * (upper - lower))
        return np.stack(points, axis=-1)

    def sample_uniform(self, rng: np.random.Generator) -> np.ndarray:
        """One point uniform over the whole box in the bandit coordinates (DiCE's `random`
        ablation, `selection="uniform_coordinate"`)."""
        return np.array([axis.lo + rng.random() * (axis.hi - axis.lo) for axis in self.axes])


# ----------------------------------------------------------------------------- scores and selection


def ucb_scores(
    values, counts, ucb_scale, *, standardise: bool = True, over=None, ucb_sum: str = "all"
) -> np.ndarray:
    """score_i = (V_i - mean V)/std V + c * sqrt(log(1 + sum_j N_j) / (1 + N_i)), along the last axis
    (leading axes, e.g. one row per bandit, are independent; `ucb_scale` broadcasts against them).

    DiCE Eq. (11), GDI Eq. (15) (z-score over all blocks) and LBC Eq. (25) (z-score over the
    visited arms, `over = counts > 0`, our reading of App. E.3); `standardise=False` is LBC Eq.
    (24). The std is the population std and the z-term is 0 wherever it is undefined (std < 1e-8;
    unvisited arms): docs/papers/dice.md#departures-from-the-paper,
    docs/papers/lbc.md#departures-from-the-paper. `ucb_sum="others"` sums N_j over j != i as LBC
    Sec. 4.2 prints it.
    """
    _check_choice("ucb_sum", ucb_sum, ("all", "others"))
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    exploit = _zscores(values, over) if standardise else values
    total = counts.sum(-1, keepdims=True) - (counts if ucb_sum == "others" else 0.0)
    return exploit + ucb_scale * np.sqrt(np.log1p(total) / (1.0 + counts))


def _zscores(values: np.ndarray, over) -> np.ndarray:
    """(V - mean V)/std V along the last axis over the entries in `over` (all when None); 0 elsewhere and
    where the std is below 1e-8."""
    if over is None:
        mean, std = values.mean(-1, keepdims=True), values.std(-1, keepdims=True)
        return np.where(std >= STD_FLOOR, (values - mean) / np.maximum(std, STD_FLOOR), 0.0)
    over = np.asarray(over, bool)
    n = np.maximum(over.sum(-1, keepdims=True), 1)
    mean = np.where(over, values, 0.0).sum(-1, keepdims=True) / n
    std = np.sqrt(np.where(over, (values - mean) ** 2, 0.0).sum(-1, keepdims=True) / n)
    return np.where(over & (std >= STD_FLOOR), (values - mean) / np.maximum(std, STD_FLOOR), 0.0)


def top_k(scores, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the k largest scores (as a set), ties broken uniformly at random (at init all
    scores tie and a stable sort would always pick blocks 0..k-1;
    docs/papers/dice.md#departures-from-the-paper)."""
    scores = np.asarray(scores)
    if not 1 <= k <= scores.size:
        raise ValueError(f"k must lie in [1, {scores.size}], got k={k}")
    kth_largest = np.partition(scores, scores.size - k)[scores.size - k]
    above = np.flatnonzero(scores > kth_largest)
    tied = np.flatnonzero(scores == kth_largest)
    return np.concatenate([above, rng.choice(tied, size=k - above.size, replace=False)])


def gumbel_top_k(logits, k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct indices drawn without replacement with probabilities softmax(logits), in draw order
    (DiCE/GDI `random` mode: "sample d blocks with scores as the logits without replacement")."""
    logits = np.asarray(logits, dtype=np.float64)
    if not 1 <= k <= logits.size:
        raise ValueError(f"k must lie in [1, {logits.size}], got k={k}")
    perturbed = logits + rng.gumbel(size=logits.shape)
    chosen = np.argpartition(-perturbed, k - 1)[:k]
    return chosen[np.argsort(-perturbed[chosen])]


def most_voted(votes, rng: np.random.Generator) -> int:
    """The arm with the most votes, ties drawn uniformly (LBC App. E.4.2 and its Remark)."""
    arms, counts = np.unique(np.asarray(votes), return_counts=True)
    return int(rng.choice(arms[counts == counts.max()]))


# ----------------------------------------------------------------------------- tile codings


@dataclasses.dataclass(frozen=True)
class NeighbourTiling:
    """DiCE's tile coding (App. A, Eq. (9)): one weight per block, V_i = mean of w_{i-width..i+width}.

    width ~ Uniform(`widths`) per bandit (Table 5 "Bandit Tiling Width Uniform([1, 2, 3])"). Eq. (9)
    does not say what k out of range means: `edge="valid"` (default, the `bandit_edge` row of
    docs/papers/dice.md#departures-from-the-paper) averages the weights
    that exist, so the update moves V_i by exactly lr*(g - V_i) everywhere; `edge="zero_pad"` keeps the
    printed 1/(2*width + 1), i.e. missing weights count as 0.
    """

    widths: tuple[int, ...] = (1, 2, 3)  # DiCE Table 5
    edge: str = "valid"  # choice: docs/papers/dice.md#departures-from-the-paper

    def __post_init__(self):
        _check_choice("edge", self.edge, ("valid", "zero_pad"))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        return np.array([rng.choice(self.widths)], dtype=np.float64)

    def tiles(self, shape: tuple[int, ...], spec: np.ndarray):
        """(tiles [B, T] weight indices, mask [B, T], denominators [B], number of weights)."""
        if len(shape) != 1:
            raise ValueError(f"NeighbourTiling is 1-D (DiCE Eq. (9)); got a grid of shape {shape}")
        num_blocks, width = shape[0], int(spec[0])
        tiles = np.arange(num_blocks)[:, None] + np.arange(-width, width + 1)[None, :]
        mask = (tiles >= 0) & (tiles < num_blocks)
        denominators = mask.sum(1) if self.edge == "valid" else np.full(num_blocks, 2 * width + 1)
        return np.clip(tiles, 0, num_blocks - 1), mask, denominators.astype(np.float64), num_blocks


@dataclasses.dataclass(frozen=True)
class OffsetTiling:
    """GDI's tile codings (App. G, Eq. (13)); docs/papers/gdi.md#departures-from-the-paper says how
    we read Table 6's tiling entries.

    Each bandit has K ~ Uniform(`num_tilings`) tilings (Table 6 "Bandit Tiling Width Uniform([2, 3, 4])");
    tiling k has tiles of ta_k ~ Uniform(`tile_sizes`) blocks per dimension (Table 6 "Accuracy of Tile
    coding Uniform([2, 3, 4])") shifted by to_k = o_k * ta_k blocks with o_k ~ U[0, 60] % (Table 6
    "Offset of Tile coding Uniform([0, 60])", read as a percentage of the tile). A block's tiles are the
    K tiles holding its centre, x -> floor((min(max(x - to_k, l), r) - l)/ta_k) (App. G), so
    len(M_btt(block)) = K and V_block is the mean of those K weights (Eq. (13)).
    """

    num_tilings: tuple[int, ...] = (2, 3, 4)  # GDI Table 6
    tile_sizes: tuple[int, ...] = (2, 3, 4)  # GDI Table 6
    offset_percent: tuple[float, float] = (0.0, 60.0)  # GDI Table 6

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """[K, 2] rows (tile size in blocks, offset as a fraction of the tile)."""
        count = rng.choice(self.num_tilings)
        sizes = rng.choice(self.tile_sizes, size=count)
        offsets = rng.uniform(self.offset_percent[0], self.offset_percent[1], size=count) / 100.0
        return np.stack([sizes.astype(np.float64), offsets], axis=1)

    def tiles(self, shape: tuple[int, ...], spec: np.ndarray):
        """(tiles [B, K] weight indices, mask [B, K], denominators [B], number of weights)."""
        blocks = np.indices(shape).reshape(len(shape), -1).T  # [B, D] multi-indices
        columns, num_weights = [], 0
        for size, offset in np.asarray(spec).reshape(-1, 2):
            extent = np.asarray(shape, dtype=np.float64)
            shifted = np.clip(blocks + 0.5 - offset * size, 0.0, extent)  # block centres, in blocks
            tile_shape = tuple(int(n) for n in np.floor(extent / size) + 1)
            index = np.floor(shifted / size).astype(np.int64)
            columns.append(num_weights + np.ravel_multi_index(index.T, tile_shape))
            num_weights += int(np.prod(tile_shape))
        tiles = np.stack(columns, axis=1)
        return (
            tiles,
            np.ones(tiles.shape, bool),
            np.full(len(tiles), float(tiles.shape[1])),
            num_weights,
        )


Tiling = NeighbourTiling | OffsetTiling


# ----------------------------------------------------------------------------- DiCE / GDI bandits


class TileCodedBandit:
    """One bandit of DiCE's BVA (App. A) / GDI's Bandits Controller (App. G) on a grid of blocks.

    - value (DiCE Eq. (9), GDI Eq. (13)): V_b = mean of the weights of block b's tiles;
    - update with (x, g) (DiCE Eq. (10), GDI Eq. (14)): b = block(x), w_j += lr*(g - V_b) for the tiles j
      of b (V_b computed once, before the loop), N_b += 1. GDI's Eq. (14) finds x's tile in each tiling
      directly; snapping x to its block first makes the update move exactly the tiles V_b reads
      (docs/papers/gdi.md#departures-from-the-paper), and N counts blocks, the N_i of Eq. (15);
    - score: `ucb_scores` over all blocks (DiCE Eq. (11), GDI Eq. (15));
    - candidates: mode `argmax` takes the top-d blocks (ties at random), mode `random` draws d distinct
      blocks with softmax(score) probabilities (the papers' "scores as logits without replacement").
    """

    def __init__(
        self,
        num_blocks: int,
        tiles,
        mask,
        denominators,
        num_weights: int,
        *,
        greedy: bool,
        lr: float,
        num_candidates: int,
        ucb_scale: float,
    ):
        if num_candidates > num_blocks:
            raise ValueError(f"num_candidates={num_candidates} exceeds the {num_blocks} blocks")
        self.tiles, self.mask, self.denominators = tiles, mask, denominators
        # Multiplying by a 0/1 mask is ~4x faster than np.where; GDI's tilings need no mask at all.
        self._mask_weights = None if mask.all() else mask.astype(np.float64)
        self.greedy, self.lr = bool(greedy), float(lr)
        self.num_candidates, self.ucb_scale = num_candidates, ucb_scale
        self.weights = np.zeros(num_weights)
        self.counts = np.zeros(num_blocks)

    def values(self) -> np.ndarray:
        gathered = self.weights[self.tiles]
        if self._mask_weights is not None:
            gathered *= self._mask_weights
        return gathered.sum(1) / self.denominators

    def scores(self) -> np.ndarray:
        return ucb_scores(self.values(), self.counts, self.ucb_scale)

    def candidate_blocks(self, rng: np.random.Generator) -> np.ndarray:
        pick = top_k if self.greedy else gumbel_top_k
        return pick(self.scores(), self.num_candidates, rng)

    def update(self, block: int, target: float) -> None:
        touched = self.tiles[block][self.mask[block]]
        value = self.weights[touched].sum() / self.denominators[block]
        self.weights[touched] += self.lr * (target - value)
        self.counts[block] += 1.0


class BanditEnsemble:
    """DiCE Algorithm 2 / GDI Algorithm 4: M tile-coded bandits on one grid.

    Each bandit draws mode ~ U{argmax, random} (uniform: our reading of DiCE Algorithm 2's
    "Sample mode"), lr ~ Uniform(learning_rates) and its
    tile coding at construction; every episode each bandit offers d candidates and x is drawn uniformly
    from the M*d candidates; every bandit is updated with every (x, g).
    """

    def __init__(
        self,
        axes: Sequence[Axis],
        rng: np.random.Generator,
        *,
        tiling: Tiling,
        num_bandits: int,
        num_candidates: int,
        ucb_scale: float,
        learning_rates: Sequence[float],
    ):
        _check_positive_int("num_bandits", num_bandits)
        _check_positive_int("num_candidates", num_candidates)
        self.grid, self.tiling, self._rng = Grid(axes), tiling, rng
        self._num_candidates, self._ucb_scale = num_candidates, ucb_scale
        self._specs = [
            (bool(rng.integers(2)), float(rng.choice(learning_rates)), tiling.draw(rng))
            for _ in range(num_bandits)
        ]
        self.bandits = [self._build(*spec) for spec in self._specs]

    def _build(self, greedy: bool, lr: float, tiling_spec: np.ndarray) -> TileCodedBandit:
        tiles = self.tiling.tiles(self.grid.shape, tiling_spec)
        return TileCodedBandit(
            self.grid.size,
            *tiles,
            greedy=greedy,
            lr=lr,
            num_candidates=self._num_candidates,
            ucb_scale=self._ucb_scale,
        )

    def candidates(self) -> np.ndarray:
        """The M*d candidate points, [M*d, len(axes)]."""
        blocks = np.concatenate([bandit.candidate_blocks(self._rng) for bandit in self.bandits])
        return self.grid.sample_in(blocks, self._rng)

    def propose(self) -> np.ndarray:
        candidates = self.candidates()
        return candidates[self._rng.integers(len(candidates))]

    def update(self, x, target: float) -> None:
        block = self.grid.block_of(x)
        for bandit in self.bandits:
            bandit.update(block, target)

    def mean_values(self) -> np.ndarray:
        """The ensemble's evaluation of each block: the mean of the bandits' V (DiCE §3.3)."""
        return np.mean([bandit.values() for bandit in self.bandits], axis=0)

    def measured_values(self) -> np.ndarray:
        """`mean_values()` of the blocks some game has been played in, -inf for the others.

        Tile coding gives a block that no game has used a value all the same, from its
        neighbours' games (and 0 before any): with negative returns (Pong) such a block can rate
        highest without one measurement. Every bandit learns from every game, so the bandits'
        visit counts agree."""
        return np.where(self.bandits[0].counts > 0, self.mean_values(), -np.inf)

    def propose_best(self) -> np.ndarray:
        """A point uniform inside the played block of best ensemble-mean value (no UCB term;
        ties at random): DiCE's "best region" evaluation (§3.3, §4.1; our reading in
        docs/papers/dice.md#departures-from-the-paper), an option for GDI. The
        paper samples from "the best region" the bandits have measured, so a block no game has
        played is never chosen; before the first game ends, the point is drawn as training
        draws it (`propose`)."""
        values = self.measured_values()
        if not np.isfinite(values).any():
            return self.propose()
        block = top_k(values, 1, self._rng)
        return self.grid.sample_in(block, self._rng)[0]

    def best_block(self) -> int:
        """The block `propose_best` favours, first on ties (any block before the first game),
        for the summaries: it consumes no random draws."""
        values = self.measured_values()
        return int(np.argmax(values if np.isfinite(values).any() else self.mean_values()))

    def state_dict(self) -> StateDict:
        state = {}
        for m, (bandit, (greedy, lr, spec)) in enumerate(zip(self.bandits, self._specs)):
            state.update(
                {
                    f"bandit{m}/greedy": np.array(greedy),
                    f"bandit{m}/lr": np.array(lr),
                    f"bandit{m}/tiling": spec.copy(),
                    f"bandit{m}/weights": bandit.weights.copy(),
                    f"bandit{m}/counts": bandit.counts.copy(),
                }
            )
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        specs = [
            (
                bool(state[f"bandit{m}/greedy"]),
                float(state[f"bandit{m}/lr"]),
                np.array(state[f"bandit{m}/tiling"], dtype=np.float64),
            )
            for m in range(len(self.bandits))
        ]
        bandits = [self._build(*spec) for spec in specs]
        for m, bandit in enumerate(bandits):
            _copy_into(bandit.weights, state[f"bandit{m}/weights"], f"bandit{m}/weights")
            _copy_into(bandit.counts, state[f"bandit{m}/counts"], f"bandit{m}/counts")
        self._specs, self.bandits = specs, bandits


# ----------------------------------------------------------------------------- LBC bandits


class BanditPopulation:
    """LBC Algorithm 1 (population-based MAB, actor-wise) on one grid of arms.

    Bandit m keeps visit counts N_m (Eq. (22)) and return sums per arm, so its value is the empirical mean
    return V_m = S_m / N_m (Eq. (23), read as (1/N) * sum R; the printed N * sum R is a typo,
    docs/papers/lbc.md#errata).
    The M bandits differ only in their UCB coefficient c_m ~ U[ucb_range] (App. E.4.1). Each episode every
    bandit votes for its top-D arms by `ucb_scores` (Eq. (25); ties at random), the most-voted arm wins
    (ties uniform) and psi is drawn uniformly inside it (App. E.4.2). Every bandit is updated once with
    (arm, G) (the second update printed in Algorithm 1 is a typo, docs/papers/lbc.md#errata).
    After every
    `replace_every`-th episode one bandit, chosen uniformly, is replaced by a fresh one with a new c and
    zero counts (App. E.4.4). `pick="softmax"` makes each bandit draw its D arms with softmax(score)
    probabilities instead (Sec. 4.2 samples the arm from softmax(Score); with M = D = 1 this is exactly
    Sec. 4.2, and `pick="top"` with M = D = 1 is the single argmax bandit of App. E.2-E.3).
    The population is stored as [M, arms] arrays, one row per bandit.
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
    ):
        _check_positive_int("num_bandits", num_bandits)
        _check_positive_int("top_d", top_d)
        _check_choice("pick", pick, ("top", "softmax"))
        _check_choice("ucb_sum", ucb_sum, ("all", "others"))
        if replace_every is not None:
            _check_positive_int("replace_every", replace_every)
        if not 0.0 <= ucb_range[0] <= ucb_range[1]:
            raise ValueError(
                f"ucb_range must satisfy 0 <= low <= high, got ucb_range={ucb_range!r}"
            )
        self.grid, self._rng = Grid(axes), rng
        if top_d > self.grid.size:
            raise ValueError(f"top_d={top_d} exceeds the {self.grid.size} arms")
        self._top_d, self._ucb_range, self._replace_every = top_d, tuple(ucb_range), replace_every
        self._pick, self._standardise, self._ucb_sum = pick, standardise, ucb_sum
        self.ucb_scales = rng.uniform(*self._ucb_range, size=num_bandits)
        self.counts = np.zeros((num_bandits, self.grid.size))
        self.return_sums = np.zeros((num_bandits, self.grid.size))
        self.episodes = 0

    def values(self) -> np.ndarray:
        """V_m per arm, [M, arms]; 0 for unvisited arms."""
        return np.divide(
            self.return_sums, self.counts, out=np.zeros_like(self.counts), where=self.counts > 0
        )

    def scores(self) -> np.ndarray:
        return ucb_scores(
            self.values(),
            self.counts,
            self.ucb_scales[:, None],
            standardise=self._standardise,
            over=self.counts > 0,
            ucb_sum=self._ucb_sum,
        )

    def votes(self) -> np.ndarray:
        """The M*D arms voted for (each bandit's D arms are distinct)."""
        scores = self.scores()
        if (
            self._pick == "top"
        ):  # sort by score, ties by an independent uniform key per bandit and arm
            order = np.lexsort((self._rng.random(scores.shape), -scores), axis=-1)
        else:  # Gumbel-top-D: D draws without replacement from softmax(score)
            order = np.argsort(-(scores + self._rng.gumbel(size=scores.shape)), axis=-1)
        return order[:, : self._top_d].ravel()

    def propose(self) -> np.ndarray:
        arm = most_voted(self.votes(), self._rng)
        return self.grid.sample_in([arm], self._rng)[0]

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
        return self.grid.sample_in([arm], self._rng)[0]

    def update(self, x, episode_return: float) -> None:
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
            _copy_into(getattr(self, key), state[key], key)
        self.episodes = int(state["episodes"])


class UniformSelector:
    """No learning: each parameter uniform over its range (`in_params`, GDI/LBC "Random
    Selection"), or x uniform over the box (DiCE's `random` ablation); module docstring."""

    def __init__(self, axes: Sequence[Axis], rng: np.random.Generator, *, in_params: bool):
        self.grid, self._rng, self._in_params = Grid(axes), rng, in_params

    def propose(self) -> np.ndarray:
        if not self._in_params:
            return self.grid.sample_uniform(self._rng)
        points = []
        for axis in self.grid.axes:
            low, high = axis.to_param(axis.lo), axis.to_param(axis.hi)
            points.append(axis.to_coordinate(low + self._rng.random() * (high - low)))
        return np.array(points)

    def update(self, x, episode_return: float) -> None:
        del x, episode_return

    def state_dict(self) -> StateDict:
        return {}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        del state


# ----------------------------------------------------------------------------- controllers


class Controller(Protocol):
    """The interface every behaviour meta-controller implements."""

    def propose(self) -> Params: ...

    def update(self, params: Mapping[str, Any], episode_return: float) -> None: ...

    def state_dict(self) -> StateDict: ...

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None: ...


class FixedController:
    """Always the same parameters, never learning: DiCE's `baseline` (§4.3: "Sample tau ~ Omega"
    replaced by tau = 1 and "Update Omega by (tau, G)" deleted) and GDI's "Fix Selection".

    Its state is the parameters themselves, so a saved file restores (and checks) them.
    """

    def __init__(self, params: Mapping[str, Any], *, seed=None):
        del seed  # nothing random; accepted so that every controller builds the same way
        self.params = {name: np.asarray(value, np.float64) for name, value in params.items()}

    def propose(self) -> Params:
        return {
            name: value.copy() if value.ndim else float(value)
            for name, value in self.params.items()
        }

    def update(self, params: Mapping[str, Any], episode_return: float) -> None:
        if not np.isfinite(episode_return):
            raise ValueError(f"episode_return must be finite, got {episode_return!r}")

    def state_dict(self) -> StateDict:
        return {f"params/{name}": value.copy() for name, value in self.params.items()}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        for key, value in state.items():
            name = key.removeprefix("params/")
            if name not in self.params or not np.array_equal(self.params[name], value):
                raise ValueError(
                    f"saved fixed behaviour {key}={np.asarray(value).tolist()} differs from this "
                    f"run's {self.params.get(name)}"
                )


def _copy_into(destination: np.ndarray, source, key: str) -> None:
    source = np.asarray(source)
    if source.shape != destination.shape:
        raise ValueError(
            f"state entry {key!r} has shape {source.shape}, this controller expects "
            f"{destination.shape}: was it saved by a controller built with other arguments?"
        )
    destination[...] = source


def _rng_words(rng: np.random.Generator) -> np.ndarray:
    """PCG64 state as 6 uint64 words (the 128-bit state and increment split in halves)."""
    state = rng.bit_generator.state
    if state["bit_generator"] != "PCG64":
        raise ValueError(f"only PCG64 generators can be saved, got {state['bit_generator']}")
    low = (1 << 64) - 1
    pcg = state["state"]
    return np.array(
        [
            pcg["state"] >> 64,
            pcg["state"] & low,
            pcg["inc"] >> 64,
            pcg["inc"] & low,
            state["has_uint32"],
            state["uinteger"],
        ],
        dtype=np.uint64,
    )


def _set_rng_words(rng: np.random.Generator, words) -> None:
    words = [int(w) for w in np.asarray(words, dtype=np.uint64)]
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (words[0] << 64) | words[1], "inc": (words[2] << 64) | words[3]},
        "has_uint32": words[4],
        "uinteger": words[5],
    }


class _AxisController:
    """Shared machinery: a tuple of axes, selectors over groups of them, params <-> coordinates."""

    def __init__(
        self, axes: Sequence[Axis], make_selector, *, factorized: bool, selection: str, seed
    ):
        _check_choice("selection", selection, SELECTIONS)
        self.axes = tuple(axes)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        groups = [[axis] for axis in self.axes] if factorized else [list(self.axes)]
        if selection != "bandits":
            make_selector = functools.partial(UniformSelector, in_params=(selection == "uniform"))
        self._selectors = [make_selector(group, self._rng) for group in groups]
        self._splits = np.cumsum([len(group) for group in groups])[:-1]

    # Subclasses map the paper's variables to one coordinate per axis and back.
    def _params(self, x: np.ndarray) -> Params:
        raise NotImplementedError

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        """The bandit coordinates x of a params dict (one per axis)."""
        raise NotImplementedError

    def propose(self) -> Params:
        """The behaviour parameters for the next episode."""
        return self._params(np.concatenate([selector.propose() for selector in self._selectors]))

    def update(self, params: Mapping[str, Any], episode_return: float) -> None:
        """Learn from one finished episode run with `params` (as returned by `propose`) and its raw
        undiscounted return G = sum of game rewards (DiCE Algorithm 1 and GDI Algorithm 2
        accumulate G <- G + r; LBC §4.2: "the undiscounted episodic returns")."""
        if not np.isfinite(episode_return):
            raise ValueError(f"episode_return must be finite, got {episode_return!r}")
        x = self.coordinates(params)
        for selector, part in zip(self._selectors, np.split(x, self._splits)):
            selector.update(part, float(episode_return))

    def state_dict(self) -> StateDict:
        state = {"rng": _rng_words(self._rng)}
        for k, selector in enumerate(self._selectors):
            state.update(
                {f"selector{k}/{key}": value for key, value in selector.state_dict().items()}
            )
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        expected = set(self.state_dict())
        if set(state) != expected:
            raise ValueError(
                f"state does not match this controller: missing "
                f"{sorted(expected - set(state))}, unexpected {sorted(set(state) - expected)}"
            )
        for k, selector in enumerate(self._selectors):
            prefix = f"selector{k}/"
            selector.load_state_dict(
                {
                    key[len(prefix) :]: value
                    for key, value in state.items()
                    if key.startswith(prefix)
                }
            )
        _set_rng_words(self._rng, state["rng"])


class DiceController(_AxisController):
    """DiCE's Bandits Vote Algorithm (DiCE §3.3, App. A, Algorithm 2) over eta = 1/tau.

    `propose()` returns {"eta": float}; the actor plays softmax(eta * A) for the whole episode.

    Defaults (DiCE Table 5): M = 7 bandits, lr ~ U{0.05, 0.1, 0.2}, width ~ U{1, 2, 3}, d = 7 candidates,
    UCB scaling c = 1.0, value normalisation (z-score) on, search range 1/tau in [0, 50].

    Readings (docs/papers/dice.md#departures-from-the-paper):
    - `space="log1p"` (default): the bandit works on x = log(1 + eta) over [0, ln 51] (Table 5's range
      through App. A's transform). `"inv_tau"`: x = eta on [0, 50]. `"exp_literal"`: x on [0, 50] with
      eta = e^x - 1. See `eta_axis`.
    - `num_blocks=50` (choice: acc is not printed; 50 blocks as GDI's acc 1.0 on [0, 50]).
    - `edge="valid"` (default) averages the existing neighbours at the borders of Eq. (9);
      `edge="zero_pad"` keeps the printed 1/(2 width + 1).
    - z-score 0 when all values are equal; ties broken at random; x = r is the last tile.
    - `selection="uniform_coordinate"`: the `random` ablation (Table 4, §4.3: the initial, never-updated BVA, which draws
      x uniformly on the box).
    """

    def __init__(
        self,
        *,
        seed=None,
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
    ):
        # eta_max: Table 5 "Bandit Search Range for 1/tau [0.0, 50.0]"; num_bandits: "Num. Bandits 7";
        # num_candidates: "Num. Bandit Candidates 7"; ucb_scale: "Bandit UCB Scaling 1.0";
        # learning_rates: "Bandit Learning Rate Uniform([0.05, 0.1, 0.2])";
        # widths: "Bandit Tiling Width Uniform([1, 2, 3])"; num_blocks: choice,
        # docs/papers/dice.md#departures-from-the-paper.
        tiling = NeighbourTiling(tuple(widths), edge)

        def make(axes, rng):
            return BanditEnsemble(
                axes,
                rng,
                tiling=tiling,
                num_bandits=num_bandits,
                num_candidates=num_candidates,
                ucb_scale=ucb_scale,
                learning_rates=learning_rates,
            )

        super().__init__(
            [eta_axis("eta", space, eta_max, num_blocks)],
            make,
            factorized=True,
            selection=selection,
            seed=seed,
        )

    def _params(self, x: np.ndarray) -> Params:
        return {"eta": float(self.axes[0].to_param(x[0]))}

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([self.axes[0].to_coordinate(float(params["eta"]))])

    def propose_best(self) -> Params:
        """Evaluation: eta uniform inside the played tile with the best ensemble-mean value V (no
        UCB term; `BanditEnsemble.propose_best`).

        DiCE §3.3/§4.1: "each bandit provides one evaluation for each tau and the final evaluation is the
        average of all bandits ... We use tau sampled from the best region"; best = argmax (our
        reading, docs/papers/dice.md#departures-from-the-paper).
        """
        (ensemble,) = self._selectors
        if not isinstance(ensemble, BanditEnsemble):
            raise ValueError("propose_best needs selection='bandits'")
        return self._params(ensemble.propose_best())

    def summary(self) -> dict[str, float]:
        """What the bandits have learned, for TensorBoard: the best played tile's centre eta and
        ensemble-mean value, the mean value over tiles and the games learned from."""
        (selector,) = self._selectors
        if not isinstance(selector, BanditEnsemble):
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


class GdiController(_AxisController):
    """GDI's Bandits Controller (GDI §4.1, App. G, Algorithm 4) over lambda = (1/tau_1, 1/tau_2, eps).

    `propose()` returns {"eta1": float, "eta2": float, "epsilon": float}; the actor plays
    eps * softmax(eta1 * A_1) + (1 - eps) * softmax(eta2 * A_2) (Eq. (2)); GDI-I3 uses A_1 = A_2 = A,
    GDI-H3 two advantage heads; the controller is the same.

    Defaults (GDI Table 6): M = 7 bandits, lr ~ U{0.05, 0.1, 0.2}, d = 3 candidates, c = 1.0, 1/tau_1 and
    1/tau_2 in [0, 50] at accuracy 1.0 (50 blocks), eps in [0, 1] at accuracy 0.1 (10 blocks); tile
    codings per `OffsetTiling` (K ~ U{2,3,4} tilings of U{2,3,4} blocks, offsets U[0, 60] %).

    Readings (docs/papers/gdi.md#departures-from-the-paper):
    - `space="log1p"` (default): x = log(1 + eta) over [0, ln 51] in 50 equal blocks; `"inv_tau"` and
      `"exp_literal"` as in `eta_axis`. eps is its own coordinate (App. G: x_3 = eps).
    - `factorized=True` (default): three independent 1-D ensembles (Algorithm 4 run per
      coordinate), each updated with (x_d, G). `factorized=False` is App. G literally: every bandit works
      on the 50 x 50 x 10 = 25,000-block product grid, with the z-score and UCB over all blocks.
    - UCB counts per block; z-score 0 when all values are equal; ties at random; x = r is the last block.
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
        seed=None,
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
    ):
        # Table 6: "Bandit Search Range for 1/tau_1, 1/tau_2 [0.0, 50.0]", "for eps [0.0, 1.0]";
        # "Accuracy of Search Range for [1/tau_1, 1/tau_2, eps] [1.0, 1.0, 0.1]"; "Num. Bandits 7";
        # "Num. Bandit Candidates 3"; "Bandit UCB Scaling 1.0"; "Bandit Learning Rate Uniform([0.05,
        # 0.1, 0.2])"; "Bandit Tiling Width Uniform([2, 3, 4])"; "Accuracy of Tile coding Uniform([2, 3,
        # 4])"; "Offset of Tile coding Uniform([0, 60])".
        eta_blocks = max(1, math.ceil(eta_max / eta_acc - INDEX_TOLERANCE))
        axes = [
            eta_axis("eta1", space, eta_max, eta_blocks),
            eta_axis("eta2", space, eta_max, eta_blocks),
            Axis("epsilon", 0.0, 1.0, epsilon_acc),
        ]
        self.held = {name: float(value) for name, value in (held or {}).items()}
        unknown = set(self.held) - {axis.name for axis in axes}
        if unknown or len(self.held) == len(axes):
            raise ValueError(
                f"held must name some of eta1, eta2, epsilon and leave one to learn, got "
                f"{sorted(self.held)}"
            )
        axes = [axis for axis in axes if axis.name not in self.held]
        tiling = OffsetTiling(tuple(num_tilings), tuple(tile_sizes), tuple(tile_offset_percent))

        def make(group, rng):
            return BanditEnsemble(
                group,
                rng,
                tiling=tiling,
                num_bandits=num_bandits,
                num_candidates=num_candidates,
                ucb_scale=ucb_scale,
                learning_rates=learning_rates,
            )

        super().__init__(axes, make, factorized=factorized, selection=selection, seed=seed)

    def _params(self, x: np.ndarray) -> Params:
        learned = {axis.name: float(axis.to_param(xi)) for axis, xi in zip(self.axes, x)}
        return {**learned, **self.held}

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([axis.to_coordinate(float(params[axis.name])) for axis in self.axes])

    def propose_best(self) -> Params:
        """Evaluation option (DiCE's rule; GDI prints none): each coordinate uniform inside its
        ensemble's played block of best mean value (factorised: each coordinate's block has
        been played, by the games that ensemble learned from), or the best played 3-D block
        (joint); `BanditEnsemble.propose_best`."""
        if not all(isinstance(selector, BanditEnsemble) for selector in self._selectors):
            raise ValueError("propose_best needs selection='bandits'")
        return self._params(
            np.concatenate([selector.propose_best() for selector in self._selectors])
        )

    def summary(self) -> dict[str, float]:
        """What the bandits have learned, for TensorBoard: per ensemble (one per learned
        parameter when factorised, one for all when joint), the centre of its best played block in each
        parameter, that block's ensemble-mean value and the mean value over blocks; the games
        learned from."""
        report = {}
        for selector in self._selectors:
            if not isinstance(selector, BanditEnsemble):
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


def normalised_weights(raw) -> np.ndarray:
    """omega / sum(omega), and uniform weights when the draws sum to less than 1e-8 (our reading
    of LBC Table 3's omega_i in [0, 1], docs/papers/lbc.md#departures-from-the-paper)."""
    raw = np.asarray(raw, dtype=np.float64)
    total = raw.sum()
    return raw / total if total >= 1e-8 else np.full(raw.shape, 1.0 / raw.size)


class LbcController(_AxisController):
    """LBC's meta-controller (LBC §4.2, App. E, Algorithm 1) over psi = (tau_1..tau_N, omega_1..omega_N).

    `propose()` returns {"eta": [N], "omega": [N], "omega_unnormalised": [N]}: the actor plays
    sum_i omega_i softmax(eta_i * A_i) (Eq. (10); LBC's tau_i multiplies the logits, so it is `eta`).
    `omega` sums to 1; `omega_unnormalised` is the draw the bandits credit and must be passed back to
    `update()` with the rest of `params`. With `num_policies=1` there is no omega bandit and omega = [1].

    Defaults (LBC Table 3): N = 3 policies, population of 7 bandits, c ~ U[0.5, 1.5], top-D with D = 4,
    replacement interval 50, range of tau_i [0, exp 4] at accuracy 0.2, omega_i in [0, 1] at accuracy 0.1.

    Readings (docs/papers/lbc.md#departures-from-the-paper):
    - `eta_space="log1p"` (default): the bandit works on x = log(1 + tau_i) over [0, 4] in
      20 blocks of 0.2 (tau_i up to e^4 - 1 = 53.6, the GDI/DiCE coordinate). `"linear"` is the literal
      reading: tau_i on [0, e^4] at accuracy 0.2 (273 arms).
    - `factorized=True` (default): one population per coordinate (N eta populations and N
      omega populations, each M = 7, D = 4, replacement 50), all updated with the same G.
      `factorized=False`: one population on the joint grid of all 2N coordinates (8,000,000 arms for the
      defaults; only practical for small grids).
    - omega: each omega_i is drawn by its own bandits, then normalised; all-zero draws
      give uniform omega. The bandits are credited with the unnormalised draws.
    - Scores: `standardise=True` is Eq. (25) (z-score over visited arms, unvisited z = 0); False is Eq.
      (24). `ucb_sum="all"` is Eqs. (24)-(25); `"others"` is Sec. 4.2's sum over j != k.
    - `pick="top"` is Algorithm 1's top-D vote; `"softmax"` draws each bandit's D arms from
      softmax(score) as Sec. 4.2 samples arms (see `BanditPopulation`).
    - `ucb_range=(0, 0)` is App. K.3's "w/o UCB item" ablation; `selection="uniform"` is "Random
      Selection" (psi uniform over Psi: each tau_i uniform on [0, e^4 - 1], the range the log1p
      bandits cover, or [0, e^4] on the linear axis, each omega_i on [0, 1], then normalised);
      `"uniform_coordinate"` draws x = log(1 + tau_i) uniformly instead.
    """

    def __init__(
        self,
        *,
        seed=None,
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
    ):
        # Table 3: "Range of tau_i [0, exp 4]", "Discrete Accuracy of tau_i 0.2", "Range of omega_i
        # [0, 1]", "Discrete Accuracy of omega_i 0.1", "Population Num. 7", "UCB c Uniformly sampled from
        # [0.5, 1.5]", "D of Top-D 4", "Replacement Interval T_replace 50"; N = 3 policies (Sec. 5.1.2).
        _check_positive_int("num_policies", num_policies)
        _check_choice("eta_space", eta_space, ("log1p", "linear"))
        self.num_policies = num_policies
        hi = math.log(eta_max) if eta_space == "log1p" else eta_max
        axes = [
            Axis(f"eta{i + 1}", 0.0, hi, eta_acc, log1p=(eta_space == "log1p"))
            for i in range(num_policies)
        ]
        if num_policies > 1:
            axes += [Axis(f"omega{i + 1}", 0.0, 1.0, omega_acc) for i in range(num_policies)]

        def make(group, rng):
            return BanditPopulation(
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

    def _params(self, x: np.ndarray) -> Params:
        n = self.num_policies
        eta = np.array([axis.to_param(xi) for axis, xi in zip(self.axes[:n], x[:n])])
        raw = x[n:] if n > 1 else np.ones(1)
        return {"eta": eta, "omega": normalised_weights(raw), "omega_unnormalised": raw.copy()}

    def propose_best(self) -> Params:
        """Evaluation option (`--eval_policy=best_arm`): each population's greedy arm
        (`BanditPopulation.propose_best`)."""
        if not all(isinstance(selector, BanditPopulation) for selector in self._selectors):
            raise ValueError("propose_best needs selection='bandits'")
        return self._params(
            np.concatenate([selector.propose_best() for selector in self._selectors])
        )

    def summary(self) -> dict[str, float]:
        """What the factorised populations have learned, for TensorBoard: per coordinate
        (`eta<i>`, `omega<i>`), the centre of the arm the population has pulled most, that arm's
        mean return and the mean return over visited arms (counts and returns pooled over the
        population's bandits), and the games learned from. Empty for a joint grid or Random
        Selection."""
        if len(self._selectors) != len(self.axes) or not all(
            isinstance(selector, BanditPopulation) for selector in self._selectors
        ):
            return {}
        summary = {"games": float(self._selectors[0].episodes)}
        for axis, population in zip(self.axes, self._selectors):
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
