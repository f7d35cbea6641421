"""Reactor configuration: one frozen dataclass, every default cited.

The paper has no hyperparameter table. Sources: §3.1-3.4 (beta-LOO, distributional Retrace,
prioritised sequence replay, architecture and optimiser), §4.1 (experiments, evaluation), App. 6.1
(tuning), 6.4 (network) and 6.5 of Gruslys et al., "The Reactor" (ICLR 2018); the values the
paper leaves out are our choices (comments say `choice:`), and every default that is not the
paper's is listed with its reason in docs/papers/reactor.md#departures-from-the-paper.
Field names are also the flag names.

This module imports nothing heavy (no TensorFlow, no gymnasium), so flags are validated in
milliseconds.
"""

import dataclasses
from typing import Any

from common.settings.config import (
    RETRACE_FORMS,
    REWARD_TRANSFORMS,
    AdamSettings,
    AtariSettings,
    DiscountSettings,
    RunSettings,
    at_least,
    atari_protocol_overrides,
    field,
    interval,
    must_be,
    non_negative,
    one_of,
    positive,
    unit_interval,
)

# The common.environments.envs protocol Reactor starts from: 84x84 grayscale, 4 action repeats (§4.1
# "the same as DQN, including 4 action repeats"), raw rewards (the learner clips, `reward_shaping`)
# and no life-loss ends (choice: §4.1 does not say). The "impala" protocol would clip in the
# environment and end episodes on life loss; `protocol_overrides` sets the single frame and the
# minimal action set.
PROTOCOL = "dice_gdi_lbc"
ACTION_REPEAT = 4  # §4.1: "including 4 action repeats"

POLICY_GRADIENTS = ("beta_loo", "tislr")
TRACE_POLICIES = ("target", "online")
REPLAY_LSTM_STATES = ("stored", "zero")
PRIORITISATIONS = ("lazy", "lazy_global", "max", "uniform")  # reactor.priorities' (tested)
TORSOS = ("table3", "minatar", "mlp")  # reactor.networks.TORSOS (a test asserts they agree)
EVAL_POLICIES = ("sample", "greedy")
# --sequence_length counts frames: a trained transition needs its bootstrap frame too.
SEQUENCE_OF_FRAMES = must_be(
    ">= 2 (frames: at least one transition and its bootstrap frame)", lambda frames: frames >= 2
)


@dataclasses.dataclass(frozen=True)
class ReactorConfig(AtariSettings, AdamSettings, DiscountSettings, RunSettings):
    """Hyperparameters and run settings; `validate()` names the offending field. The run and
    process settings' help and checks (--env, --num_actors, --jit_compile, ...) are
    `common.settings.config.RunSettings`'; the paper's defaults for them are below."""

    # --- Environment (§4.1; the rest of the protocol is `PROTOCOL`) ----------------------------
    # total_frames: `RunSettings`' 200M, §4.1's (500M for "Reactor 500m"), summed over workers
    # (footnote 4); emulator frames, not agent steps.
    frame_stack: int = field(1, "Frames per observation (the LSTM provides the history).", positive)
    # Table 3 input 84x84x1; §3.4.1 chose a recurrent network over frame stacking.
    full_action_set: bool = False  # choice: the minimal set, the A3C / Rainbow convention.
    # noop_max, max_episode_frames, sticky_action_probability: `AtariSettings`' (§4.1, choices).
    reward_shaping: str = field(
        "clip", "Reward transform of the learner's targets.", one_of(REWARD_TRANSFORMS)
    )
    # choice: clip to [-1, 1], part of the DQN pipeline §4.1 says it copies.

    # --- Network and critic (§3.2, §3.4.1, App. 6.4) -----------------------------------------
    distributional: bool = field(True, "Distributional critic; False: Reactor ND (scalar).")
    # §4.1: Reactor is distributional; "Reactor ND" is the non-distributional version.
    num_atoms: int = field(51, "Atoms of the categorical return distribution.", at_least(2))
    # choice: C51's 51 atoms (Eq. (5) leaves N open).
    v_min: float = field(-10.0, "Lowest atom.")  # choice: C51, clipped rewards
    v_max: float = field(10.0, "Highest atom.")  # choice: C51
    policy_epsilon: float = field(0.01, "Uniform mixing of the policy head.", unit_interval)
    # App. 6.4: epsilon = 0.01 "is hard-coded into the policy network".
    torso: str = field(
        "table3",
        "Torso: table3 (Table 3's convolutions), minatar (one 3x3 conv) or mlp.",
        one_of(TORSOS),
    )
    # Table 3; choice: "mlp" (one CReLU layer of 64) for CartPole's 4-number observations.

    # --- Loss (§3.1-3.2, §4.1) -----------------------------------------------------------------
    discount: float = 0.99  # choice: Atari's usual
    retrace_lambda: float = field(1.0, "lambda of the Retrace traces.", unit_interval)
    # §4.1: lambda = 1.0.
    clip_c_threshold: float = field(
        1.0, "c-bar of the traces lambda min(c-bar, rho).", non_negative
    )
    # Eq. (4): c = lambda min(1, rho).
    retrace_form: str = field(
        "expected",
        "Bootstrap of the scalar Retrace return (Reactor ND's critic and R of the policy "
        "gradient): expected E_pi Q(x', .) or sampled; Distributional Retrace is always expected.",
        one_of(RETRACE_FORMS),
    )
    # Eq. (3): delta = r + gamma E_pi Q(x_{t+1}, .) - Q(x_t, a_t) (Munos et al., 2016).
    trace_policy: str = field(
        "target", "Network whose pi makes the traces: target or online.", one_of(TRACE_POLICIES)
    )
    # choice: only the target network is evaluated at frame 33 (§3.4).
    target_update_period: int = field(
        1000, "Learner steps between target-network copies.", positive
    )
    # §4.1: T_update = 1000; counting it in learner steps is our choice (not stated).
    policy_gradient: str = field(
        "beta_loo", "Actor loss: beta_loo, or tislr (the ablation).", one_of(POLICY_GRADIENTS)
    )
    # §3.1; Fig. 3 ablates beta-LOO against ACER's TISLR.
    beta_loo_c: float = field(
        1.0, "c of beta = min(c, 1/mu(a)); 1 is plain leave-one-out.", at_least(1)
    )
    # §4.1: "beta-LOO with beta = 1", i.e. c = 1 in §3.1's beta = min(c, 1/mu(a)).
    tislr_c: float = field(10.0, "Truncation c of the TISLR ablation.", at_least(1))
    # choice: ACER's value (§3.1 gives none).
    entropy_cost: float = field(0.01, "Entropy regulariser of the policy loss.", non_negative)
    # App. 6.5: "the same entropy cost method used by A3C"; choice: A3C's 0.01.

    # --- Optimiser (§3.4.1) ----------------------------------------------------------------------
    learning_rate: float = field(5e-5, "Adam learning rate.", positive)  # §3.4.1: 5 x 10^-5
    adam_beta1: float = 0.0  # §3.4.1: "zero momentum"
    adam_beta2: float = 0.999  # choice: the library default
    adam_epsilon: float = 1e-8  # choice: the library default
    max_grad_norm: float = field(0.0, "Global gradient-norm clip (0 disables).", non_negative)
    # choice: none is mentioned.
    learner_threads: int = 1
    # choice: the step is about 2,600 small kernels (4 sequences, LSTMs of 128), which run faster
    # on one intra-op thread than handed between two: MinAtar Breakout, AMD EPYC 2-core, full
    # training 142 -> 199 frames/s (docs/guides/minatar.md#the-learners-threads).

    # --- Replay (§3.3, §3.4, App. 6.3) ---------------------------------------------------------
    batch_size: int = 4  # §3.4: "in batches of 4"
    sequence_length: int = field(
        33, "Frames per replayed sequence (32 trained transitions).", SEQUENCE_OF_FRAMES
    )
    # §3.4: "sequences of length n = 33".
    sequence_stride: int = field(1, "Steps between the starts of consecutive sequences.", positive)
    # §3.3: priorities are attached to all overlapping sequences, one key per time step.
    replay_lstm_state: str = field(
        "stored", "Initial LSTM state of a sequence: stored or zero.", one_of(REPLAY_LSTM_STATES)
    )
    # choice: the actor's state at the sequence start.
    replay_capacity: int = field(
        1_000_000, "Sequence keys the replay holds (FIFO eviction).", positive
    )
    # choice: the DQN / Rainbow 1M; the paper's per-worker size is not given.
    prioritisation: str = field(
        "lazy",
        "New keys' priority: lazy (§3.3; at the estimated mean priority of the keys not yet "
        "sampled), lazy_global (at the estimated mean priority of all keys), max (PER's "
        "largest priority written) or uniform (no prioritisation).",
        one_of(PRIORITISATIONS),
    )
    # §3.3 lazy initialisation, the variant closest to the paper's tree on Reverb
    # (benchmarks/reactor_priorities.py); App. 6.5 compares "max"; Fig. 3 ablates it.
    priority_exponent: float = field(
        1.0, "alpha: sample proportionally to priority^alpha.", unit_interval
    )
    # §3.3 samples "proportionally to" the (estimated) priority: alpha = 1.
    replay_uniform_epsilon: float = field(
        0.01, "Probability of a uniform sample.", interval("[0, 1)")
    )
    # §3.3: exists, value not given; choice: 0.01.
    priority_floor: float = field(1e-6, "Added to every priority, so none is 0.", non_negative)
    # choice: §3.3's priorities have no floor; 1e-6 keeps every key sampleable.
    importance_exponent: float = field(
        1.0, "Exponent of the importance weights 1/(N P(k)).", unit_interval
    )
    # §3.3: prioritisation "purely as variance reduction", exponent 1.
    normalise_importance_weights: bool = field(True, "Divide the weights by the batch maximum.")
    # choice: PER's convention.
    priority_estimate_rate: float = field(
        0.01, "Moving-average rate of the new-key estimate.", interval("(0, 1]")
    )
    # choice (reactor/priorities.py): the estimates new keys enter with average the last ~100
    # batches' Horvitz-Thompson sums: recent context, as the CPT's neighbouring keys are.
    min_replay_size: int = field(5_000, "Sequences in replay before the learner samples.", positive)
    # choice: not given; a few hundred sequences per environment so batches are not correlated.
    replay_error_buffer: float = field(1_000.0, "Samples the ratio limiter may drift by.", positive)
    # choice: the acting : learning ratio is held "typically" (§3.4), not exactly; 1,000 sampled
    # sequences of slack lets 10 envs insert and the learner sample without waiting on each other.
    estimate_pull_interval: int = field(
        100, "Actor steps between reads of the new-key estimate.", positive
    )
    # choice: the estimate drifts slowly (priority_estimate_rate); one read per 100 steps.
    acting_steps_per_learner_step: float = field(
        5.0, "Environment steps per learner step.", positive
    )
    # §3.4: "We typically execute 4-6 acting steps per each learning step"; choice: the middle.

    # --- Actors (§3.4, Fig. 2) -------------------------------------------------------------------
    # num_actors: `RunSettings`' 2, one per core on 2 cores.
    envs_per_actor: int = 5
    # Fig. 2: 10 actor-learner workers, one environment each = 2 x 5.
    params_pull_interval: int = 5
    # §3.4: a worker downloads the parameters before each learning step, i.e. every 5 acting
    # steps at the default --acting_steps_per_learner_step (a separate flag: it does not follow).
    publish_interval: int = 1
    # §3.4: a worker sends its update at the end of each learning step.

    # --- Evaluation (§4.1, App. 6.6) -----------------------------------------------------------
    eval_episodes: int = 200
    # §4.1: "We averaged scores over 200 episodes" (30 random no-op starts; the human starts
    # were never released: docs/papers/reactor.md#departures-from-the-paper).
    eval_policy: str = field(
        "sample", "Evaluated policy: sample from pi, or greedy on Q.", one_of(EVAL_POLICIES)
    )
    # choice: the stochastic, epsilon-mixed pi, the agent's only policy.
    # seed: `RunSettings`' 0; §4.1: "a fixed random seed across all games".

    def validate(self) -> "ReactorConfig":
        """Raises ValueError naming the first field whose value is not allowed: each field's
        check, then the rules that relate several fields."""
        super().validate()
        if self.distributional and self.clip_c_threshold != 1.0:
            raise ValueError(
                f"--clip_c_threshold={self.clip_c_threshold} needs --distributional=false: "
                "Distributional Retrace uses Eq. (4)'s min(1, rho)"
            )
        if not self.v_min < self.v_max:
            raise ValueError(f"--v_min={self.v_min} must be < --v_max={self.v_max}")
        if self.sequence_stride > self.sequence_length - 1:
            raise ValueError(
                f"--sequence_stride={self.sequence_stride} must be <= "
                f"--sequence_length - 1 = {self.sequence_length - 1}, "
                "or some transitions are never trained"
            )
        if self.replay_capacity < self.batch_size:
            raise ValueError(
                f"--replay_capacity={self.replay_capacity} must be >= "
                f"--batch_size={self.batch_size}, or the learner never samples"
            )
        return self

    def protocol_overrides(self) -> dict[str, Any]:
        """`common.environments.protocols.AtariProtocol` fields to replace in `PROTOCOLS[PROTOCOL]`
        (training and evaluation use the same protocol)."""
        return dict(atari_protocol_overrides(self), frame_stack=self.frame_stack)

    @property
    def frames_per_step(self) -> int:
        """Environment frames per agent step: the action repeat (§4.1: 4; CartPole and MinAtar:
        1)."""
        from common.environments import env_names  # imports ale-py: not when the flags are defined

        return ACTION_REPEAT if env_names.env_family(self.env) == "atari" else 1

    @property
    def frames_per_learner_step(self) -> int:
        """New environment frames per learner step (the acting : learning ratio, §3.4)."""
        return int(round(self.acting_steps_per_learner_step * self.frames_per_step))

    @property
    def num_envs(self) -> int:
        return self.num_actors * self.envs_per_actor

    @property
    def samples_per_insert(self) -> float:
        """Sequences sampled per sequence inserted: a key every --sequence_stride acting steps, a
        batch per learner step (4 / 5 = 0.8 at the defaults)."""
        inserts_per_learner_step = self.acting_steps_per_learner_step / self.sequence_stride
        return self.batch_size / inserts_per_learner_step

    @property
    def replay_ratio(self) -> float:
        """Trained transitions per acted transition (§3.4's 4-6 acting steps: 21.3-32)."""
        return self.batch_size * (self.sequence_length - 1) / self.acting_steps_per_learner_step

    @property
    def learner_steps(self) -> int:
        """Learner steps in --total_frames (§3.4's 4-6 acting steps: 8.3M-12.5M in 200M)."""
        return int(self.total_frames / self.frames_per_step / self.acting_steps_per_learner_step)


# choice: CartPole is the fast smoke test, not a paper setting: the "mlp" torso, one actor, returns
# up to 1 / (1 - 0.99) = 100 on the support (clipped rewards are 1 per step), a replay and a
# target period sized for a run of minutes, and a higher learning rate than Atari's 5e-5.
CARTPOLE_OVERRIDES: dict[str, Any] = dict(
    torso="mlp",
    v_min=0.0,
    v_max=100.0,
    total_frames=500_000,
    num_actors=1,
    envs_per_actor=8,
    replay_capacity=100_000,
    min_replay_size=500,
    target_update_period=100,
    learning_rate=5e-4,
    noop_max=0,
    max_episode_frames=500,
)

# choice: MinAtar with the published MinAtar agents' convolution under Table 3's shared layer, LSTMs
# and heads, and the paper's batch, sequence, replay and acting : learning ratio (5 agent steps per
# update, as on Atari: MinAtar has no action repeat, so a frame is an agent step).
MINATAR_OVERRIDES: dict[str, Any] = dict(
    torso="minatar",
    total_frames=5_000_000,  # MinAtar's published learning curves run 5M frames
    noop_max=0,  # MinAtar's protocol (common.environments.envs) has no no-op starts
)
