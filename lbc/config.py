"""LBC configuration: one frozen dataclass, every default cited.

Sources: Table 3 (App. I, "Hyper-Parameters for Atari Experiments"), §4.2 and App. E (the
population-based MAB, Algorithm 1), §5.1 (setup, the policy population), App. B (V-trace, Retrace),
App. H (evaluation, resources) and Table 12 (ablations) of Fan et al., "Learnable Behavior Control"
(ICLR 2023), and our choices where the paper is silent (comments say "choice"); every default
that is not the paper's is listed with its reason in docs/papers/lbc.md#departures-from-the-paper.
Field names are also the flag names.

The policy population H (§5.1.2) is `discounts` and `reward_shapings`, one entry per learned
network h_i = (gamma_i, RS_i); the behaviour mixes `bandit_num_policies` Boltzmann components
(Eq. (10)). Both are 3 in the main run; "Reducing H" (Table 12) keeps one network (h_1) under a
3-component mixture, "Reducing H and Psi" one network and one component.

One learner process trains the three networks (Algorithm 2 has one learner per network, each on
its own GPU, App. H.3): on this 2-core machine one compiled step computes each network's loss on
the same batch and updates each network with its own AdamW (its own clip norm and moments), which
is what three learners sampling one replay would do, minus the sampling noise between them.

The fields LBC shares with DiCE and GDI are declared, with their defaults (Table 3's where LBC
prints the same value as DiCE and GDI) and checks, in `common.settings.config`'s `ProcessSettings`,
`BurnInLearnerSettings` and `BanditSettings`; this module declares LBC's own fields and the
shared ones whose default is LBC's own. Every `bandit_<arg>` field is the argument `<arg>` of
`lbc.controller.LbcController`; `bandit_kwargs()` passes them through. This module imports
nothing heavy (no TensorFlow, no gymnasium), so flags are validated in milliseconds.
"""

import dataclasses
import math
from typing import Any, ClassVar

from common.settings.burn_in_settings import (
    BURN_IN_CARTPOLE,
    BURN_IN_MINATAR,
    BanditSettings,
    BurnInLearnerSettings,
    DynamicsSettings,
    scaled_warmup,
)
from common.settings.config import (
    FORWARD_LOSSES,
    REWARD_TRANSFORMS,
    field,
    one_of,
    ordered_pair,
    positive,
    tuple_of,
)

# The common.environments.envs protocol: 84x84 grayscale, 4 action repeats, 4 stacked frames, full
# action set, life information not allowed, no reward clipping (Table 3); the fields below set the
# rest.
PROTOCOL = "dice_gdi_lbc"
ACTION_REPEAT = 4  # Table 3: "Num. Action Repeats 4"

PG_ADVANTAGES = ("vtrace", "retrace")
EVAL_POLICIES = ("bandits", "best_arm", "training_episodes")
BANDIT_ETA_SPACES = ("log1p", "linear")
BANDIT_PICKS = ("top", "softmax")
BANDIT_UCB_SUMS = ("all", "others")


@dataclasses.dataclass(frozen=True)
class LbcConfig(DynamicsSettings, BanditSettings, BurnInLearnerSettings):
    """Hyperparameters and run settings; `validate()` names the offending field. The fields LBC
    shares with DiCE and GDI, and their Table 3 defaults, are `common.settings.config`'s
    `ProcessSettings`, `BurnInLearnerSettings` and `BanditSettings`; below are LBC's own."""

    action_repeat: ClassVar[int] = ACTION_REPEAT
    schedule_source: ClassVar[str] = "docs/papers/lbc.md#departures-from-the-paper"

    # --- Environment (Table 3; the rest of the protocol is `PROTOCOL`) -------------------------
    total_frames: int = field(1_000_000_000)  # Abstract, §1: "within 1B training frames".

    # --- Policy population H (§5.1.2, Table 3) -------------------------------------------------
    discounts: tuple[float, ...] = field(
        (0.997, 0.999, 0.99),
        "gamma_i of each learned network.",
        tuple_of("numbers in [0, 1]", lambda v: isinstance(v, (int, float)) and 0 <= v <= 1),
    )
    # Table 3 gamma_1..gamma_3
    reward_shapings: tuple[str, ...] = field(
        ("value_rescaling", "asymmetric_log", "optimistic_asymmetric"),
        "RS_i of each learned network (common.equations.transforms names).",
        tuple_of(f"names in {', '.join(REWARD_TRANSFORMS)}", lambda v: v in REWARD_TRANSFORMS),
    )
    # Table 3 RS_1 = sign(x)(sqrt(|x|+1) - 1) + 0.001 x, RS_2 = log scaling,
    # RS_3 = 0.3 min(tanh x, 0) + 5 max(tanh x, 0).

    # --- Network (Table 3, App. L) -------------------------------------------------------------
    network: str = field(
        "nature", "Torso: nature (Agent57/R2D2), deep (IMPALA), shallow, minatar or mlp."
    )
    # choice: App. L "the same as that of Agent57", the Nature-DQN torso.
    head_hidden: int = field(512)
    # choice: Agent57's dueling streams, Dense 512 - ReLU - Dense.
    aux_hidden: int = 512  # choice: MLP(... -> 512 -> ReLU -> ...), the head width.
    aux_forward_loss: str = field(
        "mse",
        "Forward-dynamics score: mse (mean over the embedding's features) or half_sum_squares "
        "(GDI's 1/2 squared norm).",
        one_of(FORWARD_LOSSES),
    )
    # choice: MSE against stop_grad(e_{t+1}); the GDI package uses 1/2 ||.||^2 (half_sum_squares).
    # The dynamics tasks' weights (Table 3): `DynamicsSettings`.

    # --- Loss of each learner (Table 3, §5.1.2, App. B) -----------------------------------------
    q_loss_scale: float = field(5.0)  # Table 3
    pi_loss_scale: float = field(5.0)  # Table 3
    q_centering: str = field("policy_mean_grad")
    # choice: GDI's Eqs. (9), (11); §5.1.2 only says A = Q - V of "the dueling
    # network structure (Wang et al., 2016)", whose centring is part of the network and trained
    # through. Measured on CartPole (docs/papers/lbc.md#the-centrings-gradient-measured): no
    # worse than pi under stop-gradient.
    pg_advantage: str = field(
        "vtrace", "Policy-gradient advantage: vtrace or retrace.", one_of(PG_ADVANTAGES)
    )
    # choice: rho (r + gamma v_{t+1} - V), as DiCE and GDI.

    # --- Optimiser of each learner (Table 3) ---------------------------------------------------
    learning_rate: float = field(5.3e-4)  # Table 3 "Learning Rate 5.3e-4".

    # --- Replay (Table 3; SampleK, docs/architecture.md#replay-patterns-commonreplaypatternspy)
    # -----
    learner_microbatches: int = field(1)
    # choice: exactly the same gradient in 1/k of the activation memory
    # (common.burn_in.burn_in_learning); k = 1: a Table 3 step of the three Nature-torso networks
    # peaked at 3.9 GiB on the 24 GiB CPU machine (docs/guides/lbc.md).
    replay_capacity: int = field(10_000)
    # choice: no size printed; with reuse 2 and FIFO the table behaves like a queue.

    # --- Actors and behaviour (Algorithms 1-2, Eq. (10), App. E) -------------------------------
    bandit_num_policies: int = field(
        3, "Mixture components N of psi = (tau_1..N, omega_1..N).", positive
    )
    # §5.1.2: N = 3; Table 12 "Reducing H and Psi" uses 1.
    bandit_eta_space: str = field(
        "log1p", "Bandit coordinate of tau_i: log1p or linear.", one_of(BANDIT_ETA_SPACES)
    )
    # choice: x = log(1 + tau_i) on [0, 4] in 20 arms, GDI's coordinate.
    bandit_eta_max: float = field(
        math.exp(4.0), "tau_i range: [0, this] (linear), or x = log(1 + tau_i) in [0, log this]."
    )
    # Table 3 "Range of tau_i [0, exp 4]" (LBC's tau_i multiplies the logits: an eta).
    bandit_eta_acc: float = field(0.2, "Arm width of tau_i.", positive)
    # Table 3 "Discrete Accuracy 0.2".
    bandit_omega_acc: float = field(0.1, "Arm width of omega_i in [0, 1].", positive)
    # Table 3 "Range of omega_i [0, 1]", "Discrete Accuracy of omega_i 0.1".
    bandit_factorized: bool = field(True, "One population per coordinate, or one joint grid.")
    # choice: the joint grid has 8,000,000 arms.
    bandit_top_d: int = field(4, "Arms each bandit votes for.", positive)
    # Table 3 "D of Top-D 4".
    bandit_ucb_range: tuple[float, float] = field(
        (0.5, 1.5),
        "Each bandit's UCB c is uniform in this range ((0, 0): w/o UCB).",
        ordered_pair(),
    )
    # Table 3 "UCB c Uniformly sampled from [0.5, 1.5]"; App. K.3 "without the UCB item".
    bandit_replace_every: int = field(50, "Episodes between replacements of one bandit.", positive)
    # Table 3 "Replacement Interval T_replace 50".
    bandit_pick: str = field(
        "top", "top: Algorithm 1's top-D vote; softmax: §4.2's sampling.", one_of(BANDIT_PICKS)
    )
    # choice: Algorithm 1, which Table 3 configures.
    bandit_standardise: bool = field(True, "Z-score the arm values (Eq. (25)) or not (Eq. (24)).")
    # App. E.3: "Z-score normalization" is used in practice.
    bandit_ucb_sum: str = field(
        "all", "UCB count sum over all arms (Eqs. (24)-(25)) or others.", one_of(BANDIT_UCB_SUMS)
    )
    # choice: Eqs. (24)-(25); §4.2 prints the sum over j != k (docs/papers/lbc.md#errata).

    # --- Evaluation (§5.1.1, App. H.2) ---------------------------------------------------------
    eval_policy: str = field(
        "bandits",
        "bandits: a separate evaluator acting as the actors do; best_arm: psi from the arms "
        "actor 0's bandits rate best, frozen; training_episodes: no evaluator, the training "
        "games' returns are the report.",
        one_of(EVAL_POLICIES),
    )
    # §5.1.1 "a separate evaluation process"; App. H.2 "the population's average score from
    # model training": the MAB-driven behaviour (training_episodes reports those games).
    # best_arm (choice, an option): what the learned networks score with the psi the bandits
    # rate best (no UCB term), as DiCE and GDI evaluate their best region.

    def validate(self) -> "LbcConfig":
        """Raises ValueError naming the first field whose value is not allowed: each field's
        check, the shared rules (`BurnInLearnerSettings.validate`), then LBC's own."""
        super().validate()
        if len(self.reward_shapings) != len(self.discounts):
            raise ValueError(
                f"--reward_shapings={self.reward_shapings!r} needs one entry per "
                f"--discounts={self.discounts!r} (one per network)"
            )
        if len(self.discounts) not in (1, self.bandit_num_policies):
            raise ValueError(
                f"--discounts={self.discounts!r} must have 1 entry (Reducing H) or "
                f"--bandit_num_policies={self.bandit_num_policies}"
            )
        if self.bandit_factorized and self.bandit_top_d > min(self.axis_arms):
            # Algorithm 1: each bandit votes for top_d distinct arms of its 1-D axis.
            raise ValueError(
                f"--bandit_top_d={self.bandit_top_d} exceeds the arms of an axis: "
                f"{self.axis_arms} (tau_i, omega_i)"
            )
        return self

    @property
    def axis_arms(self) -> tuple[int, int]:
        """Arms of one tau_i axis and one omega_i axis, as LbcController cuts them (Table 3 in
        log1p space: 20 and 10; linear: 273 and 10)."""
        tau_hi = (
            math.log(self.bandit_eta_max)
            if self.bandit_eta_space == "log1p"
            else (self.bandit_eta_max)
        )
        return (
            math.ceil(tau_hi / self.bandit_eta_acc - 1e-9),
            math.ceil(1 / self.bandit_omega_acc - 1e-9),
        )

    @property
    def num_networks(self) -> int:
        """Learned networks h_i (3; 1 in the Reducing H ablations)."""
        return len(self.discounts)


# choice: the burn-in agents' CartPole sizes (common.settings.burn_in_settings.BURN_IN_CARTPOLE),
# with heads and a dynamics MLP to match. The population keeps Table 3's h_i = (gamma_i, RS_i), so
# that the Reducing H ablations (h_1 of Table 3) train a member of the same population. Measured
# (docs/guides/lbc.md): --learning_rate=3e-4 avoids the falls to one-action play of long runs at
# 1e-3, but rises more slowly; the default stays the shared 1e-3 that docs/guides/lbc.md's CartPole
# tables used.
CARTPOLE_OVERRIDES: dict[str, Any] = dict(BURN_IN_CARTPOLE, head_hidden=64, aux_hidden=64)

# choice: MinAtar with the published agents' torso under this paper's core and heads, its batch,
# sequence, burn-in, reuse and environments (common.settings.burn_in_settings.BURN_IN_MINATAR), and
# the warm-up at the same share of the run's updates as the table's on Atari, whatever the run's
# budget.
MINATAR_OVERRIDES: dict[str, Any] = dict(
    BURN_IN_MINATAR,
    warmup_steps=scaled_warmup(LbcConfig, ACTION_REPEAT),
)
