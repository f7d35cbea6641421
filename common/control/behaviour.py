"""Per-episode behaviour selection on the actor (DiCE's eta, GDI's (eta1, eta2, eps), LBC's psi).

At the start of each game, a meta-controller (a paper's `controller.py`, built from
`common.control.bandits`) picks the game's behaviour parameters for that environment (DiCE Algorithm
1, GDI Algorithms 2-3, LBC Algorithm 1); the actor acts with them for the whole game, stores them
with every step (a sequence can cross a game boundary) and, when the game ends, feeds the raw game
return back to the controller that chose them.

A game, not a training episode: where a life loss ends training episodes (IMPALA's protocol),
the parameters still last the whole game, because the return the controller learns from is the
game's. (DiCE, GDI and LBC do not end episodes at a life loss, so for them the two coincide.)

Controller state survives restarts: `Behaviour` saves every controller's `state_dict` to one
`.npz` file per actor (atomically: a temporary file, then a rename) at most every
`save_interval_s` and when the actor closes, and a new actor process with the same file loads
it, so a restarted actor or a resumed run continues the bandits' statistics. A resumed run's
bandits are its checkpoint's: the learner puts the checkpoint's files back (`restore_states`)
and marks the folder with the resume (`mark_restored`); an actor that was running across the
learner's restart (an actor host of a multi-host run, on storage every host mounts) finds the
mark at its next save and rolls back to the checkpoint's state (`Behaviour.save`).

The evaluator plays one of `EVALUATIONS` (`BehaviourSpec.evaluation`): "best" and "training"
load the first actor's saved state (actor 0's on one machine, `first_actor_state`) and never
update it ("best" draws each controller's best choice, `propose_best`, where the controller has
one, e.g. DiCE's best region of §4.1; "training" draws as the actors do); "own" gives the
evaluator controllers of its own that learn from the evaluation games and persist across rounds
and restarts in their own file (our reading of GDI §4.1's evaluation environments:
docs/papers/gdi.md#departures-from-the-paper, `eval_policy`).
"""

import dataclasses
import json
import os
import re
import shutil
import time
import uuid
from typing import Any, Callable, Mapping

import numpy as np


from common.control import controllers

SCOPES = ("per_env", "global")
# choice: a crashed actor loses at most this much bandit experience; saving is cheap. An actor
# saves more often when the run checkpoints more often (`launch.experiment_from_config`), so that a
# resumed run's bandits are never older than its networks.
SAVE_INTERVAL_S = 30.0
EVALUATIONS = ("best", "training", "own")


@dataclasses.dataclass(frozen=True)
class BehaviourSpec:
    """A paper's behaviour selection (picklable: it travels to spawned actor processes).

    `make_controller(seed=...)` builds one controller (a paper's, e.g. `dice.controller`);
    `param_shapes` names the parameters that are
    stored with every step and their per-env shapes (float32), e.g. `{"eta": ()}` for DiCE.
    `scope`: one controller per environment (DiCE's Algorithm 1 builds the bandits inside each
    actor) or one shared by all environments of an actor process.
    """

    make_controller: Callable[..., controllers.Controller]
    param_shapes: Mapping[str, tuple]
    scope: str = "per_env"
    # What the evaluator plays (module docstring): "best", "training" or "own".
    evaluation: str = "best"

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"behaviour scope {self.scope!r} is not one of {', '.join(SCOPES)}")
        if self.evaluation not in EVALUATIONS:
            raise ValueError(
                f"behaviour evaluation {self.evaluation!r} is not one of {', '.join(EVALUATIONS)}"
            )
        if not self.param_shapes:
            raise ValueError("param_shapes must name at least one behaviour parameter")


class Behaviour:
    """The behaviour parameters of one actor's `num_envs` environments (module docstring)."""

    def __init__(
        self,
        spec: BehaviourSpec,
        num_envs: int,
        seed: int,
        state_path: str | None,
        evaluation: bool = False,
        save_interval_s: float = SAVE_INTERVAL_S,
    ) -> None:
        self.spec = spec
        self.num_envs = num_envs
        self.evaluation = evaluation
        self.state_path = state_path
        self._seed = seed
        self._save_interval_s = save_interval_s
        self._last_save = time.monotonic()
        # The resume this actor's state already reflects: it started after it (or before any).
        self._resume = None if state_path is None else read_restored(os.path.dirname(state_path))[0]
        self.controllers = self._new_controllers()
        if state_path is not None and os.path.exists(state_path):
            self.load(state_path)
        self.params = {
            name: np.zeros((num_envs, *shape), np.float32)
            for name, shape in spec.param_shapes.items()
        }
        self._chosen: list[Mapping[str, Any]] = [{}] * num_envs
        for env in range(num_envs):
            self._choose(env)
        self.games_updated = 0

    def _new_controllers(self) -> list[controllers.Controller]:
        count = self.num_envs if self.spec.scope == "per_env" else 1
        return [self.spec.make_controller(seed=self._seed + i) for i in range(count)]

    def controller_of(self, env: int) -> controllers.Controller:
        return self.controllers[env if self.spec.scope == "per_env" else 0]

    def _choose(self, env: int) -> None:
        controller = self.controller_of(env)
        propose_best = getattr(controller, "propose_best", None)  # where a controller has one
        if self.evaluation and self.spec.evaluation == "best" and propose_best is not None:
            chosen = propose_best()
        else:
            chosen = controller.propose()
        self._chosen[env] = chosen
        for name in self.spec.param_shapes:
            self.params[name][env] = chosen[name]

    def end_games(self, episode_returns: np.ndarray) -> None:
        """Where `episode_returns[i]` is not NaN, env i's game ended with that raw score: its
        controller learns from it (not in evaluation) and the next game's parameters are drawn."""
        for env in np.flatnonzero(~np.isnan(episode_returns)):
            if not self.evaluation:
                self.controller_of(env).update(self._chosen[env], float(episode_returns[env]))
                self.games_updated += 1
            self._choose(env)
        if (
            not self.evaluation
            and self.state_path is not None
            and time.monotonic() - self._last_save >= self._save_interval_s
        ):
            self.save()

    def summary(self) -> dict[str, float]:
        """The mean over controllers of what each reports about its learning (`summary()`,
        e.g. DiCE's best region), for TensorBoard; empty for controllers without one."""
        reports = [c.summary() for c in self.controllers if hasattr(c, "summary")]
        reports = [r for r in reports if r]
        if not reports:
            return {}
        return {key: float(np.mean([r[key] for r in reports])) for key in reports[0]}

    def state_dict(self) -> dict[str, np.ndarray]:
        return {
            f"{i}/{key}": value
            for i, controller in enumerate(self.controllers)
            for key, value in controller.state_dict().items()
        }

    def load(self, path: str) -> None:
        """Loads the controllers saved at `path`. Controller i takes saved controller
        i mod (number saved), so an evaluator with fewer or more environments than the actor
        that saved the file still plays learned controllers."""
        with np.load(path) as saved:
            state = dict(saved)
        saved_ids = sorted({int(key.split("/", 1)[0]) for key in state})
        if not saved_ids:
            raise ValueError(f"{path} holds no controller state")
        for i, controller in enumerate(self.controllers):
            prefix = f"{saved_ids[i % len(saved_ids)]}/"
            controller.load_state_dict(
                {
                    key.removeprefix(prefix): value
                    for key, value in state.items()
                    if key.startswith(prefix)
                }
            )

    def save(self) -> None:
        """Writes every controller's state to `state_path` atomically; first, if the run resumed
        from a checkpoint since this actor started (`mark_restored`), the controllers become that
        checkpoint's (fresh ones if it kept no file of this actor's), so that the bandits learn
        on from what the resumed learner had, as the actors a resumed run starts do."""
        if self.state_path is None or self.evaluation:
            return
        resume, kept = read_restored(os.path.dirname(self.state_path))
        if resume != self._resume:
            self._roll_back(os.path.basename(self.state_path), kept)
            self._resume = resume
        os.makedirs(os.path.dirname(self.state_path) or ".", exist_ok=True)
        temporary = f"{self.state_path}.tmp.npz"
        np.savez(temporary, **self.state_dict())
        os.replace(temporary, self.state_path)
        self._last_save = time.monotonic()

    def _roll_back(self, name: str, kept: str | None) -> None:
        """The controllers become those of `kept`'s file `name`, or new ones without it."""
        self.controllers = self._new_controllers()
        path = "" if kept is None else os.path.join(kept, name)
        loaded = os.path.exists(path)
        if loaded:
            self.load(path)
        print(
            f"[behaviour] {name}: the run resumed from {os.path.basename(kept or 'its start')}; "
            f"its bandits are that state's ({'kept' if loaded else 'none kept: new ones'})",
            flush=True,
        )


RESTORED = "restored.json"  # the mark of the run's latest resume, in the state files' folder


def mark_restored(directory: str, kept: str | None) -> None:
    """Marks the behaviour state under the run directory `directory` as put back from `kept` (a
    folder `keep_states` wrote; None: the run started over, with no state), with an id new to
    this resume, atomically. Actors that started before it roll back at their next save."""
    folder = os.path.dirname(state_path(directory, 0))
    os.makedirs(folder, exist_ok=True)
    mark = {"resume": uuid.uuid4().hex, "kept": None if kept is None else os.path.abspath(kept)}
    temporary = os.path.join(folder, f"{RESTORED}.tmp")
    with open(temporary, "w") as f:
        json.dump(mark, f)
    os.replace(temporary, os.path.join(folder, RESTORED))


def read_restored(folder: str) -> tuple[str | None, str | None]:
    """(id, kept folder) of the latest resume marked in `folder`; (None, None) before any."""
    try:
        with open(os.path.join(folder, RESTORED)) as f:
            mark = json.load(f)
    except FileNotFoundError:
        return None, None
    return mark["resume"], mark["kept"]


_ACTOR_STATE = re.compile(r"actor_(\d+)\.npz")  # `state_path`'s file name


def state_path(directory: str, actor_id: int) -> str:
    """Where actor `actor_id` keeps its controllers' state under a run directory."""
    return os.path.join(directory, "behaviour", f"actor_{actor_id}.npz")


def keep_states(directory: str, into: str) -> None:
    """Copies the behaviour state files under the run directory `directory` (the actors' and
    the evaluator's, as last saved) into the folder `into`, whole or not at all (a temporary
    folder, then a rename). A checkpoint keeps them so that a resume restores the bandits it had
    (`restore_states`)."""
    folder = os.path.dirname(state_path(directory, 0))
    names = sorted(
        name
        for name in (os.listdir(folder) if os.path.isdir(folder) else [])
        if name.endswith(".npz") and ".tmp." not in name
    )
    temporary = f"{into}.tmp"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    for name in names:
        shutil.copyfile(os.path.join(folder, name), os.path.join(temporary, name))
    shutil.rmtree(into, ignore_errors=True)
    os.replace(temporary, into)


def restore_states(directory: str, kept: str | None) -> None:
    """Makes the behaviour state files under the run directory `directory` those `keep_states`
    kept in `kept` (None: none, for a run that starts over): newer files are replaced, files the
    checkpoint did not have are removed, and the folder is marked with the resume
    (`mark_restored`). Call it before any actor of this machine starts."""
    folder = os.path.dirname(state_path(directory, 0))
    os.makedirs(folder, exist_ok=True)
    wanted = [] if kept is None else os.listdir(kept)
    for name in os.listdir(folder):
        if name.endswith(".npz") and name not in wanted:
            os.remove(os.path.join(folder, name))
    if kept is not None:
        for name in wanted:
            temporary = os.path.join(folder, f"{name}.tmp.npz")
            shutil.copyfile(os.path.join(kept, name), temporary)
            os.replace(temporary, os.path.join(folder, name))
    mark_restored(directory, kept)


def evaluator_state_path(directory: str) -> str:
    """Where the evaluator keeps its own controllers' state (`evaluation="own"`)."""
    return os.path.join(directory, "behaviour", "evaluator.npz")


def evaluation_selector(
    spec: BehaviourSpec,
    num_envs: int,
    seed: int,
    directory: str | None,
    current: Behaviour | None = None,
) -> Behaviour:
    """The selector an evaluation round plays (module docstring). "own": `current` (the last
    round's) or, in the first round, the evaluator's controllers, restored from their file if a
    resumed run left one; they learn from every evaluation game. "best" / "training": the first
    actor's latest saved state (`first_actor_state`), loaded anew each round, frozen."""
    if spec.evaluation == "own":
        if current is None:
            path = None if directory is None else evaluator_state_path(directory)
            current = Behaviour(spec, num_envs, seed, path)
        return current
    path = None if directory is None else first_actor_state(directory)
    return Behaviour(spec, num_envs, seed, path, evaluation=True)


def first_actor_state(directory: str) -> str:
    """The state file of the lowest-index actor that saved one under `directory`: actor 0's
    on one machine; on a cluster whose actor hosts start at --first_actor=4, actor 4's. Actor
    0's path (absent) if none has saved yet."""
    folder = os.path.dirname(state_path(directory, 0))
    names = os.listdir(folder) if os.path.isdir(folder) else []
    indices = [int(match.group(1)) for match in map(_ACTOR_STATE.fullmatch, names) if match]
    return state_path(directory, min(indices, default=0))
