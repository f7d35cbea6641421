"""The parts of DiCE's, GDI's and LBC's configs (the burn-in family): `BurnInLearnerSettings`
(their environment, LSTM agent, loss, AdamW, sample-k replay and actors), `BanditSettings` (what
their behaviour controllers share), their CartPole and MinAtar overrides, and the MinAtar warm-up
at the Atari share of a run's updates. Fields are made as `common.settings.config` makes them."""

import dataclasses
from typing import Any, ClassVar, Self

from common.settings.config import (
    BANDIT_SELECTIONS,
    BANDIT_SPACES,
    CONTROLLER_SCOPES,
    Q_CENTERINGS,
    RETRACE_FORMS,
    REUSE_MODES,
    TORSOS,
    AdamSettings,
    AtariSettings,
    Config,
    Derived,
    RunSettings,
    atari_protocol_overrides,
    field,
    non_negative,
    one_of,
    positive,
    prefixed_kwargs,
    tuple_of,
)


@dataclasses.dataclass(frozen=True)
class BurnInLearnerSettings(AtariSettings, AdamSettings, RunSettings):
    """The fields DiCE, GDI and LBC share besides their behaviour controllers' (`BanditSettings`):
    the environment's knobs, the LSTM agent, its loss weights, AdamW, the sample-k replay of
    burn-in sequences and the actors, and the quantities derived from them; with the process
    settings, whose `jit_compile` the learner's step reads (`common.burn_in.burn_in_learning`).

    A default the three papers print alike cites each paper's table; where they differ, it is
    the value of the papers cited, and the others re-declare theirs. A config sets the class
    attributes `action_repeat` (each paper's table: 4) and `schedule_source` (where its
    schedules' horizon is defined, cited by the --warmup_steps error)."""

    action_repeat: ClassVar[int]
    schedule_source: ClassVar[str]

    # --- Environment (the rest of the protocol is the paper's `PROTOCOL`) ----------------------
    # total_frames: `RunSettings`' 200M, DiCE Table 5 "Num. States 200M" read as frames, as its
    # Tables 2 and 3 print "Num. Frames 200M" (docs/papers/dice.md#errata); GDI Table 6 "Num.
    # Frames 200M". LBC: its own.
    # The Atari protocol's knobs: `AtariSettings`.

    # --- Network ---------------------------------------------------------------------------------
    network: str = field(
        "deep", "Torso: deep (IMPALA, 15 conv), shallow, nature, minatar or mlp.", one_of(TORSOS)
    )
    # DiCE Table 5, GDI Table 6 "Backbone IMPALA,deep". LBC: its own.
    lstm_units: int = field(256, "LSTM core size.", positive)
    # DiCE Table 5, GDI Table 6, LBC Table 3 "LSTM Units 256".
    head_hidden: int = field(
        0, "Hidden units of the A and V heads (0: linear heads).", non_negative
    )
    # choice (DiCE and GDI silent): linear heads, as IMPALA's. LBC: its own.

    # --- Loss (DiCE Eqs. (2)-(5) and (8); GDI App. B; LBC App. B) --------------------------------
    v_loss_scale: float = field(1.0, "xi: weight of the V-trace value loss.", non_negative)
    # DiCE Table 5, GDI Table 6, LBC Table 3.
    q_loss_scale: float = field(10.0, "alpha: weight of the Retrace Q loss.", non_negative)
    # DiCE Table 5, GDI Table 6. LBC: its own.
    pi_loss_scale: float = field(10.0, "beta: weight of the policy loss.", non_negative)
    # DiCE Table 5 (on its tau-scaled loss, Eq. (8)), GDI Table 6. LBC: its own.
    clip_rho_threshold: float = field(1.05, "rho-bar of V-trace and the policy gradient.", positive)
    # DiCE Table 5, GDI Table 6, LBC Table 3: "Importance Sampling Clip rho-bar 1.05".
    clip_c_threshold: float = field(1.05, "c-bar of V-trace and Retrace.", non_negative)
    # DiCE Table 5, GDI Table 6, LBC Table 3.
    retrace_form: str = field(
        "sampled",
        "Retrace bootstrap: sampled Q(x', a') or expected.",
        one_of(RETRACE_FORMS),
    )
    # DiCE Eq. (2), GDI Eq. (3) and LBC App. B.3 print Q(s_{t+1}, a_{t+1}): sampled; "expected"
    # is the E_pi Q(s_{t+1}, .) of Munos et al., whom DiCE cites (docs/papers/dice.md#errata).
    q_centering: str = field(
        "policy_mean",
        "Q = V + A - E_pi[A] with pi under stop-gradient (policy_mean) or with the gradient "
        "through pi (policy_mean_grad), V + A (none) or V + A - mean A (uniform_mean).",
        one_of(Q_CENTERINGS),
    )
    # GDI Eqs. (9), (11): A-bar = A - E_pi[A], Q = A-bar + V; choice (GDI silent on the gradient
    # through pi): stopped, so the Q loss moves A only through A itself (docs/papers/gdi.md).
    # DiCE, LBC: their own.

    # --- Optimiser: AdamW (common.burn_in.burn_in_learning.make_optimizer)
    # ---------------------------
    learning_rate: float = field(5e-4, "Peak learning rate, annealed linearly to 0.", positive)
    # DiCE Table 5, GDI Table 6. LBC: its own.
    warmup_steps: int = field(4000, "Learner steps of linear warm-up from 0.", non_negative)
    # DiCE Table 5, GDI Table 6, LBC Table 3.
    # AdamW's betas and epsilon: `AdamSettings`.
    weight_decay: float = field(0.01, "AdamW weight decay, annealed linearly to 0.", non_negative)
    # DiCE Table 5, GDI Table 6, LBC Table 3.
    max_grad_norm: float = field(50.0, "Global gradient-norm clip (0 disables).", non_negative)
    # DiCE Table 5, GDI Table 6, LBC Table 3: "AdamW Clip Norm 50.0".

    # --- Replay (docs/architecture.md#replay-patterns-commonreplaypatternspy)
    # ------------------------
    batch_size: int = 64
    # DiCE Table 5, GDI Table 6, LBC Table 3.
    burn_in: int = field(
        40, "Burn-in steps from the stored LSTM state (no gradient).", non_negative
    )
    # DiCE Table 5, GDI Table 6, LBC Table 3: "Burn-in 40", "Burn-in Stored Recurrent State
    # Yes".
    sequence_length: int = field(
        80, "Trained steps per sequence (plus 1 bootstrap step).", positive
    )
    # DiCE Table 5, GDI Table 6, LBC Table 3: "Seq-length 80", "Bootstrap Yes".
    times_sampled: int = field(2, "Times each sequence is trained on (by each network).", positive)
    # DiCE Table 5 "Sample Reuse 2", §4.1 "We train each sample twice"; GDI Table 6 "Replay 2",
    # §4.1 "we train each sample twice"; LBC Table 3 "Replay 2", App. H.1 "twice train each
    # sample" (each network, per learner).
    reuse_mode: str = field(
        "replay",
        "replay: each item sampled k times; repeat: k steps/batch.",
        one_of(REUSE_MODES),
    )
    # choice (the papers are silent on the sampler): Reverb max_times_sampled = k, uniform
    # sampling; `repeat` is the other reading of "twice". LBC: one table, as its one learner
    # step trains all networks on each batch (lbc/config.py's docstring).
    learner_microbatches: int = field(
        4, "Slices of each batch the gradient is computed in.", positive
    )
    # choice: backprop through the deep torso keeps ~2.5 MB of activations per frame, ~13 GB
    # for 64 x 81 trained frames on a CPU (GDI-H3: two torsos); 4 slices of 16 sequences give
    # exactly the same gradient (common.burn_in.burn_in_learning) in about a quarter of the memory,
    # and with --trim_padding each slice of shorter games unrolls fewer positions. 1 for a big GPU.
    # LBC: its own.
    trim_padding: bool = field(
        True, "Cut the trained positions that are padding in every item of a batch."
    )
    # choice (an exact shortcut, not a change of the loss): positions after every item's last
    # real step feed nothing but masked terms, so the learner drops them, in quarters of
    # sequence_length so that a batch has one of four shapes (common/replay/replay.py,
    # trim_trailing_padding). On MinAtar's early 10-step games most of an item is padding.
    replay_capacity: int = field(8192, "Sequences the replay table holds.", positive)
    # choice (not printed): a few thousand items; the data is near on-policy, each item lives
    # for two samples. LBC: its own.

    # --- Actors --------------------------------------------------------------------------------
    envs_per_actor: int = 80
    # DiCE Table 5, GDI Table 6 "Num. Environments 160" = 2 x 80; LBC: choice (not printed), the
    # same 160.
    params_pull_interval: int = 64
    # DiCE Table 5, GDI Table 6 "Actor Pull Model Every n Steps 64"; LBC Table 3 "... Every
    # d_pull Steps 64".
    publish_interval: int = 25
    # DiCE Table 5, GDI Table 6 "Learner Push Model Every n Steps 25"; LBC Table 3 "... Every
    # d_push Steps 25".

    # --- Evaluation and seed -------------------------------------------------------------------
    eval_episodes: int = 32
    # GDI §4.1: "undiscounted episode returns averaged over 32 environments with different
    # seeds"; LBC §5.1.1: "a windowed mean over 32 episodes"; DiCE: choice (not stated,
    # docs/papers/dice.md#departures-from-the-paper), the count GDI averages for the same agent.

    def validate(self) -> Self:
        """The fields' checks, then the rules that relate the learner's fields."""
        super().validate()
        if self.replay_capacity < self.batch_size:
            raise ValueError(
                f"--replay_capacity={self.replay_capacity} must be >= "
                f"--batch_size={self.batch_size}, or the learner never samples"
            )
        if self.batch_size % self.learner_microbatches:
            raise ValueError(
                f"--learner_microbatches={self.learner_microbatches} must divide "
                f"--batch_size={self.batch_size}"
            )
        if self.warmup_steps >= self.gradient_updates:
            raise ValueError(
                f"--warmup_steps={self.warmup_steps} must be < the {self.gradient_updates} "
                f"optimiser updates of --total_frames={self.total_frames} "
                f"({self.schedule_source})"
            )
        return self

    def protocol_overrides(self) -> dict[str, Any]:
        """`common.environments.protocols.AtariProtocol` fields to replace in the paper's protocol
        (training and evaluation use the same one)."""
        return atari_protocol_overrides(self)

    @property
    def num_envs(self) -> int:
        return self.num_actors * self.envs_per_actor

    @property
    def item_length(self) -> int:
        """Steps per replay item: burn-in + trained steps + 1 bootstrap step (DiCE Table 5's
        "Burn-in", "Seq-length" and "Bootstrap")."""
        return self.burn_in + self.sequence_length + 1

    @property
    def frames_per_step(self) -> int:
        """Environment frames per agent step: the action repeats (1 on CartPole and MinAtar,
        which repeat no action: `common.environments.protocols.frames_per_step`)."""
        from common.environments import env_names  # imports ale-py: not when the flags are defined

        return self.action_repeat if env_names.env_family(self.env) == "atari" else 1

    @property
    def frames_per_learner_step(self) -> int:
        """New environment frames per learner step (64 x 80 x 4 / 2 = 10,240 for DiCE Table 5).
        A batch trains batch x length steps; with reuse_mode=replay each step is in
        `times_sampled` batches, with repeat a batch is new data trained `times_sampled` times in
        one step."""
        frames = self.batch_size * self.sequence_length * self.frames_per_step
        return frames // self.times_sampled if self.reuse_mode == "replay" else frames

    @property
    def gradient_updates(self) -> int:
        """Optimiser updates in --total_frames: the horizon of the lr / weight-decay schedules
        (200M / 4 x 2 / (64 x 80) = 19,531 for DiCE Table 5;
        docs/papers/dice.md#departures-from-the-paper). Each update trains a batch's frames, and
        each frame is trained `times_sampled` times in either reuse mode."""
        trained_frames = self.batch_size * self.sequence_length * self.frames_per_step
        return max(1, self.total_frames * self.times_sampled // trained_frames)


@dataclasses.dataclass(frozen=True)
class BanditSettings(Config):
    """The behaviour-controller fields DiCE, GDI and LBC share (each paper's controller.py);
    every `bandit_<arg>` field is the argument `<arg>` of the paper's controller, and
    `bandit_kwargs()` passes them through."""

    controller_scope: str = field(
        "per_env", "One bandit ensemble per env, or one global.", one_of(CONTROLLER_SCOPES)
    )
    # DiCE Algorithm 1 and GDI Algorithms 2-3 initialise the bandits inside each actor, which
    # steps one environment; LBC's Algorithm 1 is "Actor-Wise" (choice: each environment is one
    # of the paper's actors).
    bandit_eta_max: float = field(
        50.0, "Upper end of the search range of the inverse temperatures 1/tau.", positive
    )
    # DiCE Table 5 "Bandit Search Range for 1/tau [0.0, 50.0]"; GDI Table 6 "... for 1/tau_1 (and
    # 1/tau_2) [0.0, 50.0]". LBC: its own.
    bandit_num_bandits: int = field(7, "Bandits in each ensemble's vote.", positive)
    # DiCE Table 5, GDI Table 6 "Num. Bandits 7"; LBC Table 3 "Population Num. 7".
    bandit_selection: str = field(
        "bandits",
        "bandits; uniform: the behaviour parameters uniform on their search ranges (the papers' "
        "Random Selection); uniform_coordinate: the bandit coordinates uniform (DiCE's "
        "`random` ablation).",
        one_of(BANDIT_SELECTIONS),
    )
    # DiCE §3.3, §4.3 (`random` keeps the initial, never-updated Omega: uniform on the box); GDI
    # App. G, Table 20 "Random Selection": P over Lambda uniform, E the identity; LBC Table 12
    # "Random Selection", "the same behavior space as our main algorithm". Uniform in the
    # parameters over the search ranges: log(1 + 1/tau) drawn uniformly would put the median
    # 1/tau near 6, not 25.

    def bandit_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the paper's controller (add `seed` per actor)."""
        return prefixed_kwargs(self, "bandit_")

    def check_bandits_learn(self, eval_policy: str, fixed_behaviour: bool) -> None:
        """An --eval_policy that reads the region the bandits learned (DiCE's best_region and
        greedy, GDI's best_region) needs bandits that learn."""
        if self.bandit_selection != "bandits" or fixed_behaviour:
            raise ValueError(
                f"--eval_policy={eval_policy} needs bandits that learn "
                "(--bandit_selection=bandits, no --fixed_behaviour); use --eval_policy=bandits"
            )


@dataclasses.dataclass(frozen=True)
class BanditEnsembleSettings(Config):
    """What DiCE's and GDI's ensembles of sliding-window UCB bandits share (Agent57's meta-
    controller, as both papers print it); LBC's populations are its own. Read with the other
    `bandit_` fields by `BanditSettings.bandit_kwargs`."""

    bandit_space: str = field(
        "log1p", "Bandit coordinate: log1p, inv_tau or exp_literal.", one_of(BANDIT_SPACES)
    )
    # choice: x = log(1 + 1/tau) over the tables' range of 1/tau (DiCE App. A; GDI App. G, where
    # App. G and Table 6 disagree: docs/papers/gdi.md#errata).
    bandit_num_candidates: int = field(7, "Candidates each bandit offers.", positive)
    # DiCE Table 5 "Num. Bandit Candidates 7". GDI: its own.
    bandit_ucb_scale: float = field(1.0, "UCB coefficient c.", non_negative)
    # DiCE Table 5, GDI Table 6 "Bandit UCB Scaling".
    bandit_learning_rates: tuple[float, ...] = field(
        (0.05, 0.1, 0.2),
        "Each bandit's learning rate is drawn from these.",
        tuple_of("in (0, 1]", lambda v: 0 < v <= 1),
    )
    # DiCE Table 5, GDI Table 6 "Bandit Learning Rate Uniform([0.05, 0.1, 0.2])".


@dataclasses.dataclass(frozen=True)
class DynamicsSettings(Config):
    """GDI's and LBC's auxiliary forward- and inverse-dynamics tasks
    (`common.burn_in.dynamics`): their weights and the MLPs' width."""

    aux_forward_weight: float = field(
        1.0, "Weight of the forward-dynamics auxiliary loss.", non_negative
    )
    # GDI Table 6, LBC Table 3 "Auxiliary Forward Dynamic Task Yes"; choice (no weight printed):
    # 1.
    aux_inverse_weight: float = field(
        1.0, "Weight of the inverse-dynamics auxiliary loss.", non_negative
    )
    # GDI Table 6, LBC Table 3 "Auxiliary Inverse Dynamic Task Yes"; choice (no weight printed):
    # 1.
    aux_hidden: int = field(256, "Hidden units of the forward and inverse dynamics MLPs.", positive)
    # choice (no size printed): GDI's torso width, 256. LBC: its own.


# choice: CartPole, to check the burn-in agents end to end in minutes on a CPU: an MLP torso, a
# smaller LSTM and batch, shorter sequences, one actor; each paper's loss, weights and gammas stay
# its table's. A paper adds its own entries (e.g. its dynamics MLP's size).
BURN_IN_CARTPOLE: dict[str, Any] = dict(
    network="mlp",
    lstm_units=64,
    total_frames=400_000,
    learning_rate=1e-3,
    warmup_steps=20,
    batch_size=32,
    learner_microbatches=1,
    burn_in=10,
    sequence_length=20,
    replay_capacity=1024,
    num_actors=1,
    envs_per_actor=16,
    params_pull_interval=16,
    publish_interval=5,
    noop_max=0,
    max_episode_frames=500,
    eval_episodes=16,
)

# choice: MinAtar (Young & Tian 2019) at its published budget, with the published agents' torso
# under each paper's own LSTM core and heads. MinAtar has no action repeat (a frame is an agent
# step), so keeping each paper's batch, sequence length, burn-in, sample reuse and environment
# count keeps its Atari ratios in agent steps: 64 x 80 / 2 = 2,560 new steps per update, burn-in
# : length = 1 : 2, each item trained twice, 160 environments. 5M frames are then 1,953 updates,
# so each paper's warm-up takes the same share of a run's updates as its table's on Atari
# (its MINATAR_OVERRIDES, a `WarmupShare`): 400 of 1,953 for DiCE and GDI at 5M frames, and the
# same share of a shorter run's.
BURN_IN_MINATAR: dict[str, Any] = dict(
    network="minatar",
    total_frames=5_000_000,  # MinAtar's published learning curves run 5M frames
    # choice: the small torso's activations fit in one slice, and the learner cuts that slice in
    # two by length where it pays (common.burn_in.burn_in_learning.split_point); 4 equal slices
    # train full items at 0.63x the speed of 1 (docs/guides/minatar.md)
    learner_microbatches=1,
    noop_max=0,  # MinAtar's protocol (common.environments.envs) has no no-op starts
)


@dataclasses.dataclass(frozen=True)
class WarmupShare(Derived):
    """A `warmup_steps` default: `share` of the run's own optimiser updates (`gradient_updates`,
    which follow its --total_frames), rounded."""

    share: float

    def resolve(self, config: Any) -> int:
        return round(self.share * config.gradient_updates)


def scaled_warmup(atari: type[BurnInLearnerSettings], atari_action_repeat: int) -> WarmupShare:
    """The share of its run's updates that the warm-up of the burn-in config class `atari`
    takes at its defaults (its table's Atari run: DiCE 4,000 of 200M / 4 x 2 / (64 x 80) =
    19,531 updates), for a MinAtar run to keep at any budget."""
    updates = (
        atari.total_frames
        * atari.times_sampled
        / (atari.batch_size * atari.sequence_length * atari_action_repeat)
    )
    return WarmupShare(atari.warmup_steps / updates)
