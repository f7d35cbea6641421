"""App. F's exploit and explore on Ray Tune's population based training scheduler.

Ray Tune's `PopulationBasedTraining` does the machinery: it pauses a member, hands it another
member's checkpoint and a new config, and restarts it. Its own rules are not the paper's (a member
in the bottom quantile copies one of the top quantile; explore perturbs every hyperparameter by 1.2
or 0.8, or resamples it, and only after a copy), so this subclass replaces the decision, at the
one place Tune makes it (`_checkpoint_or_exploit`, called at each member's ready point):

- every member at its ready point keeps its checkpoint, so any member can be copied (upstream's
  top-quantile branch, taken for all);
- it picks another member uniformly at random among those with a fitness and a checkpoint that
  have not finished, and copies it if its fitness is more than `margin` higher (`rules.copies`);
- whether or not it copied, it perturbs the adapted hyperparameters (`rules.perturb`) of the
  member it now continues, and keeps its own seed and index;
- nothing copied and nothing perturbed: the member goes on as it is, without a restart; otherwise
  Tune restarts it from the chosen checkpoint (its own when it did not copy) with the new config.

The ready points themselves are the members' (`common.population.member`: 5,000 games, after the
burn-in), so each result a member reports is one (time attribute: Tune's `training_iteration`,
interval 1, no burn-in here), except a member's last (its run reached its budget), which ends it.
Every decision is a row of `decisions.csv`, written as it is made.

Sharing the machine: with more members than `slots` (the members that can train at once), a
member at its ready point pauses when another waits, and the one that waited longest starts
(upstream's rule). Upstream pauses it whenever another waits, also when a slot is free because
the waiting member is only being restarted with a copy; that would restart this one too for
nothing, so here it pauses only when every slot is taken.
"""

import csv
import logging
import os
import random
import time
from collections.abc import Sequence

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

from common.population import rules

logger = logging.getLogger(__name__)
DECISIONS_CSV = "decisions.csv"


class AppendixF(PopulationBasedTraining):
    def __init__(
        self,
        adapted: Sequence[str],
        decisions_path: str,
        seed: int,
        slots: int,
        margin: float = rules.COPY_MARGIN,
        probability: float = rules.PERTURB_PROBABILITY,
        factor: float = rules.PERTURB_FACTOR,
    ):
        self._adapted = tuple(adapted)
        self._margin, self._probability, self._factor = margin, probability, factor
        self._rng = random.Random(seed)
        self._slots = slots  # members that can train at once
        self._decisions_path = decisions_path
        self._new_configs: dict[Trial, dict] = {}
        super().__init__(
            time_attr="training_iteration",
            metric="fitness",
            mode="max",
            perturbation_interval=1,
            custom_explore_fn=self.explore,
            log_config=False,  # its policy files assume a member never continues itself
        )

    def explore(self, config: dict) -> dict:
        """`config` with its adapted hyperparameters perturbed (App. F)."""
        return rules.perturb(config, self._adapted, self._rng, self._probability, self._factor)

    def on_trial_result(self, tune_controller, trial, result):
        # A member's last report (its run reached the budget) is no ready point: it ends.
        if result.get("budget_reached"):
            return TrialScheduler.CONTINUE
        decision = super().on_trial_result(tune_controller, trial, result)
        # A pause only when every slot is taken (module docstring).
        running = sum(t.status == Trial.RUNNING for t in tune_controller.get_trials())
        if decision == TrialScheduler.PAUSE and running < self._slots:
            return TrialScheduler.CONTINUE
        return decision

    def _checkpoint_or_exploit(self, trial, tune_controller, upper_quantile, lower_quantile):
        super()._checkpoint_or_exploit(trial, tune_controller, [trial], [])
        own = self._trial_state[trial]
        copyable = {
            str(t): t
            for t, state in self._trial_state.items()
            if state.last_score is not None and state.last_checkpoint and not t.is_finished()
        }
        name = rules.pick_other(str(trial), list(copyable), self._rng)
        other = copyable.get(name) if name else None
        other_score = self._trial_state[other].last_score if other else float("nan")
        copied = other is not None and rules.copies(own.last_score, other_score, self._margin)
        source = other if copied else trial
        explored = self.explore({key: source.config[key] for key in self._adapted})
        new_config = {**trial.config, **explored}
        self._record(trial, other, other_score, copied, source, new_config)
        if not copied and new_config == trial.config:
            return
        if not self._resolve(source):
            logger.warning(f"[pbt] no checkpoint of {source} yet: {trial} goes on as it is")
            return
        self._new_configs[trial] = new_config
        self._exploit(tune_controller, trial, source)

    def _get_new_config(self, trial, trial_to_clone):
        return self._new_configs.pop(trial), {}

    def _resolve(self, trial) -> bool:
        """Waits for the trial's checkpoint save (a future while Tune saves it)."""
        state = self._trial_state[trial]
        pending = state.last_checkpoint
        if pending is not None and hasattr(pending, "resolve"):
            result = pending.resolve()
            state.last_checkpoint = result.checkpoint if result else None
            if result:
                state.last_result = result.metrics
        return state.last_checkpoint is not None

    def _record(self, trial, other, other_score, copied, source, new_config) -> None:
        """A decision: the member, its fitness, the member it drew and whether it copied it, the
        values it explored from (the copied member's, or its own) and the new ones."""
        state = self._trial_state[trial]
        row = {
            "time": f"{time.time():.1f}",
            "member": str(trial),
            "frames": int((state.last_result or {}).get("frames", 0)),  # type: ignore[call-overload]
            "fitness": f"{state.last_score:.6g}",
            "other": str(other) if other else "",
            "other_fitness": f"{other_score:.6g}",
            "copied": int(copied),
            **{f"from_{k}": repr(source.config[k]) for k in self._adapted},
            **{f"new_{k}": repr(new_config[k]) for k in self._adapted},
        }
        new = not os.path.isfile(self._decisions_path)
        with open(self._decisions_path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
