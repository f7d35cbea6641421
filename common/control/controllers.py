"""Behaviour meta-controllers (module docstring of `common.control.bandits` for the conventions).

Each actor owns one controller (DiCE Algorithm 1 and GDI Algorithms 2-3 build the bandits inside
the actor; LBC's Algorithm 1 is "Actor-Wise"). One interface, `Controller`:

    params = controller.propose()              # at episode start: the paper's own variables
    ...run one episode with these params...
    controller.update(params, episode_return)  # at episode end: the raw undiscounted return G = sum r

`FixedController` never learns; `AxisController` is the base of the papers' learning controllers,
which select through the bandits of `common.control.bandits` and `common.control.bandit_populations` or,
for the uniform ablations, `UniformSelector`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from common.control.bandits import (
    SELECTIONS,
    Axis,
    BanditEnsemble,
    Grid,
    Params,
    StateDict,
    check_choice,
)
from common.control.bandit_populations import BanditPopulation


class UniformSelector:
    """No learning: each parameter uniform over its range (`in_params`, GDI/LBC "Random
    Selection"), or x uniform over the box (DiCE's `random` ablation); module docstring."""

    def __init__(self, axes: Sequence[Axis], rng: np.random.Generator, *, in_params: bool) -> None:
        self.grid, self._rng, self._in_params = Grid(axes), rng, in_params

    def propose(self) -> np.ndarray:
        if not self._in_params:
            return self.grid.sample_uniform(self._rng)
        points = []
        for axis in self.grid.axes:
            low, high = axis.to_param(axis.lo), axis.to_param(axis.hi)
            points.append(axis.to_coordinate(low + self._rng.random() * (high - low)))
        return np.array(points)

    def update(self, x: npt.ArrayLike, episode_return: float) -> None:
        del x, episode_return

    def state_dict(self) -> StateDict:
        return {}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        del state


# What `AxisController` selects with: the bandits, or the uniform ablations' `UniformSelector`.
Selector = BanditEnsemble | BanditPopulation | UniformSelector


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

    def __init__(self, params: Mapping[str, Any], *, seed: int | None = None) -> None:
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


def _rng_words(rng: np.random.Generator) -> np.ndarray:
    """PCG64 state as 6 uint64 words (the 128-bit state and increment split in halves)."""
    state = rng.bit_generator.state
    if state["bit_generator"] != "PCG64":
        raise ValueError(f"only PCG64 generators can be saved, got {state['bit_generator']}")
    low, pcg = (1 << 64) - 1, state["state"]
    words = [pcg["state"] >> 64, pcg["state"] & low, pcg["inc"] >> 64, pcg["inc"] & low]
    return np.array(words + [state["has_uint32"], state["uinteger"]], dtype=np.uint64)


def _set_rng_words(rng: np.random.Generator, words: npt.ArrayLike) -> None:
    words = [int(w) for w in np.asarray(words, dtype=np.uint64)]
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (words[0] << 64) | words[1], "inc": (words[2] << 64) | words[3]},
        "has_uint32": words[4],
        "uinteger": words[5],
    }


class AxisController:
    """The base of the learning controllers: a tuple of axes, selectors over groups of them,
    params <-> coordinates.

    A subclass passes its axes and `make_selector(axes, rng)` (e.g. a `BanditEnsemble` or a
    `BanditPopulation` on those axes) and implements `_params(x)` (one coordinate per axis -> the
    paper's params) and `coordinates(params)` (the inverse). `factorized=True` builds one selector
    per axis, False one on the joint grid; `selection` other than "bandits" replaces the selectors
    by `UniformSelector`s (module docstring). One PCG64 generator, seeded by `seed`, feeds every
    selector. `state_dict()` holds "rng" (`_rng_words`) and each selector's entries under
    "selector<k>/"; the keys name no class, so a saved file restores into any controller built
    with the same arguments.
    """

    def __init__(
        self,
        axes: Sequence[Axis],
        make_selector: Callable[[list[Axis], np.random.Generator], Selector],
        *,
        factorized: bool,
        selection: str,
        seed: int | None,
    ) -> None:
        check_choice("selection", selection, SELECTIONS)
        self.axes = tuple(axes)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        groups = [[axis] for axis in self.axes] if factorized else [list(self.axes)]
        if selection != "bandits":
            make_selector = functools.partial(UniformSelector, in_params=(selection == "uniform"))
        self._selectors = [make_selector(group, self._rng) for group in groups]
        ends = np.cumsum([len(group) for group in groups]).tolist()
        self._parts = [slice(end - len(group), end) for group, end in zip(groups, ends)]
        # e.g. LBC's N eta, and N omega, populations: each set scored in one call
        alike: dict[tuple, list[tuple[int, BanditPopulation]]] = {}
        for k, selector in enumerate(self._selectors):
            if isinstance(selector, BanditPopulation):
                alike.setdefault(selector.scoring, []).append((k, selector))
        self._alike = list(alike.values())

    # Subclasses map the paper's variables to one coordinate per axis and back.
    def _params(self, x: np.ndarray) -> Params:
        raise NotImplementedError

    def coordinates(self, params: Mapping[str, Any]) -> np.ndarray:
        """The bandit coordinates x of a params dict (one per axis)."""
        raise NotImplementedError

    def propose(self) -> Params:
        """The behaviour parameters for the next episode."""
        # populations' scores draw nothing: computing them first changes no draw
        scores: dict[int, np.ndarray] = {}
        for members in self._alike:
            populations = [population for _, population in members]
            scores.update(zip([k for k, _ in members], BanditPopulation.scores_of(populations)))
        points = [
            selector.propose(scores[k])
            if isinstance(selector, BanditPopulation) and k in scores
            else selector.propose()
            for k, selector in enumerate(self._selectors)
        ]
        return self._params(np.concatenate(points))

    def update(self, params: Mapping[str, Any], episode_return: float) -> None:
        """Learn from one finished episode run with `params` (as returned by `propose`) and its raw
        undiscounted return G = sum of game rewards (DiCE Algorithm 1 and GDI Algorithm 2
        accumulate G <- G + r; LBC §4.2: "the undiscounted episodic returns")."""
        if not np.isfinite(episode_return):
            raise ValueError(f"episode_return must be finite, got {episode_return!r}")
        x = self.coordinates(params)
        for selector, part in zip(self._selectors, self._parts):
            selector.update(x[part], float(episode_return))

    def state_dict(self) -> StateDict:
        state = {"rng": _rng_words(self._rng)}
        for k, selector in enumerate(self._selectors):
            state.update({f"selector{k}/{key}": v for key, v in selector.state_dict().items()})
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
            own = {
                key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)
            }
            selector.load_state_dict(own)
        _set_rng_words(self._rng, state["rng"])
