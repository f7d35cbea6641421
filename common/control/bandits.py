"""The bandit parts DiCE, GDI and LBC's behaviour meta-controllers (`common.control.controllers`)
are built from (numpy, no TensorFlow).

This module holds the parts: coordinates (`Axis`, `eta_axis`, `Grid`), scores and selection
(`ucb_scores`, `top_k`, `gumbel_top_k`, `most_voted`), tile codings (`NeighbourTiling` of DiCE Eq.
(9), `OffsetTiling` of GDI Eq. (13)), the tile-coded bandit ensembles of DiCE Algorithm 2 / GDI
Algorithm 4 (`TileCodedBandit`, `BanditEnsemble`), the bandit populations of LBC Algorithm 1
(`common.control.bandit_populations`), and the controllers built from them
(`common.control.controllers`: `UniformSelector`, `FixedController` for parameters that never
change, and `AxisController`, the base of the learning controllers). Each paper's controller lives
in its own package (`<paper>/controller.py`): a subclass of `AxisController` that names the paper's
parameters, builds its selectors from these parts and maps params <-> coordinates.

Conventions:
- Inverse temperatures `eta = 1/tau` (docs/architecture.md#conventions); `eta = 0` is the uniform
  policy.
- The bandits work on a coordinate x per behaviour parameter (an `Axis`): x = log(1 + eta) for the
  temperatures in the default readings, x = eps or x = omega for weights. An axis is a box [lo, hi]
  cut into blocks ("tiles" in DiCE, "blocks" in GDI, "arms"/"regions" in LBC) of width `acc`; block
  i is [lo + i*acc, lo + (i+1)*acc), the last block is closed and ends at hi.
- `update()` recomputes x from `params` (the papers' "receive (tau, g), transform tau to x"), so a
  controller needs no memory of what it proposed. Points are drawn at least 1e-8 of a block width
  below a block's upper edge so that the eta = expm1(x) -> log1p(eta) round trip credits the
  proposed block.
- Factorised (one bandit set per coordinate) vs joint (one bandit set on the product grid):
  `AxisController`'s `factorized`; each paper's controller says which is its default, and
  `factorized=False` is the papers' literal reading.
- `selection="uniform"` bypasses learning: each behaviour parameter is uniform over its own range
  (eta = 1/tau on [0, eta_max], eps and omega on [0, 1]: GDI's Table 20 "Uniform" over Table 6's
  search ranges, LBC's Random Selection over the main algorithm's behaviour space), and `update()`
  only checks its input. `selection="uniform_coordinate"` draws the bandit coordinate x uniformly
  over the box instead (DiCE's `random` ablation: the initial, never-updated bandits); on a log1p
  axis eta = e^x - 1 is then far from uniform (median about 6 of [0, 50]).
- Determinism and checkpoints: `seed` fixes every random draw. `state_dict()` returns a flat
  `dict[str, np.ndarray]` (bandit hyper-parameters, weights, counts and the PCG64 state as uint64
  words) that `np.savez` can store; `load_state_dict()` restores it into a controller built with the
  same arguments, after which the two produce identical proposals.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

Params = dict[str, Any]
StateDict = dict[str, np.ndarray]
Tiles = tuple[np.ndarray, np.ndarray, np.ndarray, int]  # a tiling's `tiles(shape, spec)`

# choice: floor((x - l)/acc) is computed with this slack, so that 0.3/0.1 = 2.9999999999999996
# lands in block 3, not 2 (GDI Test 7 in docs/papers/gdi.md#worked-test-numbers).
INDEX_TOLERANCE = 1e-9
# choice: a proposed point keeps this fraction of a block width below the block's upper edge, so
# that block_of (which adds INDEX_TOLERANCE) after update()'s eta = expm1(x) -> log1p(eta) round
# trip (a few ulp) credits the block propose() drew from.
EDGE_MARGIN = 1e-8
# The z-score is 0 when the std (ddof 0) is below this, e.g. at init, where DiCE Eq. (11) and
# GDI Eq. (15) would divide by 0 (docs/papers/dice.md#departures-from-the-paper).
STD_FLOOR = 1e-8

SPACES = ("log1p", "inv_tau", "exp_literal")
SELECTIONS = ("bandits", "uniform", "uniform_coordinate")


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> None:
    """Raises a one-line ValueError unless `value` is one of `allowed` (argument checks)."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {name}={value!r}")


def check_positive_int(name: str, value: Any) -> None:
    """Raises a one-line ValueError unless `value` is an integer >= 1 (argument checks)."""
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")


# ----------------------------------------------------------------------------- coordinates


@dataclasses.dataclass(frozen=True)
class Axis:
    """One behaviour parameter as a bandit sees it.

    The parameter p maps to the bandit coordinate x = log1p(p) when `log1p` is true (DiCE App. A and
    GDI App. G: x = log(1 + 1/tau)), else x = p. The box [lo, hi] in x is cut into `num_blocks`
    blocks of width `acc`; x is clipped into the box (DiCE App. A "each x is clipped"; GDI App. G).
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

    def block_of(self, x: npt.ArrayLike) -> np.ndarray:
        """Block index floor((min(max(x, l), r) - l)/acc) (DiCE Eq. (10), GDI App. G), clamped to
        num_blocks - 1 so that x = r, which the printed index puts one past the last block, is
        the last block (docs/papers/dice.md#departures-from-the-paper)."""
        clipped = np.clip(np.asarray(x, dtype=np.float64), self.lo, self.hi)
        index = np.floor((clipped - self.lo) / self.acc + INDEX_TOLERANCE).astype(np.int64)
        return np.minimum(index, self.num_blocks - 1)

    def block_index(self, x: float) -> int:
        """`block_of` of one float, in Python floats: the same IEEE operations without numpy's
        cost per call (an update finds one block per axis)."""
        index = math.floor((min(max(x, self.lo), self.hi) - self.lo) / self.acc + INDEX_TOLERANCE)
        return min(index, self.num_blocks - 1)

    def block_bounds(self, blocks: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """[lower, upper] edges of blocks in x (the last block ends at hi)."""
        lower = self.lo + np.asarray(blocks) * self.acc
        return lower, np.minimum(lower + self.acc, self.hi)

    def to_param(self, x: npt.ArrayLike) -> np.ndarray:
        """Behaviour parameter of a bandit coordinate: eta = exp(x) - 1 = 1/tau (DiCE App. A)."""
        return np.expm1(x) if self.log1p else np.asarray(x, dtype=np.float64)

    def to_coordinate(self, value: npt.ArrayLike) -> np.ndarray:
        """Bandit coordinate of a behaviour parameter: x = log(1 + 1/tau) (DiCE App. A, GDI App. G)."""
        value = np.asarray(value, dtype=np.float64)
        if np.isnan(value).any():
            raise ValueError(f"behaviour parameter {self.name!r} is NaN: {value!r}")
        if self.log1p and (value < 0).any():
            raise ValueError(
                f"{self.name!r} is an inverse temperature and must be >= 0, got {value!r}"
            )
        return np.log1p(value) if self.log1p else value


def eta_axis(name: str, space: str, eta_max: float, num_blocks: int) -> Axis:
    """An inverse-temperature axis under one of the three readings of DiCE Table 5 / GDI Table 6
    ("search range for 1/tau [0, 50]") together with DiCE App. A / GDI App. G (tau = 1/(exp(x) -
    1)).

    - "log1p" (default; the `bandit_space` rows of docs/papers/dice.md#departures-from-the-paper
      and docs/papers/gdi.md#departures-from-the-paper): x = log(1 + eta) on
      [0, log(1 + eta_max)] in `num_blocks` equal blocks; the printed range bounds eta, the
      printed transform gives x.
    - "inv_tau": x = eta on [0, eta_max] (the table read alone; GDI's acc 1.0 gives 50 blocks).
    - "exp_literal": x on [0, eta_max] with eta = exp(x) - 1 (range and transform both taken
      literally; eta then reaches e^50 and most blocks are effectively greedy; GDI Test 7 in
      docs/papers/gdi.md#worked-test-numbers lists the block edges).
    """
    check_choice("space", space, SPACES)
    check_positive_int("num_blocks", num_blocks)
    hi = math.log1p(eta_max) if space == "log1p" else float(eta_max)
    return Axis(name, 0.0, hi, hi / num_blocks, log1p=(space != "inv_tau"))


class Grid:
    """The product of a few axes, with blocks numbered by a flat (C-order) index."""

    def __init__(self, axes: Sequence[Axis]) -> None:
        self.axes = tuple(axes)
        self.shape = tuple(axis.num_blocks for axis in self.axes)
        self.size = int(np.prod(self.shape))

    def block_of(self, x: npt.ArrayLike) -> int:
        """Flat (C-order) block index of one point x (shape [len(axes)])."""
        block = 0
        for axis, xi in zip(self.axes, np.atleast_1d(x).tolist()):
            block = block * axis.num_blocks + axis.block_index(xi)
        return block

    def sample_in(self, blocks: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """One point drawn uniformly inside each flat block ("sample d candidates from these blocks,
        one uniformly from a block", DiCE App. A / GDI App. G; "uniformly sample psi from the
        region",
        LBC Algorithm 1). Shape [len(blocks), len(axes)]."""
        multi = np.unravel_index(np.asarray(blocks), self.shape)
        points = []
        for axis, index in zip(self.axes, multi):
            lower, upper = axis.block_bounds(index)
            fraction = rng.random(index.shape) * (1.0 - EDGE_MARGIN)
            points.append(lower + fraction * (upper - lower))
        return np.stack(points, axis=-1)

    def point_in(self, block: int, rng: np.random.Generator) -> np.ndarray:
        """`sample_in([block], rng)[0]` in Python floats: the same draws and arithmetic, without
        numpy's cost per call on one-element arrays."""
        point = []
        for axis, index in zip(self.axes, np.unravel_index(block, self.shape)):
            lower = axis.lo + int(index) * axis.acc
            upper = min(lower + axis.acc, axis.hi)
            point.append(lower + rng.random() * (1.0 - EDGE_MARGIN) * (upper - lower))
        return np.array(point)

    def sample_uniform(self, rng: np.random.Generator) -> np.ndarray:
        """One point uniform over the whole box in the bandit coordinates (DiCE's `random`
        ablation, `selection="uniform_coordinate"`)."""
        return np.array([axis.lo + rng.random() * (axis.hi - axis.lo) for axis in self.axes])


# ----------------------------------------------------------------------------- scores and selection


def ucb_scores(
    values: npt.ArrayLike,
    counts: npt.ArrayLike,
    ucb_scale: float | np.ndarray,
    *,
    standardise: bool = True,
    over: npt.ArrayLike | None = None,
    ucb_sum: str = "all",
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
    check_choice("ucb_sum", ucb_sum, ("all", "others"))
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    exploit = _zscores(values, over) if standardise else values
    total = np.add.reduce(counts, -1, keepdims=True) - (counts if ucb_sum == "others" else 0.0)
    return exploit + ucb_scale * np.sqrt(np.log1p(total) / (1.0 + counts))


def _zscores(values: np.ndarray, over) -> np.ndarray:
    """(V - mean V)/std V along the last axis over the entries in `over` (all when None); 0 elsewhere and
    where the std is below 1e-8. np.mean's and np.std's own steps, spelled out: the same bits
    without their cost per call on these small arrays."""
    if over is None:
        deviation = values - np.add.reduce(values, -1, keepdims=True) / values.shape[-1]
        std = np.sqrt(np.add.reduce(deviation * deviation, -1, keepdims=True) / values.shape[-1])
        return np.where(std >= STD_FLOOR, deviation / np.maximum(std, STD_FLOOR), 0.0)
    over = np.asarray(over, bool)
    n = np.maximum(np.add.reduce(over, -1, keepdims=True), 1)
    deviation = values - np.add.reduce(np.where(over, values, 0.0), -1, keepdims=True) / n
    squares = np.where(over, deviation * deviation, 0.0)
    std = np.sqrt(np.add.reduce(squares, -1, keepdims=True) / n)
    return np.where(over & (std >= STD_FLOOR), deviation / np.maximum(std, STD_FLOOR), 0.0)


def top_k(scores: npt.ArrayLike, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the k largest scores (as a set), ties broken uniformly at random (at init all
    scores tie and a stable sort would always pick blocks 0..k-1;
    docs/papers/dice.md#departures-from-the-paper)."""
    scores = np.asarray(scores)
    if not 1 <= k <= scores.size:
        raise ValueError(f"k must lie in [1, {scores.size}], got k={k}")
    kth_largest = np.partition(scores, scores.size - k)[scores.size - k]
    above = (scores > kth_largest).nonzero()[0]
    tied = (scores == kth_largest).nonzero()[0]
    if tied.size == 1:  # the usual case once values differ: rng.choice would draw nothing
        return np.concatenate([above, tied])
    return np.concatenate([above, rng.choice(tied, size=k - above.size, replace=False)])


def gumbel_top_k(logits: npt.ArrayLike, k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct indices drawn without replacement with probabilities softmax(logits), in draw order
    (DiCE/GDI `random` mode: "sample d blocks with scores as the logits without replacement")."""
    logits = np.asarray(logits, dtype=np.float64)
    if not 1 <= k <= logits.size:
        raise ValueError(f"k must lie in [1, {logits.size}], got k={k}")
    perturbed = logits + rng.gumbel(size=logits.shape)
    chosen = np.argpartition(-perturbed, k - 1)[:k]
    return chosen[np.argsort(-perturbed[chosen])]


def most_voted(votes: npt.ArrayLike, rng: np.random.Generator) -> int:
    """The arm with the most votes, ties drawn uniformly (LBC App. E.4.2 and its Remark)."""
    counts = np.bincount(votes)  # a counter per arm up to the largest vote: cheaper than sorting
    arms = (counts == counts.max()).nonzero()[0]
    # rng.choice(arms) is this draw (the same numbers and generator state), without its overhead.
    return int(arms[rng.integers(0, arms.size, dtype=np.int64)])


# ----------------------------------------------------------------------------- tile codings


@dataclasses.dataclass(frozen=True)
class NeighbourTiling:
    """DiCE's tile coding (App. A, Eq. (9)): one weight per block, V_i = mean of w_{i-width..i+width}.

    width ~ Uniform(`widths`) per bandit (Table 5 "Bandit Tiling Width Uniform([1, 2, 3])"). Eq. (9)
    does not say what k out of range means: `edge="valid"` (default, the `bandit_edge` row of
    docs/papers/dice.md#departures-from-the-paper) averages the weights that exist, so the update
    moves V_i by exactly lr*(g - V_i) everywhere; `edge="zero_pad"` keeps the printed 1/(2*width +
    1), i.e. missing weights count as 0.
    """

    widths: tuple[int, ...] = (1, 2, 3)  # DiCE Table 5
    edge: str = "valid"  # choice: docs/papers/dice.md#departures-from-the-paper

    def __post_init__(self):
        check_choice("edge", self.edge, ("valid", "zero_pad"))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        return np.array([rng.choice(self.widths)], dtype=np.float64)

    def tiles(self, shape: tuple[int, ...], spec: np.ndarray) -> Tiles:
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

    Each bandit has K ~ Uniform(`num_tilings`) tilings (Table 6 "Bandit Tiling Width Uniform([2, 3,
    4])"); tiling k has tiles of ta_k ~ Uniform(`tile_sizes`) blocks per dimension (Table 6
    "Accuracy of Tile coding Uniform([2, 3, 4])") shifted by to_k = o_k * ta_k blocks with o_k ~
    U[0, 60] % (Table 6 "Offset of Tile coding Uniform([0, 60])", read as a percentage of the tile).
    A block's tiles are the K tiles holding its centre, x -> floor((min(max(x - to_k, l), r) -
    l)/ta_k) (App. G), so len(M_btt(block)) = K and V_block is the mean of those K weights (Eq.
    (13)).
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

    def tiles(self, shape: tuple[int, ...], spec: np.ndarray) -> Tiles:
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
        denominators = np.full(len(tiles), float(tiles.shape[1]))
        return tiles, np.ones(tiles.shape, bool), denominators, num_weights


Tiling = NeighbourTiling | OffsetTiling


# ----------------------------------------------------------------------------- DiCE / GDI bandits


class TileCodedBandit:
    """One bandit of DiCE's BVA (App. A) / GDI's Bandits Controller (App. G) on a grid of blocks.

    - value (DiCE Eq. (9), GDI Eq. (13)): V_b = mean of the weights of block b's tiles;
    - update with (x, g) (DiCE Eq. (10), GDI Eq. (14)): b = block(x), w_j += lr*(g - V_b) for the
      tiles j of b (V_b computed once, before the loop), N_b += 1. GDI's Eq. (14) finds x's tile in
      each tiling directly; snapping x to its block first makes the update move exactly the tiles
      V_b reads (docs/papers/gdi.md#departures-from-the-paper), and N counts blocks, the N_i of Eq.
      (15);
    - score: `ucb_scores` over all blocks (DiCE Eq. (11), GDI Eq. (15));
    - candidates: mode `argmax` takes the top-d blocks (ties at random), mode `random` draws d
      distinct blocks with softmax(score) probabilities (the papers' "scores as logits without
      replacement").

    A `BanditEnsemble` computes the same for all its bandits at once (`_StackedBandits`).
    """

    def __init__(
        self,
        num_blocks: int,
        tiles: np.ndarray,
        mask: np.ndarray,
        denominators: np.ndarray,
        num_weights: int,
        *,
        greedy: bool,
        lr: float,
        num_candidates: int,
        ucb_scale: float,
    ) -> None:
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


# numpy sums up to 7 numbers left to right from +0.0, so added zeros, anywhere, change no bit
# (longer sums go pairwise, in an order set by their length).
_IN_ORDER_SUM = 7


class _StackedBandits:
    """An ensemble's bandits as [M, ...] arrays, so that V and the update run once for all M bandits
    (numpy's cost per call dominates on these small arrays); each bandit's `weights` and `counts`
    become views of rows here. Bit for bit `TileCodedBandit`'s numbers: a block's tiles are summed
    in the same order, and masked or padding slots read a zero column after the weights. With more
    than `_IN_ORDER_SUM` tiles per block, each bandit computes alone."""

    def __init__(self, bandits: Sequence[TileCodedBandit]) -> None:
        self._bandits, sizes = bandits, [bandit.weights.size for bandit in bandits]
        self.weights = np.zeros((len(bandits), max(sizes) + 1))  # the last column stays 0
        self.counts = np.array([bandit.counts for bandit in bandits])
        self._flat, zero = self.weights.reshape(-1), max(sizes)  # a view, which `_tiles` indexes
        width = max(bandit.tiles.shape[1] for bandit in bandits)
        self._tiles = np.full((len(bandits), self.counts.shape[1], width), zero)
        for m, (bandit, size) in enumerate(zip(bandits, sizes)):
            self.weights[m, :size] = bandit.weights
            bandit.weights, bandit.counts = self.weights[m, :size], self.counts[m]
            self._tiles[m, :, : bandit.tiles.shape[1]] = np.where(bandit.mask, bandit.tiles, zero)
        self._tiles += self.weights.shape[1] * np.arange(len(bandits))[:, None, None]
        self._denominators = np.array([bandit.denominators for bandit in bandits])
        self._lr = np.array([bandit.lr for bandit in bandits])
        self._alone = width > _IN_ORDER_SUM

    def values(self) -> np.ndarray:
        """Every bandit's V (`TileCodedBandit.values`), [M, blocks]."""
        if self._alone:
            return np.array([bandit.values() for bandit in self._bandits])
        return self._flat[self._tiles].sum(-1) / self._denominators

    def update(self, block: int, target: float) -> None:
        """`TileCodedBandit.update` of every bandit."""
        if self._alone:
            for bandit in self._bandits:
                bandit.update(block, target)
            return
        tiles = self._tiles[:, block]
        value = self._flat[tiles].sum(-1) / self._denominators[:, block]
        self._flat[tiles] += (self._lr * (target - value))[:, None]
        self.weights[:, -1] = 0.0  # masked and padding slots took their share there
        self.counts[:, block] += 1.0


class BanditEnsemble:
    """DiCE Algorithm 2 / GDI Algorithm 4: M tile-coded bandits on one grid.

    Each bandit draws mode ~ U{argmax, random} (uniform: our reading of DiCE Algorithm 2's "Sample
    mode"), lr ~ Uniform(learning_rates) and its tile coding at construction; every episode each
    bandit offers d candidates and x is drawn uniformly from the M*d candidates; every bandit is
    updated with every (x, g).
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
    ) -> None:
        check_positive_int("num_bandits", num_bandits)
        check_positive_int("num_candidates", num_candidates)
        self.grid, self.tiling, self._rng = Grid(axes), tiling, rng
        self._num_candidates, self._ucb_scale = num_candidates, ucb_scale
        self._specs = [
            (bool(rng.integers(2)), float(rng.choice(learning_rates)), tiling.draw(rng))
            for _ in range(num_bandits)
        ]
        self.bandits = [self._build(*spec) for spec in self._specs]
        self._stack = _StackedBandits(self.bandits)

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
        scores = ucb_scores(self._stack.values(), self._stack.counts, self._ucb_scale)
        blocks = [  # `TileCodedBandit.candidate_blocks`, bandit after bandit
            (top_k if bandit.greedy else gumbel_top_k)(row, self._num_candidates, self._rng)
            for bandit, row in zip(self.bandits, scores)
        ]
        return self.grid.sample_in(np.concatenate(blocks), self._rng)

    def propose(self) -> np.ndarray:
        candidates = self.candidates()
        return candidates[self._rng.integers(len(candidates))]

    def update(self, x: npt.ArrayLike, target: float) -> None:
        self._stack.update(self.grid.block_of(x), target)

    def mean_values(self) -> np.ndarray:
        """The ensemble's evaluation of each block: the mean of the bandits' V (DiCE §3.3)."""
        return np.mean(self._stack.values(), axis=0)

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
        (block,) = top_k(values, 1, self._rng)
        return self.grid.point_in(block, self._rng)

    def best_block(self) -> int:
        """The block `propose_best` favours, first on ties (any block before the first game),
        for the summaries: it consumes no random draws."""
        values = self.measured_values()
        return int(np.argmax(values if np.isfinite(values).any() else self.mean_values()))

    def state_dict(self) -> StateDict:
        state = {}
        for m, (bandit, (greedy, lr, spec)) in enumerate(zip(self.bandits, self._specs)):
            state[f"bandit{m}/greedy"], state[f"bandit{m}/lr"] = np.array(greedy), np.array(lr)
            state[f"bandit{m}/tiling"] = spec.copy()
            state[f"bandit{m}/weights"] = bandit.weights.copy()
            state[f"bandit{m}/counts"] = bandit.counts.copy()
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        specs = []
        for m in range(len(self.bandits)):
            greedy, lr = bool(state[f"bandit{m}/greedy"]), float(state[f"bandit{m}/lr"])
            specs.append((greedy, lr, np.array(state[f"bandit{m}/tiling"], dtype=np.float64)))
        bandits = [self._build(*spec) for spec in specs]
        stack = _StackedBandits(bandits)
        for m, bandit in enumerate(bandits):
            copy_into(bandit.weights, state[f"bandit{m}/weights"], f"bandit{m}/weights")
            copy_into(bandit.counts, state[f"bandit{m}/counts"], f"bandit{m}/counts")
        self._specs, self.bandits, self._stack = specs, bandits, stack


def copy_into(destination: np.ndarray, source: npt.ArrayLike, key: str) -> None:
    """Restores one `state_dict` entry into `destination`, in place; ValueError naming `key` if
    the shapes differ."""
    source = np.asarray(source)
    if source.shape != destination.shape:
        raise ValueError(
            f"state entry {key!r} has shape {source.shape}, this controller expects "
            f"{destination.shape}: was it saved by a controller built with other arguments?"
        )
    destination[...] = source
