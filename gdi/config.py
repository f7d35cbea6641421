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

Every `bandit_<arg>` field is the argument `<arg>` of `gdi.controller.GdiController`;
`bandit_kwargs()` passes them through, with `held`: the parameters outside `selected_params` at
their `fixed_*` values (Table 20's one-parameter ablations). This module imports nothing heavy (no TensorFlow, no
gymnasium), so flags are validated in milliseconds.
"""

import dataclasses
import math
from typing import Any, ClassVar

from common.config import (
    BURN_IN_CARTPOLE,
    BURN_IN_MINATAR,
    REWARD_TRANSFORMS,
    BurnInLearnerSettings,
    ProcessSettings,
    check_all,
    check_choice,
    check_tuple,
    field,
    prefixed_kwargs,
    scaled_warmup,
)

# The common.envs protocol: 84x84 grayscale, 4 action repeats, 4 stacked frames, full action set,
# life information not allowed, no reward clipping (Tables 5, 6); the fields below set the rest.
PROTOCOL = "dice_gdi_lbc"
ACTION_REPEAT = 4  # Table 5: "Num. Action Repeats 4"

VARIANTS = ("i3", "h3")
PG_MODES = ("log_mixture", "tau_free")
EVAL_POLICIES = ("bandits", "best_region")
# Eq. (2)'s lambda = (1/tau_1, 1/tau_2, eps), by the names gdi.controller.GdiController gives them.
BEHAVIOUR_PARAMS = ("eta1", "eta2", "epsilon")
BANDIT_SPACES = ("log1p", "inv_tau", "exp_literal")  # common.bandits.SPACES
BANDIT_SELECTIONS = ("bandits", "uniform", "uniform_coordinate")  # common.bandits.SELECTIONS


@dataclasses.dataclass(frozen=True)
class GdiConfig(ProcessSettings, BurnInLearnerSettings):
    """Hyperparameters and run settings; `validate()` names the offending field."""

    action_repeat: ClassVar[int] = ACTION_REPEAT

    variant: str = field("i3", "i3: one network (Eqs. (9)-(10)); h3: two (Eqs. (11)-(12)).")
    # choice: GDI-I3 trains one network, half the learner cost of H3 on a 2-core machine.

    # --- Environment (Tables 5 and 6; the rest of the protocol is `PROTOCOL`) ------------------
    env: str = field("Pong", "Atari game, e.g. Pong, Seaquest.")  # choice: quick smoke game
    total_frames: int = field(200_000_000, "Environment frames (action repeats included).")
    # Table 6 "Num. Frames 200M".
    full_action_set: bool = field(True, "All 18 Atari actions.")  # Table 5 "Action Space Full"
    noop_max: int = field(30, "Random no-ops at episode start (training and evaluation).")
    # Table 5 "Random noops range 30".
    max_episode_frames: int = field(100_000, "Episode cap in frames (a truncation, not an end).")
    # Table 5 "Max episode length 100000"; App. H "truncated at 100K frames (or 30 minutes)".
    sticky_action_probability: float = field(0.0, "Sticky-action probability.")  # Table 5
    reward_shaping: str = field("asymmetric_log", "Reward transform of network 1's targets.")
    # Table 6 "GDI-I3 Reward Shape" = "GDI-H3 Reward Shape 1": log(|r|+1)(2*1{r>=0} - 1{r<0}).
    reward_shaping_2: str = field("fourth_root", "Reward transform of GDI-H3's network 2.")
    # Table 6 "GDI-H3 Reward Shape 2": sign(r)((|r|+1)^0.25 - 1) + 0.001 r.

    # --- Network (Table 6; the rest: docs/papers/gdi.md#departures-from-the-paper) ----------------
    network: str = field("deep", "Torso: deep (IMPALA, 15 conv), shallow, nature, minatar or mlp.")
    # Table 6 "Backbone IMPALA,deep".
    lstm_units: int = field(256, "LSTM core size.")  # Table 6 "LSTM Units 256"
    head_hidden: int = field(0, "Hidden units of the A and V heads (0: linear heads).")
    # choice (paper silent): linear heads, as IMPALA's.
    shared_torso: bool = field(False, "GDI-H3: one torso under both networks' LSTMs and heads.")
    # §4.1, Eq. (11): two complete networks, "two different families of trainable variables";
    # the shared torso is our option (one torso pass per step, one set of dynamics heads on its
    # embeddings; each network keeps its LSTM, fed its own shaped reward; see
    # docs/papers/gdi.md#options-and-readings-that-are-not-departures).
    aux_forward_weight: float = field(1.0, "Weight of the forward-dynamics auxiliary loss.")
    # Table 6 "Auxiliary Forward Dynamic Task Yes"; choice (no weight printed): 1.
    aux_inverse_weight: float = field(1.0, "Weight of the inverse-dynamics auxiliary loss.")
    # Table 6 "Auxiliary Inverse Dynamic Task Yes"; choice (no weight printed): 1.
    aux_hidden: int = field(256, "Hidden units of the forward and inverse dynamics MLPs.")
    # choice (no size printed): hidden size 256, the torso's width.

    # --- Loss (Table 6, App. B; docs/papers/gdi.md#equations-in-code) -----------------------------
    discount: float = field(0.997, "Discount gamma.")  # Table 6
    v_loss_scale: float = field(1.0, "xi: weight of the V-trace value loss.")  # Table 6
    q_loss_scale: float = field(10.0, "alpha: weight of the Retrace Q loss.")  # Table 6
    pi_loss_scale: float = field(10.0, "beta: weight of the policy loss.")  # Table 6
    clip_rho_threshold: float = field(1.05, "rho-bar of V-trace and the policy gradient.")
    # Table 6 "Importance Sampling Clip rho-bar 1.05".
    clip_c_threshold: float = field(1.05, "c-bar of V-trace and Retrace.")  # Table 6
    retrace_form: str = field("sampled", "Retrace bootstrap: sampled Q(x', a') or expected.")
    # Eq. (3) prints Q(s_{t+1}, a_{t+1}): sampled; expected is Munos et al.'s E_pi Q(s_{t+1}, .).
    q_centering: str = field(
        "policy_mean",
        "Q = V + A - E_pi[A] with pi under stop-gradient (policy_mean), with the gradient "
        "through pi (policy_mean_grad), V + A (none) or V + A - mean A (uniform_mean).",
    )
    # Eqs. (9), (11): A-bar = A - E_pi[A], Q = A-bar + V; choice (paper silent on the gradient
    # through pi): stopped, so the Q loss moves A only through A itself (docs/papers/gdi.md).
    pg_mode: str = field("log_mixture", "Policy-gradient log term: log_mixture or tau_free.")
    # App. B: rho_t (r_t + gamma V(s_{t+1}) - V(s_t)) grad log pi with pi the Eq. (2) mixture:
    # log_mixture. tau_free (DiCE's Eq. (8) generalised to the mixture, tau_n times smaller per
    # component) is an option; it left GDI-I3 at random play on CartPole (docs/papers/gdi.md).

    # --- Optimiser (Table 6) ---------------------------------------------------------------------
    learning_rate: float = field(5e-4, "Peak learning rate, annealed linearly to 0.")  # Table 6
    warmup_steps: int = field(4000, "Learner steps of linear warm-up from 0.")  # Table 6
    adam_beta1: float = field(0.9, "AdamW beta1.")  # Table 6
    adam_beta2: float = field(0.98, "AdamW beta2.")  # Table 6
    adam_epsilon: float = field(1e-6, "AdamW epsilon.")  # Table 6
    weight_decay: float = field(0.01, "AdamW weight decay, annealed linearly to 0.")  # Table 6
    max_grad_norm: float = field(50.0, "Global gradient-norm clip (0 disables).")
    # Table 6 "AdamW Clip Norm 50.0".

    # --- Replay (Table 6; sample-k: docs/architecture.md#replay-patterns-commonpatternspy) --------
    batch_size: int = field(64, "Sequences per learner batch.")  # Table 6
    burn_in: int = field(40, "Burn-in steps from the stored LSTM state (no gradient).")
    # Table 6 "Burn-in 40", "Burn-in Stored Recurrent State Yes".
    sequence_length: int = field(80, "Trained steps per sequence (plus 1 bootstrap step).")
    # Table 6 "Seq-length 80", "Bootstrap Yes".
    times_sampled: int = field(2, "Times each sequence is trained on.")
    # Table 6 "Replay 2"; §4.1 "we train each sample twice".
    reuse_mode: str = field("replay", "replay: each item sampled k times; repeat: k steps/batch.")
    # choice (paper silent on the sampler): Reverb max_times_sampled = k, uniform sampling.
    learner_microbatches: int = field(4, "Slices of each batch the gradient is computed in.")
    # choice (as DiCE's): backprop through the deep torso keeps ~2.5 MB of activations per frame
    # on a CPU (H3: two torsos); 4 slices give exactly the same gradient
    # (common.burn_in_learning) in about a quarter of the memory. 1 for a big GPU.
    replay_capacity: int = field(8192, "Sequences the replay table holds.")
    # choice (not printed): a few thousand items; the data is near on-policy.

    # --- Actors and behaviour (Algorithms 2-4, Eq. (2), App. G) --------------------------------
    num_actors: int = field(2, "Actor processes.")  # choice: one per core on 2 cores
    envs_per_actor: int = field(80, "Environments stepped together by one actor.")
    # Table 6 "Num. Environments 160" = 2 x 80.
    params_pull_interval: int = field(64, "Actor steps between parameter pulls.")
    # Table 6 "Actor Pull Model Every N Steps 64".
    publish_interval: int = field(25, "Learner steps between parameter publications.")
    # Table 6 "Learner Push Model Every N Steps 25".
    controller_scope: str = field("per_env", "One bandit ensemble per env, or one global.")
    # Algorithms 2-3 initialise the bandits inside each actor, which steps one environment.
    fixed_behaviour: bool = field(False, "Act with the --fixed_* lambda, no bandits.")
    # App. K.1 "Fix Selection" (GDI-I0 w/o E).
    fixed_eta1: float = field(1.0, "1/tau_1 of --fixed_behaviour.")
    # Table 6 "Fixed Selection for [1/tau_1, 1/tau_2, eps] [1.0, 0.0, 1.0]": pi = Softmax(A).
    fixed_eta2: float = field(0.0, "1/tau_2 of --fixed_behaviour.")  # Table 6
    fixed_epsilon: float = field(1.0, "epsilon of --fixed_behaviour.")  # Table 6
    selected_params: tuple[str, ...] = field(
        BEHAVIOUR_PARAMS, "Parameters the bandits choose; the others keep their --fixed_* value."
    )
    # Table 20: GDI-I3/H3 select all of (1/tau_1, 1/tau_2, eps); the GDI-I1 ablations one of them.
    bandit_space: str = field("log1p", "Bandit coordinate: log1p, inv_tau or exp_literal.")
    # choice (App. G and Table 6 disagree, docs/papers/gdi.md#errata): x = log(1 + 1/tau)
    # (App. G) over Table 6's range of 1/tau.
    bandit_factorized: bool = field(True, "One ensemble per coordinate, or one on the 3-D grid.")
    # choice: App. G's joint 25,000-block grid locks in
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_eta_max: float = field(50.0, "Upper end of the 1/tau_1 and 1/tau_2 search ranges.")
    # Table 6 "Bandit Search Range for 1/tau_1 (and 1/tau_2) [0.0, 50.0]".
    bandit_eta_acc: float = field(
        1.0, "Block width of the 1/tau ranges; with --bandit_space=log1p it sets the count."
    )
    # Table 6 "Accuracy of Search Range for [1/tau_1, 1/tau_2, eps] [1.0, 1.0, 0.1]".
    bandit_epsilon_acc: float = field(0.1, "Block width of the epsilon range [0, 1].")  # Table 6
    bandit_num_bandits: int = field(7, "Bandits per ensemble.")  # Table 6 "Num. Bandits 7"
    bandit_num_candidates: int = field(3, "Candidates each bandit offers.")
    # Table 6 "Num. Bandit Candidates 3".
    bandit_ucb_scale: float = field(1.0, "UCB coefficient c.")  # Table 6 "Bandit UCB Scaling"
    bandit_learning_rates: tuple[float, ...] = field(
        (0.05, 0.1, 0.2), "Each bandit's learning rate is drawn from these."
    )
    # Table 6 "Bandit Learning Rate Uniform([0.05, 0.1, 0.2])".
    bandit_num_tilings: tuple[int, ...] = field((2, 3, 4), "Each bandit's tiling count from.")
    # Table 6 "Bandit Tiling Width Uniform([2, 3, 4])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_tile_sizes: tuple[int, ...] = field((2, 3, 4), "Each tiling's tile size (blocks).")
    # Table 6 "Accuracy of Tile coding Uniform([2, 3, 4])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_tile_offset_percent: tuple[float, float] = field(
        (0.0, 60.0), "Tile offsets, uniform in this range (percent of a tile)."
    )
    # Table 6 "Offset of Tile coding Uniform([0, 60])", in our reading
    # (docs/papers/gdi.md#departures-from-the-paper).
    bandit_selection: str = field(
        "bandits",
        "bandits; uniform: 1/tau_1, 1/tau_2 uniform on [0, bandit_eta_max] and eps on [0, 1] "
        "(Random Selection); uniform_coordinate: the bandit coordinates uniform.",
    )
    # App. G; Table 20 "Random Selection": P over Lambda uniform, E the identity; uniform in the
    # parameters over Table 6's search ranges (the bandit coordinate log(1 + 1/tau) drawn
    # uniformly would put the median 1/tau near 6, not 25).

    # --- Evaluation (§4.1; the rest: docs/papers/gdi.md#departures-from-the-paper) ----------------
    eval_episodes: int = field(32, "Episodes per evaluation.")
    # §4.1: "undiscounted episode returns averaged over 32 environments with different seeds".
    eval_policy: str = field(
        "bandits",
        "bandits: the evaluator runs its own bandit ensembles, learning from its games; "
        "best_region: lambda from the best block of actor 0's ensembles, frozen.",
    )
    # choice (docs/papers/gdi.md#departures-from-the-paper): the paper evaluates in "additional
    # environments" (§4.1); their own ensembles evaluate the adaptive behaviour population.
    # `best_region` is DiCE's rule (DiCE §4.1: tau "sampled from the best region").
    seed: int = field(0, "Seed of environments, networks and bandits.")

    def validate(self) -> "GdiConfig":
        """Raises ValueError naming the first field whose value is not allowed."""
        self.check_burn_in_learner("docs/papers/gdi.md#departures-from-the-paper")
        for name, allowed in (
            ("variant", VARIANTS),
            ("reward_shaping", REWARD_TRANSFORMS),
            ("reward_shaping_2", REWARD_TRANSFORMS),
            ("pg_mode", PG_MODES),
            ("eval_policy", EVAL_POLICIES),
            ("bandit_space", BANDIT_SPACES),
            ("bandit_selection", BANDIT_SELECTIONS),
        ):
            check_choice(name, getattr(self, name), allowed)
        check_all(
            self,
            "> 0",
            lambda v: v > 0,
            (
                "aux_hidden",
                "bandit_eta_max",
                "bandit_eta_acc",
                "bandit_epsilon_acc",
                "bandit_num_bandits",
                "bandit_num_candidates",
            ),
        )
        check_all(
            self,
            ">= 0",
            lambda v: v >= 0,
            (
                "aux_forward_weight",
                "aux_inverse_weight",
                "fixed_eta1",
                "fixed_eta2",
                "bandit_ucb_scale",
            ),
        )
        check_all(
            self,
            "in [0, 1]",
            lambda v: 0 <= v <= 1,
            ("discount", "fixed_epsilon", "bandit_epsilon_acc"),
        )
        check_tuple(self, "bandit_learning_rates", "in (0, 1]", lambda v: 0 < v <= 1)
        for name in ("bandit_num_tilings", "bandit_tile_sizes"):
            check_tuple(self, name, "positive integers", lambda v: isinstance(v, int) and v > 0)
        low, high = self.bandit_tile_offset_percent
        if not 0 <= low <= high < 100:
            raise ValueError(
                f"--bandit_tile_offset_percent={self.bandit_tile_offset_percent!r} "
                "must satisfy 0 <= low <= high < 100"
            )
        if self.bandit_factorized and self.bandit_num_candidates > min(self.axis_blocks):
            # App. G: each bandit offers num_candidates distinct blocks of its 1-D axis.
            raise ValueError(
                f"--bandit_num_candidates={self.bandit_num_candidates} exceeds the "
                f"blocks of an axis: {self.axis_blocks} (1/tau_1, 1/tau_2, eps)"
            )
        selected = self.selected_params
        if not (
            isinstance(selected, tuple)
            and selected
            and set(selected) <= set(BEHAVIOUR_PARAMS)
            and len(set(selected)) == len(selected)
        ):
            raise ValueError(
                f"--selected_params={selected!r} must be distinct names among "
                f"{', '.join(BEHAVIOUR_PARAMS)}"
            )
        if self.shared_torso and self.variant != "h3":
            raise ValueError("--shared_torso needs --variant=h3 (GDI-I3 has one network)")
        self.check_best_region_learns()
        return self

    @property
    def fixed_params(self) -> dict[str, float]:
        """lambda of --fixed_behaviour, {"eta1", "eta2", "epsilon"} (Table 6 "Fixed selection")."""
        return {name: getattr(self, f"fixed_{name}") for name in BEHAVIOUR_PARAMS}

    def bandit_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `gdi.controller.GdiController` (add `seed` per actor): the
        `bandit_*` fields, and the parameters not in --selected_params held at --fixed_*."""
        held = {k: v for k, v in self.fixed_params.items() if k not in self.selected_params}
        return dict(prefixed_kwargs(self, "bandit_"), held=held)

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


# choice: the burn-in agents' CartPole sizes (common.config.BURN_IN_CARTPOLE) and a dynamics MLP
# to match; Table 6's loss, weights and gamma stay.
CARTPOLE_OVERRIDES: dict[str, Any] = dict(BURN_IN_CARTPOLE, aux_hidden=64)

# choice: MinAtar with the published agents' torso under this paper's core and heads, its batch,
# sequence, burn-in, reuse and environments (common.config.BURN_IN_MINATAR), and the warm-up at
# the same fraction of the run's updates as the table's on Atari.
MINATAR_OVERRIDES: dict[str, Any] = dict(
    BURN_IN_MINATAR,
    warmup_steps=scaled_warmup(GdiConfig.warmup_steps, GdiConfig.total_frames, ACTION_REPEAT),
)
