"""GDI configuration (GDI-I3 and GDI-H3): one frozen dataclass, every default cited.

Sources: Table 5 (App. I.1, Atari pre-processing), Table 6 (App. I.2, hyperparameters), §4.1
(experimental setup), Eqs. (2)-(4) and (9)-(12), App. G (Bandits Controller) and App. K (ablations)
of Fan & Xiao, "Generalized Data Distribution Iteration", and our choices where the paper is
silent (comments say "choice"); every default that is not the paper's is listed with its reason
in docs/papers/gdi.md#departures-from-the-paper. Field names are also the flag names.

GDI-I3 and GDI-H3 share every Table 6 entry except the reward shaping: I3 trains one network on
shape 1; H3 trains two networks (Eqs. (11)-(12)), the second on shape 2. So one dataclass serves
both, and `variant` chooses: `reward_shapings` is (shape 1,) for "i3" and (shape 1, shape 2) for
"h3", one entry per network.

The fields GDI shares with DiCE and LBC are declared, with their defaults (Tables 5 and 6's where
GDI prints them) and checks, in `common.settings.config`'s `ProcessSettings`,
`BurnInLearnerSettings` and
`BanditSettings`; this module declares GDI's own fields and the shared ones whose default is
GDI's own. Every `bandit_<arg>` field is the argument `<arg>` of `gdi.controller.GdiController`;
`bandit_kwargs()` passes them through, with `held`: the parameters outside `selected_params` at
their `fixed_*` values (Table 20's one-parameter ablations). This module imports nothing heavy
(no TensorFlow, no gymnasium), so flags are validated in milliseconds.
"""

import dataclasses
import math
from typing import Any, ClassVar

from common.settings.burn_in_settings import (
    BURN_IN_CARTPOLE,
    BURN_IN_MINATAR,
    BanditEnsembleSettings,
    BanditSettings,
    BurnInLearnerSettings,
    DynamicsSettings,
    scaled_warmup,
)
from common.settings.config import (
    REWARD_TRANSFORMS,
    DiscountSettings,
    Check,
    all_of,
    field,
    non_negative,
    one_of,
    ordered_pair,
    positive,
    positive_int_tuple,
    unit_interval,
)

# The common.environments.envs protocol: 84x84 grayscale, 4 action repeats, 4 stacked frames, full
# action set, life information not allowed, no reward clipping (Tables 5, 6); the fields below set
# the rest.
PROTOCOL = "dice_gdi_lbc"
ACTION_REPEAT = 4  # Table 5: "Num. Action Repeats 4"

VARIANTS = ("i3", "h3")
PG_MODES = ("log_mixture", "tau_free")
EVAL_POLICIES = ("bandits", "best_region")
# Eq. (2)'s lambda = (1/tau_1, 1/tau_2, eps), by the names gdi.controller.GdiController gives them.
BEHAVIOUR_PARAMS = ("eta1", "eta2", "epsilon")

# --selected_params: distinct names of BEHAVIOUR_PARAMS.
DISTINCT_BEHAVIOUR_PARAMS = Check(
    lambda names: (
        isinstance(names, tuple)
        and bool(names)
        and set(names) <= set(BEHAVIOUR_PARAMS)
        and len(set(names)) == len(names)
    ),
    lambda name, names: (
        f"--{name}={names!r} must be distinct names among {', '.join(BEHAVIOUR_PARAMS)}"
    ),
)


@dataclasses.dataclass(frozen=True)
class GdiConfig(
    DynamicsSettings,
    BanditEnsembleSettings,
    BanditSettings,
    DiscountSettings,
    BurnInLearnerSettings,
):
    """Hyperparameters and run settings; `validate()` names the offending field. The fields GDI
    shares with DiCE and LBC, and their Table 5-6 defaults, are `common.settings.config`'s
    `ProcessSettings`, `BurnInLearnerSettings` and `BanditSettings`; below are GDI's own."""

    action_repeat: ClassVar[int] = ACTION_REPEAT
    schedule_source: ClassVar[str] = "docs/papers/gdi.md#departures-from-the-paper"

    variant: str = field(
        "i3", "i3: one network (Eqs. (9)-(10)); h3: two (Eqs. (11)-(12)).", one_of(VARIANTS)
    )
    # choice: GDI-I3 trains one network, half the learner cost of H3 on a 2-core machine.

    # --- Environment (Tables 5 and 6; the rest of the protocol is `PROTOCOL`) ------------------
    max_episode_frames: int = field(100_000)
    # Table 5 "Max episode length 100000"; App. H "truncated at 100K frames (or 30 minutes)".
    reward_shaping: str = field(
        "asymmetric_log", "Reward transform of network 1's targets.", one_of(REWARD_TRANSFORMS)
    )
    # Table 6 "GDI-I3 Reward Shape" = "GDI-H3 Reward Shape 1": log(|r|+1)(2*1{r>=0} - 1{r<0}).
    reward_shaping_2: str = field(
        "fourth_root", "Reward transform of GDI-H3's network 2.", one_of(REWARD_TRANSFORMS)
    )
    # Table 6 "GDI-H3 Reward Shape 2": sign(r)((|r|+1)^0.25 - 1) + 0.001 r.

    # --- Network (Table 6; the rest: docs/papers/gdi.md#departures-from-the-paper) ----------------
    shared_torso: bool = field(False, "GDI-H3: one torso under both networks' LSTMs and heads.")
    # §4.1, Eq. (11): two complete networks, "two different families of trainable variables";
    # the shared torso is our option (one torso pass per step, one set of dynamics heads on its
    # embeddings; each network keeps its LSTM, fed its own shaped reward; see
    # docs/papers/gdi.md#options-and-readings-that-are-not-departures).
    # The auxiliary dynamics tasks (Table 6): `DynamicsSettings`.

    # --- Loss (Table 6, App. B; docs/papers/gdi.md#equations-in-code) -----------------------------
    discount: float = 0.997  # Table 6
    pg_mode: str = field(
        "log_mixture", "Policy-gradient log term: log_mixture or tau_free.", one_of(PG_MODES)
    )
    # App. B: rho_t (r_t + gamma V(s_{t+1}) - V(s_t)) grad log pi with pi the Eq. (2) mixture:
    # log_mixture. tau_free (DiCE's Eq. (8) generalised to the mixture, tau_n times smaller per
    # component) is an option; it left GDI-I3 at random play on CartPole (docs/papers/gdi.md).

    # --- Actors and behaviour (Algorithms 2-4, Eq. (2), App. G) --------------------------------
    fixed_behaviour: bool = field(False, "Act with the --fixed_* lambda, no bandits.")
    # App. K.1 "Fix Selection" (GDI-I0 w/o E).
    fixed_eta1: float = field(1.0, "1/tau_1 of --fixed_behaviour.", non_negative)
    # Table 6 "Fixed Selection for [1/tau_1, 1/tau_2, eps] [1.0, 0.0, 1.0]": pi = Softmax(A).
    fixed_eta2: float = field(0.0, "1/tau_2 of --fixed_behaviour.", non_negative)  # Table 6
    fixed_epsilon: float = field(1.0, "epsilon of --fixed_behaviour.", unit_interval)  # Table 6
    selected_params: tuple[str, ...] = field(
        BEHAVIOUR_PARAMS,
        "Parameters the bandits choose; the others keep their --fixed_* value.",
        DISTINCT_BEHAVIOUR_PARAMS,
    )
    # Table 20: GDI-I3/H3 select all of (1/tau_1, 1/tau_2, eps); the GDI-I1 ablations one of them.
    # bandit_space, bandit_ucb_scale, bandit_learning_rates: `BanditEnsembleSettings`' (Table 6,
    # App. G).
    bandit_factorized: bool = field(True, "One ensemble per coordinate, or one on the 3-D grid.")
    # choice: App. G's joint 25,000-block grid locks in
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_eta_acc: float = field(
        1.0,
        "Block width of the 1/tau ranges; with --bandit_space=log1p it sets the count.",
        positive,
    )
    # Table 6 "Accuracy of Search Range for [1/tau_1, 1/tau_2, eps] [1.0, 1.0, 0.1]".
    bandit_epsilon_acc: float = field(
        0.1, "Block width of the epsilon range [0, 1].", all_of(positive, unit_interval)
    )
    # Table 6
    bandit_num_candidates: int = 3  # Table 6 "Num. Bandit Candidates 3"
    bandit_num_tilings: tuple[int, ...] = field(
        (2, 3, 4), "Each bandit's tiling count from.", positive_int_tuple
    )
    # Table 6 "Bandit Tiling Width Uniform([2, 3, 4])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_tile_sizes: tuple[int, ...] = field(
        (2, 3, 4), "Each tiling's tile size (blocks).", positive_int_tuple
    )
    # Table 6 "Accuracy of Tile coding Uniform([2, 3, 4])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_tile_offset_percent: tuple[float, float] = field(
        (0.0, 60.0),
        "Tile offsets, uniform in this range (percent of a tile).",
        ordered_pair(below=100),
    )
    # Table 6 "Offset of Tile coding Uniform([0, 60])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).

    # --- Evaluation (§4.1; the rest: docs/papers/gdi.md#departures-from-the-paper) ----------------
    eval_policy: str = field(
        "bandits",
        "bandits: the evaluator runs its own bandit ensembles, learning from its games; "
        "best_region: lambda from the best block of the first actor's ensembles, frozen.",
        one_of(EVAL_POLICIES),
    )
    # choice (docs/papers/gdi.md#departures-from-the-paper): the paper evaluates in "additional
    # environments" (§4.1); their own ensembles evaluate the adaptive behaviour population.
    # `best_region` is DiCE's rule (DiCE §4.1: tau "sampled from the best region").

    def validate(self) -> "GdiConfig":
        """Raises ValueError naming the first field whose value is not allowed: each field's
        check, the shared rules (`BurnInLearnerSettings.validate`), then GDI's own."""
        super().validate()
        if self.bandit_factorized and self.bandit_num_candidates > min(self.axis_blocks):
            # App. G: each bandit offers num_candidates distinct blocks of its 1-D axis.
            raise ValueError(
                f"--bandit_num_candidates={self.bandit_num_candidates} exceeds the "
                f"blocks of an axis: {self.axis_blocks} (1/tau_1, 1/tau_2, eps)"
            )
        if self.shared_torso and self.variant != "h3":
            raise ValueError("--shared_torso needs --variant=h3 (GDI-I3 has one network)")
        if self.eval_policy == "best_region":  # acts on the best block's lambda
            self.check_bandits_learn(self.eval_policy, self.fixed_behaviour)
        return self

    @property
    def fixed_params(self) -> dict[str, float]:
        """lambda of --fixed_behaviour, {"eta1", "eta2", "epsilon"} (Table 6 "Fixed selection")."""
        return {name: getattr(self, f"fixed_{name}") for name in BEHAVIOUR_PARAMS}

    def bandit_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `gdi.controller.GdiController` (add `seed` per actor): the
        `bandit_*` fields, and the parameters not in --selected_params held at --fixed_*."""
        held = {k: v for k, v in self.fixed_params.items() if k not in self.selected_params}
        return dict(super().bandit_kwargs(), held=held)

    @property
    def reward_shapings(self) -> tuple[str, ...]:
        """One reward transform per network: (shape 1,) for I3, (shape 1, shape 2) for H3."""
        if self.variant == "h3":
            return (self.reward_shaping, self.reward_shaping_2)
        return (self.reward_shaping,)

    @property
    def axis_blocks(self) -> tuple[int, int, int]:
        """Blocks of the (1/tau_1, 1/tau_2, eps) axes, as GdiController cuts them (Table 6: 50,
        50, 10)."""
        eta_blocks = math.ceil(self.bandit_eta_max / self.bandit_eta_acc - 1e-9)
        return eta_blocks, eta_blocks, math.ceil(1 / self.bandit_epsilon_acc - 1e-9)


# choice: the burn-in agents' CartPole sizes (common.settings.burn_in_settings.BURN_IN_CARTPOLE) and
# a dynamics MLP to match; Table 6's loss, weights and gamma stay.
CARTPOLE_OVERRIDES: dict[str, Any] = dict(BURN_IN_CARTPOLE, aux_hidden=64)

# choice: MinAtar with the published agents' torso under this paper's core and heads, its batch,
# sequence, burn-in, reuse and environments (common.settings.burn_in_settings.BURN_IN_MINATAR), and
# the warm-up at the same share of the run's updates as the table's on Atari, whatever the run's
# budget.
MINATAR_OVERRIDES: dict[str, Any] = dict(
    BURN_IN_MINATAR,
    warmup_steps=scaled_warmup(GdiConfig, ACTION_REPEAT),
    # choice: trial 9 of the MinAtar protocol (GDI-H3's edge row below batch 16; every variant
    # takes it, as the ablations compare variants at one setting), the best IQM of normalised
    # scores on the tuning games at 0.5M frames (0.306; Table 6's 5e-4 and 64 scored 0.082:
    # --ablation=gdi_h3_table_6), docs/guides/minatar_protocol.md and
    # docs/results/minatar_protocol/gdi_h3.csv.
    learning_rate=4e-3,
    batch_size=8,
)
