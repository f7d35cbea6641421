"""What every paper's config shares: documented fields, validation with flag-named errors, and the
pass-through of field groups to the objects they configure.

A config is a frozen dataclass whose field names are the absl flag names; this module imports
nothing heavy, so flags are validated in milliseconds.
"""

import dataclasses
from typing import Any, Callable

# The names configs choose from and TensorFlow modules implement, here so that a config validates
# without importing TensorFlow. The TensorFlow side keys its objects by these names, and tests
# assert both agree.

# Arithmetic of a network that only acts (common.networks.build_in_precision).
PRECISIONS = ("float32", "bfloat16")
# Keys of common.transforms.REWARD_TRANSFORMS: reward clipping and shaping by name.
REWARD_TRANSFORMS = (
    "none",
    "clip",
    "optimistic_asymmetric",
    "soft_asymmetric_code",
    "asymmetric_log",
    "fourth_root",
    "value_rescaling",
)
# common.returns.retrace: "expected" bootstraps on E_pi Q(x', .) (Munos et al., Reactor),
# "sampled" on Q(x', a') (as printed in DiCE Eq. (2), GDI Eq. (3), LBC App. B.3);
# docs/architecture.md#conventions.
RETRACE_FORMS = ("expected", "sampled")
# common.critics.dueling_q: Q from V and A ("policy_mean" is GDI Eq. (9), "none" DiCE §3.1).
Q_CENTERINGS = ("policy_mean", "policy_mean_grad", "none", "uniform_mean")
# Keys of common.networks.TORSOS; the Atari papers' convolutional ones first.
TORSOS = ("deep", "shallow", "nature", "minatar", "mlp")
ATARI_TORSOS = ("deep", "shallow", "nature")


def field(default, doc: str):
    """A dataclass field with its flag help text."""
    return dataclasses.field(default=default, metadata={"help": doc})


def check_choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"--{name}={value!r} is not one of {', '.join(map(str, allowed))}")


def check_all(config, requirement: str, ok: Callable[[Any], bool], names: tuple[str, ...]) -> None:
    """Raises naming the first of `names` whose value fails `ok`; `requirement` says what is allowed."""
    for name in names:
        if not ok(getattr(config, name)):
            raise ValueError(f"--{name}={getattr(config, name)} must be {requirement}")


def check_tuple(config, name: str, requirement: str, ok: Callable[[Any], bool]) -> None:
    values = getattr(config, name)
    if not (isinstance(values, tuple) and values and all(ok(v) for v in values)):
        raise ValueError(f"--{name}={values!r} must be a non-empty tuple of {requirement}")


def prefixed_kwargs(config, prefix: str) -> dict[str, Any]:
    """Fields named `<prefix><arg>` as keyword arguments `{arg: value}` (e.g. the bandit's)."""
    return {
        f.name.removeprefix(prefix): getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name.startswith(prefix)
    }


def atari_protocol_overrides(config) -> dict[str, Any]:
    """`common.envs.AtariProtocol` fields set by a config's `full_action_set`, `noop_max`,
    `max_episode_frames` and `sticky_action_probability` (training and evaluation share them)."""
    return dict(
        full_action_space=config.full_action_set,
        noop_max=config.noop_max,
        max_episode_frames=config.max_episode_frames,
        repeat_action_probability=config.sticky_action_probability,
    )


@dataclasses.dataclass(frozen=True)
class ProcessSettings:
    """Run fields every agent's config shares (a base class: its fields come first). They say
    how the processes run on this machine, not what the paper trains."""

    actor_niceness: int = field(19, "nice increment of actor and evaluator processes.")
    # choice: actors outpace the learner on a shared 2-core machine; niced, they use the CPU the
    # learner leaves. benchmarks/throughput.py, IMPALA deep net, oneDNN, AMD EPYC 2-core AVX2,
    # 60 s each: nice 0 / 10 / 19 -> 687 / 784 / 839 frames/s of full training.
    jit_compile: bool = field(False, "XLA-compile the train step and the actor policy.")
    # choice: benchmarks/throughput.py measures both; XLA's CPU convolutions are slower here.
    checkpoint_interval_s: float = field(300.0, "Seconds between checkpoints.")  # choice
    log_interval_s: float = field(10.0, "Seconds between console lines / summaries.")  # choice
    eval_interval_s: float = field(
        600.0, "Seconds between evaluation rounds (0: no evaluation during the run)."
    )
    # choice: the evaluator shares 2 cores with training, so it runs rarely.
    eval_round_episodes: int = field(8, "Episodes per periodic round; the last round runs all.")
    # choice: a periodic round of a paper's full evaluation would starve training on 2 cores.

    def check_process_settings(self) -> None:
        check_all(
            self,
            "> 0",
            lambda v: v > 0,
            ("checkpoint_interval_s", "log_interval_s", "eval_round_episodes"),
        )
        check_all(self, ">= 0", lambda v: v >= 0, ("eval_interval_s",))
        check_all(self, "in [0, 19]", lambda v: 0 <= v <= 19, ("actor_niceness",))


# How the burn-in learner of DiCE, GDI and LBC reads "sample reuse k" (the `reuse_mode` row of
# docs/papers/dice.md#departures-from-the-paper): each item sampled k times, or each batch trained
# on k times; and where a behaviour controller lives.
REUSE_MODES = ("replay", "repeat")
CONTROLLER_SCOPES = ("per_env", "global")
# How `common.dynamics` scores the forward-dynamics prediction (GDI, LBC).
FORWARD_LOSSES = ("half_sum_squares", "mse")


class BurnInLearnerSettings:
    """What the configs of the burn-in learner's papers (DiCE, GDI, LBC) share beyond their
    fields' defaults, which each paper cites from its own table: the checks of the fields they
    all have, and the quantities derived from them. A mixin of methods (no dataclass fields);
    a config sets the class attribute `action_repeat` (each paper's table: 4)."""

    action_repeat: int

    def check_burn_in_learner(self, schedule_source: str) -> None:
        """Raises ValueError naming the first shared field whose value is not allowed;
        `schedule_source` cites where the schedules' horizon is defined (e.g.
        "docs/papers/dice.md#departures-from-the-paper")."""
        self.check_process_settings()
        for name, allowed in (
            ("network", TORSOS),
            ("retrace_form", RETRACE_FORMS),
            ("q_centering", Q_CENTERINGS),
            ("reuse_mode", REUSE_MODES),
            ("controller_scope", CONTROLLER_SCOPES),
        ):
            check_choice(name, getattr(self, name), allowed)
        check_all(
            self,
            "> 0",
            lambda v: v > 0,
            (
                "total_frames",
                "max_episode_frames",
                "lstm_units",
                "learning_rate",
                "adam_epsilon",
                "batch_size",
                "sequence_length",
                "times_sampled",
                "replay_capacity",
                "learner_microbatches",
                "num_actors",
                "envs_per_actor",
                "params_pull_interval",
                "publish_interval",
                "clip_rho_threshold",
                "eval_episodes",
            ),
        )
        check_all(
            self,
            ">= 0",
            lambda v: v >= 0,
            (
                "noop_max",
                "head_hidden",
                "v_loss_scale",
                "q_loss_scale",
                "pi_loss_scale",
                "clip_c_threshold",
                "warmup_steps",
                "weight_decay",
                "max_grad_norm",
                "burn_in",
            ),
        )
        check_all(
            self,
            "in [0, 1]",
            lambda v: 0 <= v <= 1,
            ("sticky_action_probability", "adam_beta1", "adam_beta2"),
        )
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
                f"optimiser updates of --total_frames={self.total_frames} ({schedule_source})"
            )

    def check_best_region_learns(self) -> None:
        """--eval_policy=best_region (and DiCE's greedy, which acts on the best region's eta)
        reads the region bandits learned: they must learn."""
        if self.eval_policy in ("best_region", "greedy") and (
            self.bandit_selection != "bandits" or self.fixed_behaviour
        ):
            raise ValueError(
                f"--eval_policy={self.eval_policy} needs bandits that learn "
                "(--bandit_selection=bandits, no --fixed_behaviour); use --eval_policy=bandits"
            )

    def protocol_overrides(self) -> dict[str, Any]:
        """`common.envs.AtariProtocol` fields to replace in the paper's protocol (training and
        evaluation use the same one)."""
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
        which repeat no action: `common.envs.frames_per_step`)."""
        from common import envs  # imports ale-py: not when the flags are defined

        return self.action_repeat if envs.env_family(self.env) == "atari" else 1

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
        docs/papers/dice.md#departures-from-the-paper)."""
        new_frames_per_update = self.batch_size * self.sequence_length * self.frames_per_step
        return max(1, self.total_frames * self.times_sampled // new_frames_per_update)


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
# so each paper scales its warm-up to the same fraction of its updates (its MINATAR_OVERRIDES).
BURN_IN_MINATAR: dict[str, Any] = dict(
    network="minatar",
    total_frames=5_000_000,  # MinAtar's published learning curves run 5M frames
    learner_microbatches=1,  # the small torso's activations fit in one slice
    noop_max=0,  # MinAtar's protocol (common.envs) has no no-op starts
)


def scaled_warmup(atari_warmup: int, atari_frames: int, atari_action_repeat: int) -> int:
    """A warm-up of `atari_warmup` updates out of an Atari run of `atari_frames`, scaled to the
    same fraction of a MinAtar run of BURN_IN_MINATAR's frames with the same steps per update
    (MinAtar has no action repeat, so the MinAtar run has this many times fewer updates)."""
    atari_steps = atari_frames / atari_action_repeat
    return round(atari_warmup * BURN_IN_MINATAR["total_frames"] / atari_steps)
