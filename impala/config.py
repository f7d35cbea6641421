"""IMPALA configuration: one frozen dataclass, every default cited.

Sources: Table G.1 (Atari hyperparameters), Table D.3 (DeepMind Lab fixed hyperparameters),
§5.2.2 (off-policy corrections), §5.3.2 / App. G (Atari evaluation protocol) of Espeholt et al.
(2018), and our choices where the paper is silent (comments say "choice:"); every default that
is not the paper's is listed with its reason in
docs/papers/impala.md#departures-from-the-paper. Field names are also the `impala.main` flag
names.

This module imports nothing heavy (no TensorFlow), so flags are validated in milliseconds.
"""

import dataclasses
import typing
from typing import Any

from common.settings.config import (
    PRECISIONS,
    TORSOS,
    DiscountSettings,
    RunSettings,
    field,
    interval,
    non_negative,
    one_of,
    positive,
    unit_interval,
)

CORRECTIONS = ("vtrace", "no_correction", "eps_correction", "one_step_is")
PG_Q_ESTIMATES = ("vtrace", "baseline")
REPLAYS = ("queue", "queue_with_replay", "prioritized", "sample_k")
OPTIMIZERS = ("rmsprop_tf1", "rmsprop_keras")
EVAL_POLICIES = ("sample", "greedy")


@dataclasses.dataclass(frozen=True)
class ImpalaConfig(DiscountSettings, RunSettings):
    """Hyperparameters and run settings; `validate()` names the offending field."""

    # --- Environment and network -----------------------------------------------------------
    network: str = field(
        "deep",
        "Torso: deep (15-conv residual), shallow (A3C 2-conv), nature (DQN 3-conv), minatar, mlp.",
        one_of(TORSOS),
    )
    # Table 4: the deep experts are the paper's best Atari agents. §5.3.2's "shallow" Atari net
    # ("three convolutional layers") is ambiguous (docs/papers/impala.md#errata): both readings
    # are offered.
    use_lstm: bool = field(False, "Put an LSTM core before the heads.")
    # App. G: "All agents trained on Atari are equipped only with a feed forward network".
    lstm_units: int = field(256, "LSTM size when --use_lstm.", positive)  # Fig. 3
    full_action_set: bool = field(False, "All 18 Atari actions, not the game's minimal set.")
    # App. G: "experts use game-specific action sets"; only the multi-task agent uses 18.

    # --- Loss (Table G.1 unless noted) -------------------------------------------------------
    unroll_length: int = field(20, "Unroll length n (n steps + 1 bootstrap observation).", positive)
    # Table G.1: unroll length 20 (Table D.3: 100 on DMLab).
    batch_size: int = 32  # Table G.1
    discount: float = 0.99  # Table G.1 (Table D.3 also 0.99)
    baseline_cost: float = field(
        0.5, "Scale of the baseline loss sum 0.5*(v_s - V)^2.", non_negative
    )
    # Table G.1, D.3; the 1/2 is ours (docs/papers/impala.md#departures-from-the-paper)
    entropy_cost: float = field(0.01, "Entropy regulariser.", non_negative)  # Table G.1
    correction: str = field(
        "vtrace",
        "Off-policy correction: vtrace, no_correction, eps_correction, one_step_is.",
        one_of(CORRECTIONS),
    )
    # §4 / §5.2.2: V-trace is the paper's method; the others are the §5.2.2 ablation baselines.
    clip_rho_threshold: float = field(1.0, "rho-bar (fixed point of V-trace).", positive)  # §5.2.2
    clip_pg_rho_threshold: float = field(1.0, "rho-bar of the policy gradient.", positive)
    # §4.2, §5.2.2
    clip_c_threshold: float = field(1.0, "c-bar (trace cutting).", non_negative)  # §5.2.2
    vtrace_lambda: float = field(1.0, "lambda of Remark 2.", unit_interval)
    # unused by the paper: Eq. (1) is 1
    correction_epsilon: float = field(
        1e-6, "epsilon of eps_correction: log(pi(a) + epsilon).", non_negative
    )
    # §5.2.2
    pg_q_estimate: str = field(
        "vtrace",
        "q_s in the policy gradient: vtrace (r + g v_{s+1}) or baseline (r + g V).",
        one_of(PG_Q_ESTIMATES),
    )
    # §4.2 Eq. (4) uses v_{s+1}; App. E.3 tried V(x_{s+1}) and found it worse.

    # --- Optimiser (Table G.1 unless noted) --------------------------------------------------
    optimizer: str = field(
        "rmsprop_tf1",
        "rmsprop_tf1 (TF1 RMSPropOptimizer: ms starts at 1) or rmsprop_keras.",
        one_of(OPTIMIZERS),
    )
    # choice: TF1's RMSPropOptimizer, which the original ran; Table D.1's epsilon range assumes it
    # (docs/papers/impala.md#departures-from-the-paper).
    learning_rate: float = field(6e-4, "Initial learning rate.", positive)  # Table G.1
    lr_anneal: bool = field(True, "Anneal the learning rate linearly to 0 over --total_frames.")
    # Table G.1: "Anneal linearly to 0 from beginning to end of training".
    rmsprop_decay: float = field(0.99, "RMSProp decay of the mean square.", unit_interval)
    # choice: the paper omits it; 0.99 as in A3C (docs/papers/impala.md#departures-from-the-paper).
    rmsprop_momentum: float = field(0.0, "RMSProp momentum.", non_negative)  # Table G.1, Table D.3
    rmsprop_epsilon: float = field(0.01, "RMSProp epsilon (inside the square root).", positive)
    # Table G.1
    max_grad_norm: float = field(40.0, "Clip the global gradient norm (0 disables).", non_negative)
    # Table G.1
    # total_frames: `RunSettings`' 200M, §5.3.2 / Table C.1's per game; the lr schedule counts
    # frames, action repeats included (Table 1 note 2; docs/papers/impala.md#errata).

    # --- Actors and learner: system choices for a 2-core machine ------------------------------
    # num_actors: `RunSettings`' 2, one actor process per core; each runs a C++ vector env, so 2
    # saturate 2 cores.
    envs_per_actor: int = 16
    # choice: 16 envs amortise one batched inference call; 2x16 = batch 32 unrolls per round.
    # MinAtar, whose steps cost far less, takes 64 (MINATAR_OVERRIDES).
    queue_capacity: int = field(32, "Unrolls the queue table holds before actors block.", positive)
    # choice: one batch. Actors outpace the learner on 2 cores, so the queue is always full and
    # each queued batch adds a learner step of policy lag (the paper gives no queue size).
    params_pull_interval: int = 20
    # §3: actors pull the latest parameters before each trajectory, i.e. every n steps.
    publish_interval: int = 1
    # choice: publishing ~1M floats costs milliseconds, far less than one learner step.
    publish_lag: int = field(
        0, "Actors act with parameters this many learner steps old.", non_negative
    )
    # App. E.1: the controlled policy lag (docs/papers/impala.md#experiments); 0 is the normal run.

    # --- Replay (Table 2 "with replay", §5.2.2, Table D.3) -----------------------------------
    replay: str = field(
        "queue",
        "queue (the paper's), queue_with_replay (Table 2), or the other papers' "
        "patterns: prioritized (Reactor's sequences), sample_k (DiCE/GDI/LBC burn-in items).",
        one_of(REPLAYS),
    )
    # §3: actors send their trajectories to the learner through a queue, each trained on once;
    # Table 2 adds a replay for its ablation (how it is filled: our choice,
    # docs/papers/impala.md#departures-from-the-paper).
    # choice: prioritized and sample_k are not IMPALA's; they run its learner on the other papers'
    # replay patterns (with no priorities written back, prioritized samples uniformly).
    replay_capacity: int = field(10_000, "Unrolls the replay holds (all but queue).", positive)
    # Table D.3: capacity 10,000 trajectories, uniform sampling, first-in-first-out removal.
    replay_fraction: float = field(
        0.5, "Fraction of each batch drawn from the replay.", interval("(0, 1)")
    )
    # §5.2.2: "we draw 50% of the items in each batch uniformly at random from the replay
    # buffer".
    burn_in: int = field(0, "sample_k: burn-in steps from the stored core state.", non_negative)
    # choice: not IMPALA's (DiCE Table 5 uses 40); 0 trains every stored step.
    times_sampled: int = field(2, "sample_k: times each item is trained on.", positive)
    # choice: not IMPALA's; DiCE §4.1 "We train each sample twice".
    actor_precision: str = field(
        "float32",
        "Arithmetic of the actors' and evaluator's network: float32 or bfloat16.",
        one_of(PRECISIONS),
    )
    # choice: float32 as in the paper. bfloat16 (float32 weights, bfloat16 arithmetic) makes
    # acting ~1.6x cheaper on CPUs with AVX512-BF16 (benchmarks/throughput.py); V-trace corrects
    # for it exactly, because actors record the logits they actually sampled from as mu.

    # --- Evaluation protocol (§5.3.2, App. G) --------------------------------------------------
    eval_episodes: int = 200
    # §5.3.2: "each game-score is the mean over 200 evaluation episodes".
    eval_noop_max: int = field(
        30, "Random no-ops (uniform in [1, max]) at episode start.", non_negative
    )
    # §5.3.2: "a random number of no-op actions (uniformly chosen from [1, 30])".
    eval_max_episode_frames: int = field(108_000, "Evaluation episode cap in frames.", positive)
    # choice: 30 minutes of play at 60 Hz, the usual Atari cap
    # (docs/papers/impala.md#departures-from-the-paper).
    eval_sticky_actions: bool = field(False, "Sticky actions during evaluation.")
    # choice: the paper does not mention sticky actions; its 2018 protocol predates them.
    eval_policy: str = field(
        "sample", "Evaluated policy: sample from pi, or greedy.", one_of(EVAL_POLICIES)
    )
    # choice: the paper does not mention greedy evaluation
    # (docs/papers/impala.md#departures-from-the-paper).

    def validate(self) -> "ImpalaConfig":
        """Raises ValueError naming the first field whose value is not allowed: each field's
        check, then the rules that relate several fields."""
        super().validate()
        if self.queue_capacity < self.batch_size:
            raise ValueError(
                f"--queue_capacity={self.queue_capacity} must be >= "
                f"--batch_size={self.batch_size}, or the learner never samples"
            )
        if self.replay == "queue_with_replay" and not (
            1 <= round(self.replay_fraction * self.batch_size) < self.batch_size
        ):
            raise ValueError(
                f"--replay_fraction={self.replay_fraction} of --batch_size="
                f"{self.batch_size} must leave at least one fresh and one replayed "
                "unroll per batch"
            )
        return self

    @property
    def frames_per_step(self) -> int:
        """Environment frames per agent step: the action repeat (Table G.1: 4; CartPole and
        MinAtar: 1)."""
        from common.environments import env_names  # imports ale-py: not when the flags are defined

        return 4 if env_names.env_family(self.env) == "atari" else 1

    @property
    def frames_per_learner_step(self) -> int:
        """New environment frames one learner step trains on (frames include action repeats,
        Table 1 note 2): a batch of fresh unrolls; with Table 2's replay only the fresh part;
        with sample_k each item counts once over its `times_sampled` trainings. This sets the
        budget and the learning-rate anneal."""
        frames = self.batch_size * self.unroll_length * self.frames_per_step
        if self.replay == "queue_with_replay":
            return frames - round(self.replay_fraction * self.batch_size) * (
                self.unroll_length * self.frames_per_step
            )
        if self.replay == "sample_k":
            return frames // self.times_sampled
        return frames


# choice: CartPole is the fast smoke test, not a paper setting. A 2-layer MLP without LSTM and one
# actor of 16 Python envs; with the summed loss (Table D.1 note) and Table G.1's optimiser, a
# learning rate of 1e-2 reaches a mean return of ~480 in ~600K frames (lr 6e-4 is at ~60 after
# 400K frames); benchmarks/learning.py measures it.
CARTPOLE_OVERRIDES: dict[str, typing.Any] = dict(
    network="mlp",
    use_lstm=False,
    learning_rate=1e-2,
    total_frames=1_000_000,
    num_actors=1,
    eval_noop_max=0,
    eval_max_episode_frames=500,
)


# choice: MinAtar with the published MinAtar agents' torso under IMPALA's Atari heads (feed-forward,
# as App. G's experts) and Table G.1's loss, optimiser, batch and unroll: 32 x 20 = 640 new agent
# steps per update, as on Atari (MinAtar has no action repeat: a frame is an agent step).
MINATAR_OVERRIDES: dict[str, typing.Any] = dict(
    network="minatar",
    total_frames=5_000_000,  # MinAtar's published learning curves run 5M frames
    eval_noop_max=0,  # MinAtar's protocol (common.environments.envs) has no no-op starts
    # choice: full training on MinAtar Breakout at 5.0K, 7.2K and 11.1K frames/s with 16, 32 and
    # 64 envs per actor on an AMD EPYC, 31K and 41K with 64 and 128 on a Xeon; three seeds at 64
    # and at 128 learn as the grid's at 16 (docs/guides/minatar.md, "On a Xeon: whole items ...").
    envs_per_actor=128,
    # choice: trial 10 of the MinAtar protocol's 24 Table D.1 combinations, the best IQM of
    # normalised scores on the tuning games at 1M frames (0.252; Table G.1's values: --ablation=
    # table_g1), docs/guides/minatar_protocol.md and docs/results/minatar_protocol/impala.csv.
    entropy_cost=7.13e-05,
    learning_rate=4.83e-03,
    rmsprop_epsilon=1e-05,
)


def default_config(env: str = ImpalaConfig.env, **overrides: Any) -> ImpalaConfig:
    """The paper defaults, with the CartPole choices for `env="CartPole"`, then `overrides`."""
    base = dict(CARTPOLE_OVERRIDES) if env == "CartPole" else {}
    base.update(overrides)
    return ImpalaConfig(env=env, **base)
