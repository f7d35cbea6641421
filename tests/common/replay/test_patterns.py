"""Every replay pattern end to end on CartPole: a real actor (recurrent policy, a bandit
behaviour selector) writes through the pattern's writer to a real Reverb server; the real learner
loop samples the pattern's batches into a train step that checks each item against the network
the actor acted with (from the stored core state, burn-in included), returns priorities, and
logs the actor's games. The actor runs in this process first (bounded steps), so its counters
can be compared exactly with what the learner logged."""

import csv
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from common.runtime import acting
from common.runtime import agent as agent_lib
from common.control import behaviour as behaviour_lib
from common.runtime import learning
from common.models import networks
from common.replay import patterns
from common.replay import replay
from common.replay import parameters
from tests.controller_helpers import EtaController

NUM_ENVS, LSTM_UNITS, ACTOR_STEPS, LEARNER_STEPS, BATCH = 4, 8, 120, 6, 4
SPEC = agent_lib.EnvSpec(2, (4,), np.float32)
STATE_SPEC = (tf.TensorSpec([LSTM_UNITS], tf.float32),) * 2
BEHAVIOUR = behaviour_lib.BehaviourSpec(make_controller=EtaController, param_shapes={"eta": ()})

PATTERNS = {
    "queue": patterns.Queue(length=5, capacity=1000),
    "queue_with_replay": patterns.QueueWithReplay(
        length=5, capacity=1000, replay_capacity=50, replay_fraction=0.5
    ),
    "prioritized": patterns.Prioritized(length=5, capacity=10_000, initial_priority=1.0),
    # A large error buffer so that the actor, running alone first, is never rate-limited.
    # Trimmed batches, as DiCE, GDI and LBC train on by default.
    "sample_k": patterns.SampleK(
        length=6, capacity=1000, burn_in=3, times_sampled=2, error_buffer=1e6, trim_padding=True
    ),
}


def lstm_policy(num_actions, observation_shape, observation_dtype, seed, greedy):
    net = networks.ActorCriticNet(num_actions, torso="mlp", use_lstm=True, lstm_units=LSTM_UNITS)
    return acting.CategoricalPolicy(net, observation_shape, observation_dtype, seed, greedy)


def priority_of(key) -> float:
    return 2.0 + float(np.uint64(key) % np.uint64(7))


class CheckingStep:
    """A train step that unrolls the acting network over each item from its stored core state
    and records how far its logits are from the behaviour logits the actor stored."""

    def __init__(self, network, pattern):
        self.network = network
        self.pattern = pattern
        self.max_logit_error = 0.0
        self.items = 0
        self.masked_steps = 0
        self.real_trained_steps = 0  # real (unpadded) steps in the items' trained parts
        self.times_sampled: list[int] = []
        self.lengths: set[int] = set()  # positions per item in the batches
        self.eta_changes_within_games = 0
        self.etas: set[float] = set()

    def __call__(self, batch, frames):
        mask = batch.get(replay.MASK, tf.ones_like(batch["reward"])).numpy()
        (logits, _), _ = self.network.unroll(
            batch["observation"],
            batch["prev_action"],
            batch["prev_reward"],
            batch["reset"],
            batch[acting.CORE_STATE],
        )
        error = np.abs(logits.numpy() - batch["behaviour_logits"].numpy()).max(-1)
        self.max_logit_error = max(self.max_logit_error, float((error * mask).max()))
        self.items += mask.shape[1]
        self.lengths.add(mask.shape[0])
        self.masked_steps += int((mask == 0).sum())
        burn_in = getattr(self.pattern, "burn_in", 0)
        self.real_trained_steps += int(mask[burn_in : burn_in + self.pattern.length].sum())
        self.times_sampled.extend(batch["info"]["times_sampled"].numpy().tolist())
        # The game's behaviour parameter is stored with every step and constant within a game.
        eta, reset = batch[acting.BEHAVIOUR]["eta"].numpy(), batch["reset"].numpy()
        same_game = (mask[1:] * mask[:-1] * ~reset[1:]).astype(bool)
        self.eta_changes_within_games += int((eta[1:] != eta[:-1])[same_game].sum())
        self.etas.update(eta[mask == 1].tolist())
        stats = {"loss/total": tf.constant(0.0)}
        if self.pattern.priority_table is not None:
            stats[learning.PRIORITIES] = tf.constant(
                [priority_of(k) for k in batch["info"]["key"].numpy()]
            )
        return stats


@pytest.fixture(scope="module", params=list(PATTERNS))
def pattern_run(request, tmp_path_factory):
    name = request.param
    pattern = PATTERNS[name]
    logdir = str(tmp_path_factory.mktemp(name))
    agent = agent_lib.Agent(
        replay=pattern,
        make_policy=lstm_policy,
        policy_extras=lambda spec: acting.CategoricalPolicy.extras_spec(spec.num_actions),
        make_learner=None,
        core_state_spec=STATE_SPEC,
        behaviour=BEHAVIOUR,
    )
    server = replay.start_server(agent.tables(SPEC))
    address = replay.address_of(server)
    client = replay.connect(address)
    reference = lstm_policy(2, (4,), np.float32, seed=3, greedy=False)
    parameters.ParamsPublisher(client, acting.PARAMS_TABLE).publish(
        0, 0, [v.numpy() for v in reference.network.variables]
    )
    settings = acting.ActorSettings(
        env="CartPole", num_envs=NUM_ENVS, seed=0, params_pull_interval=1000, state_dir=logdir
    )
    # The learner first, as a run starts it: starting over, it clears the behaviour state a
    # run before it left (common.runtime.learning), which would be this actor's.
    step = CheckingStep(reference.network, pattern)
    learner = learning.Learner(
        learning.LearnerSettings(
            logdir=logdir,
            total_frames=10**9,
            frames_per_learner_step=BATCH * pattern.length,  # a frame per trained position
            batch_size=BATCH,
            log_interval_s=0.0,
            checkpoint_interval_s=1e9,
            sample_timeout_ms=2000,
        ),
        learning.LearnerParts(step, {"network": reference.network}, reference.network.variables),
        client,
        address,
        pattern,
        agent.signature(SPEC),
        agent.behaviour_names,
    )
    counters = acting.run_actor(
        settings, lstm_policy, pattern, address, behaviour=BEHAVIOUR, max_steps=ACTOR_STEPS
    )
    sizes = {table: info.current_size for table, info in client.server_info().items()}
    learner.run(max_steps=LEARNER_STEPS)
    learner.close()
    sampled = []
    if pattern.priority_table is not None:
        sampled = list(client.sample(pattern.priority_table, 200, emit_timesteps=False))
    server.stop()
    return dict(
        name=name,
        pattern=pattern,
        logdir=logdir,
        counters=counters,
        sizes=sizes,
        step=step,
        learner=learner,
        sampled=sampled,
    )


def test_items_arrive_and_each_trains_from_the_stored_state(pattern_run):
    step, learner = pattern_run["step"], pattern_run["learner"]
    assert int(learner.step.numpy()) == LEARNER_STEPS
    assert step.items == LEARNER_STEPS * BATCH
    # The network from the stored core state (after the burn-in, for sample-k) reproduces the
    # logits the actor sampled from at every real step.
    assert step.max_logit_error < 1e-5
    assert step.eta_changes_within_games == 0
    assert len(step.etas) > 1 and all(0.0 <= eta <= 50.0 for eta in step.etas)


def test_tables_hold_what_the_pattern_promises(pattern_run):
    pattern, sizes, step = pattern_run["pattern"], pattern_run["sizes"], pattern_run["step"]
    experience = sizes[patterns.EXPERIENCE_TABLE]
    if pattern.kind == "prioritized":
        # One item per step once a full sequence exists (period 1).
        assert experience == NUM_ENVS * (ACTOR_STEPS - pattern.item_length + 1)
    elif pattern.kind in ("queue", "queue_with_replay"):
        assert experience == NUM_ENVS * ((ACTOR_STEPS - 1) // pattern.length)
    if pattern.kind == "queue_with_replay":
        assert sizes[patterns.REPLAY_TABLE] == min(experience, pattern.replay_capacity)
        fresh, replayed = pattern.split(BATCH)
        # Each batch: the fresh half sampled for the first time, the replayed half from the
        # uniform table (sampled with replacement).
        per_batch = np.reshape(step.times_sampled, (LEARNER_STEPS, BATCH))
        assert (per_batch[:, :fresh] == 1).all()
    learner_frames = int(pattern_run["learner"].frames.numpy())
    if pattern.kind == "sample_k":
        assert max(step.times_sampled) <= pattern.times_sampled
        assert step.masked_steps > 0  # burn-in and episode-end padding reached the learner
        # The learner counts the real trained steps, not the padding after a game's end. Whether
        # a sample holds a game's padded last item is chance (long games make them rare), so the
        # count is checked exactly here and padding's share on fixed masks below.
        assert learner_frames == step.real_trained_steps <= LEARNER_STEPS * BATCH * pattern.length
        # Trimmed batches keep the burn-in, a multiple of 2 (a quarter of 6, rounded up) of the
        # trained positions and the bootstrap position.
        assert pattern.trim_quantum == 2 and step.lengths <= {6, 8, 10}
    else:
        assert step.lengths == {pattern.item_length}
        assert learner_frames == LEARNER_STEPS * BATCH * pattern.length
    if pattern.kind == "queue":
        assert set(step.times_sampled) == {1}


@pytest.mark.parametrize("pattern_run", ["prioritized"], indirect=True)
def test_priorities_written_back_are_visible_in_reverb(pattern_run):
    sampled = pattern_run["sampled"]
    written = [s for s in sampled if s.info.priority != 1.0]
    assert written  # items the learner trained on were sampled again, with their new priority
    for sample in sampled:
        assert sample.info.priority in (1.0, priority_of(sample.info.key))
    for sample in written:
        assert sample.info.priority == priority_of(sample.info.key)


def test_every_game_is_logged_exactly_once_with_its_behaviour(pattern_run):
    counters, logdir, learner = (
        pattern_run["counters"],
        pattern_run["logdir"],
        pattern_run["learner"],
    )
    with open(os.path.join(logdir, "episodes.csv")) as f:
        rows = list(csv.DictReader(f))
    assert counters["game_returns"]  # random CartPole games last ~20 steps
    assert [float(r["episode_return"]) for r in rows] == counters["game_returns"]
    assert int(learner.actor_frames.numpy()) == ACTOR_STEPS * NUM_ENVS
    # The controller learned once per finished game: each bandit counts one update per game.
    state = np.load(behaviour_lib.state_path(logdir, 0))
    updates = sum(state[f"{env}/selector0/bandit0/counts"].sum() for env in range(NUM_ENVS))
    assert updates == len(counters["game_returns"])


@pytest.mark.parametrize("name", ["queue_with_replay", "prioritized", "sample_k"])
def test_replay_survives_a_restart_without_a_rate_limiter_deadlock(name, tmp_path):
    """Reverb checkpoints the replay; a server started on the same directory restores it, and
    the restored rate limiter lets the learner sample and the actors insert (reverb#103)."""
    pattern = PATTERNS[name]
    agent = agent_lib.Agent(
        replay=pattern, make_policy=None, make_learner=None, policy_extras=lambda spec: {}
    )
    signature = agent.signature(SPEC)
    step_spec = signature[replay.STEPS]

    def write(client, steps):
        with pattern.writer(client, 1, flush_timeout_ms=5000) as writer:
            for t in range(steps):
                record = {
                    key: np.zeros((1, *spec.shape[1:]), spec.dtype.as_numpy_dtype)
                    for key, spec in step_spec.items()
                    if key != replay.MASK
                }
                record["reward"] += t
                writer.append(record, episode_end=np.array([t == steps - 1]))

    def sample(address, count):
        batches = pattern.batches(address, signature, count, timeout_ms=5000)
        return next(batches)

    server = replay.start_server(agent.tables(SPEC), checkpoint_dir=str(tmp_path))
    address = replay.address_of(server)
    client = replay.connect(address)
    write(client, 40)
    sample(address, 2)
    before = {t: i.current_size for t, i in client.server_info().items()}
    client.checkpoint()
    server.stop()

    server = replay.start_server(agent.tables(SPEC), checkpoint_dir=str(tmp_path))
    try:
        address = replay.address_of(server)
        client = replay.connect(address)
        after = {t: i.current_size for t, i in client.server_info().items()}
        assert after == before and after[patterns.EXPERIENCE_TABLE] > 0
        write(client, 40)  # inserts are not blocked by the restored limiter
        assert sample(address, 2).data[replay.STEPS]["reward"].shape[1] == 2  # nor samples
    finally:
        server.stop()


@pytest.mark.parametrize(
    "pattern, real, frames",
    [
        # SampleK(length=6, burn_in=3): positions 3-8 are trained; 3 of an item's 6 are real.
        (
            patterns.SampleK(length=6, capacity=10, burn_in=3, times_sampled=2),
            [1] * 6 + [0] * 4,
            60,
        ),
        # Padding in the burn-in is not trained, so it does not count either way.
        (
            patterns.SampleK(length=6, capacity=10, burn_in=3, times_sampled=2),
            [0] * 3 + [1] * 7,
            120,
        ),
        (patterns.SampleK(length=6, capacity=10, burn_in=3, times_sampled=2), [0] * 10, 0),
        # 2 of 6 trained positions real, whole and trimmed (`trim_padding`: 2 trained positions
        # and the bootstrap one left): the same frames.
        (
            patterns.SampleK(length=6, capacity=10, burn_in=3, times_sampled=2),
            [1] * 5 + [0] * 5,
            40,
        ),
        (
            patterns.SampleK(length=6, capacity=10, burn_in=3, times_sampled=2),
            [1] * 5 + [0],
            40,
        ),
    ],
)
def test_a_batch_counts_the_frames_of_its_real_trained_positions(pattern, real, frames):
    """`Learner._new_frames` on fixed masks: frames_per_learner_step (120, a frame per trained
    position of a batch of 2 items) times the share of trained positions that are real."""
    mask = tf.constant(np.stack([real, real], axis=1), tf.float32)  # [T, B] with B = 2 items
    learner = types.SimpleNamespace(
        settings=types.SimpleNamespace(frames_per_learner_step=120), pattern=pattern
    )
    assert learning.Learner._new_frames(learner, {replay.MASK: mask}) == frames
