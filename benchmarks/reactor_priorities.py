"""How close each way of running lazy prioritisation on Reverb samples to the paper's tree.

    python -m benchmarks.reactor_priorities          # about a minute on one core

The paper (§3.3, App. 6.3) samples a key it has never trained on in proportion to the mean
priority of the assigned keys around it in time, which its Contextual Priority Tree keeps current
as neighbours are trained on. Reverb samples in proportion to the priority each key holds; it
takes one when the key is inserted, and the learner can rewrite only keys it has sampled. This
benchmark replays one stream of replay events through numpy models of the tree and of each
design and prints the total variation distance 1/2 sum_k |P_design(k) - P_tree(k)| between their
sampling distributions over the keys in the replay, every `--every` learner steps once the replay
is full (mean and max over the run).

The stream (synthetic and seeded; `Stream` holds the settings, one flag each):
- `--actors` x `--envs_per_actor` environment streams; each learner step one actor, in turn,
  steps its environments, each step adding one key (the sequence starting there) to one shared
  replay of `--capacity` keys, the oldest evicted first: 5 keys per learner step and batches of
  4, Reactor's 0.8 samples per insert (§3.4). The learner samples from `--min_size` keys on.
- Priorities with the structure of §3.3's Assumption 1: each environment's transitions have a TD
  magnitude |delta_i| = exp(x_i), x an AR(1) process with correlation length `--correlation`
  steps and standard deviation `--log_sd`, times `--terminal_factor` on the last transition of
  an episode (lengths geometric, mean `--episode_mean`; in CartPole the terminal step's TD error
  is the large one). A key's priority is the mean |delta| over its 32 transitions, so a key
  shares 31 of them with the next. As the critic learns, every priority halves every
  `--drift_half_life` replay lifetimes (a lifetime: `--capacity` / 5 learner steps), and each
  assignment carries lognormal noise of sd `--assignment_noise` (the network moves between two
  visits of a key). No training run is needed, and none of it is a recorded Reactor run.
- The learner's batches are drawn from the reference (the paper's process), so every model sees
  the same history: the same keys, the same assignments and the same reported probabilities.

The reference: one `reactor.priorities.ContextualPriorityTree` per environment stream, in that
stream's time order, sampled over the shared replay in proportion to the trees' estimates, with
the uniform share `--epsilon` (a stream none of whose keys is assigned takes the mean of all
assigned keys). The paper's workers each had their own replay and tree, over one environment's
stream, so a key's time neighbours were its own episode's overlapping sequences; the project
shares one replay between environments, hence one global mixture. Two rows measure the choice:
`interleaved tree`, one tree over the shared replay's insertion order, where a key's time
neighbours are other environments' keys, and `balanced tree`, the same assigned keys in
perfectly balanced per-stream trees, another partition the paper allows (App. 6.3, Fig. 4).

The designs (Reverb's side: a sampled key's priority is written back at once, folded with the
uniform share; actors read what the learner publishes every `--pull_interval` learner steps):
- `uniform`, and `max_priority` (PER: new keys at the largest priority written so far, App. 6.5);
- `lazy_global`: new keys at the Horvitz-Thompson mean of every priority the learner writes, a
  moving average (`--prioritisation=lazy_global`);
- `lazy`: new keys at the Horvitz-Thompson mean of the priorities written for keys sampled for
  the first time, i.e. of the keys still unassigned (reactor/priorities.py; the default);
- `stream_context`: new keys at the priority of the newest assigned key of their own environment
  stream (needs each item's stream and step, and reads every `--context_pull` learner steps);
- `tree_at_insert`: new keys at the reference tree's own estimate for them at insertion, read
  with no delay (what a learner keeping its own tree could at best publish).
"""

from __future__ import annotations

import dataclasses
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks.machine import cpu_line
from reactor import priorities

SEQUENCE = 32  # transitions per key (§3.4: sequences of 33 frames)
INSERTS_PER_STEP = 5  # reactor/config.py acting_steps_per_learner_step (§3.4: 4-6)
BATCH = 4  # §3.4: batches of 4


@dataclasses.dataclass(frozen=True)
class Stream:
    """The replayed stream and the designs' settings (module docstring); one flag each."""

    actors: int = 2  # reactor/config.py's Atari default: 2 actors x 5 environments
    envs_per_actor: int = 5
    capacity: int = 4000  # keys: small, so that the tree in Python replays it in a minute
    lifetimes: float = 6.0  # replay lifetimes measured once it is full
    min_size: int = 1000  # keys before the learner samples
    every: int = 100  # learner steps between measurements
    epsilon: float = 0.01  # reactor/config.py replay_uniform_epsilon
    rate: float = 0.01  # reactor/config.py priority_estimate_rate
    # Actors read the estimate every 100 of their steps (reactor/config.py
    # estimate_pull_interval), 200 learner steps when two actors share 5 inserts per step.
    pull_interval: int = 200
    context_pull: int = 10  # stream_context's reads: every 5 actor steps, as the parameters
    correlation: float = 50.0  # steps: correlation length of log |delta|
    log_sd: float = 0.7
    terminal_factor: float = 20.0
    episode_mean: float = 300.0  # steps
    drift_half_life: float = 2.0  # replay lifetimes
    assignment_noise: float = 0.3
    seed: int = 0

    @property
    def num_streams(self) -> int:
        return self.actors * self.envs_per_actor

    @property
    def lifetime(self) -> float:
        """Learner steps a key stays in the full replay."""
        return self.capacity / INSERTS_PER_STEP


def sequence_priorities(rng, steps: int, stream: Stream) -> np.ndarray:
    """Priority of the key starting at each of `steps` steps of one environment: the mean TD
    magnitude over its 32 transitions (module docstring)."""
    n = steps + SEQUENCE
    phi = np.exp(-1.0 / stream.correlation)
    shocks = rng.normal(size=n) * stream.log_sd * np.sqrt(1 - phi**2)
    x = np.empty(n)
    x[0] = rng.normal() * stream.log_sd
    for i in range(1, n):
        x[i] = phi * x[i - 1] + shocks[i]
    delta = np.exp(x)
    ends = np.cumsum(rng.geometric(1.0 / stream.episode_mean, size=n))
    delta[ends[ends < n]] *= stream.terminal_factor
    sums = np.concatenate([[0.0], np.cumsum(delta)])
    return (sums[SEQUENCE : SEQUENCE + steps] - sums[:steps]) / SEQUENCE


class Forest:
    """The reference: one tree per environment stream, sampled as one replay (module
    docstring). Keys are numbered in insertion order, which is each stream's time order."""

    def __init__(self, num_streams: int, epsilon: float):
        self.trees = [priorities.ContextualPriorityTree() for _ in range(num_streams)]
        self.epsilon = epsilon
        self.assigned_sum = 0.0  # over the live assigned keys: the root estimate of a stream
        self.assigned_count = 0  # with nothing assigned

    def root_estimate(self) -> float:
        return self.assigned_sum / self.assigned_count if self.assigned_count else 1.0

    def masses(self) -> np.ndarray:
        """Each tree's estimated mass; a stream with nothing assigned takes the mean of all
        assigned keys, the estimate a root above the trees would pass down."""
        root = self.root_estimate()
        masses = np.zeros(len(self.trees))
        for i, tree in enumerate(self.trees):
            tree.root_estimate = root
            if tree.root is not None:
                masses[i] = tree.root.masses(root)[1].sum()
        return masses

    def assign(self, key: int, stream: int, old: float, new: float) -> None:
        if np.isnan(old):
            self.assigned_count += 1
        else:
            self.assigned_sum -= old
        self.assigned_sum += new
        self.trees[stream].set_priority(key, new)

    def evict(self, key: int, stream: int, old: float) -> None:
        self.trees[stream].delete(key)
        if not np.isnan(old):
            self.assigned_sum -= old
            self.assigned_count -= 1

    def sample(self, rng, lo: int, hi: int, stream_of: np.ndarray):
        """A batch of keys from P = eps / N + (1 - eps) p_hat / sum p_hat, with their P."""
        masses = self.masses()
        total, n = masses.sum(), hi - lo
        keys, probabilities = [], []
        for _ in range(BATCH):
            if rng.random() < self.epsilon:
                key = lo + int(rng.integers(n))
            else:
                key = self.trees[rng.choice(len(masses), p=masses / total)].sample(rng)
            tree = stream_of[key]
            within = self.trees[tree].probability(key)
            keys.append(key)
            probabilities.append(
                self.epsilon / n + (1 - self.epsilon) * masses[tree] / total * within
            )
        return np.array(keys), np.array(probabilities)

    def estimates(self, lo: int, hi: int) -> np.ndarray:
        """p_hat of the keys lo..hi-1."""
        self.masses()
        out = np.empty(hi - lo)
        for tree in self.trees:
            if len(tree):
                keys, estimates, _ = tree.table()
                out[np.asarray(keys) - lo] = estimates
        return out


def mixture(estimates: np.ndarray, epsilon: float) -> np.ndarray:
    return epsilon / len(estimates) + (1 - epsilon) * estimates / estimates.sum()


def total_variation(weights: np.ndarray, reference: np.ndarray) -> float:
    """1/2 sum |P - reference| with P proportional to `weights` (Reverb's P, alpha = 1)."""
    return 0.5 * float(np.abs(weights / weights.sum() - reference).sum())


class Design:
    """Reverb's side of one design: the priority every key holds (`weights`, by key number), and
    the estimate each actor inserts with, read from the learner every `pull` learner steps."""

    def __init__(self, name: str, stream: Stream, num_keys: int, pull: int):
        self.name, self.pull = name, pull
        self.weights = np.zeros(num_keys)
        self.published = np.ones(stream.num_streams)
        self.last_read = np.full(stream.actors, -pull)

    def read(self, step: int, actor: int, streams: list) -> None:
        if step - self.last_read[actor] >= self.pull:
            self.last_read[actor] = step
            self.published[streams] = self.insert_priority(streams)

    def insert_priority(self, streams) -> np.ndarray:
        return np.ones(len(streams))

    def insert(self, key: int, stream: int) -> None:
        self.weights[key] = self.published[stream]

    def learn(self, keys, streams, assigned, probabilities, table_size, first) -> None:
        pass  # uniform: priorities are never written


class Estimated(Design):
    """`max_priority`, `lazy_global` or `lazy`: the learner's numpy twin
    (`reactor.priorities.PriorityEstimates`) writes the sampled keys and moves one estimate."""

    def __init__(self, name, stream, num_keys, pull, rule):
        super().__init__(name, stream, num_keys, pull)
        self.estimates = priorities.PriorityEstimates(rule, stream.epsilon, stream.rate)

    def insert_priority(self, streams):
        return np.full(len(streams), self.estimates.insert_priority)

    def learn(self, keys, streams, assigned, probabilities, table_size, first):
        self.weights[keys] = self.estimates.update(assigned, probabilities, table_size, first)


class StreamContext(Estimated):
    """New keys at the priority of the newest assigned key of their own stream (as if a new key's
    cell were that key's), plus the uniform share; `lazy`'s estimate until a stream has one."""

    def __init__(self, name, stream, num_keys, pull):
        super().__init__(name, stream, num_keys, pull, "lazy")
        self.newest = np.full(stream.num_streams, -1)  # the learner's, by stream
        self.newest_priority = np.zeros(stream.num_streams)

    def insert_priority(self, streams):
        context = self.newest_priority[streams] + self.estimates.offset()
        return np.where(self.newest[streams] >= 0, context, self.estimates.insert_priority)

    def learn(self, keys, streams, assigned, probabilities, table_size, first):
        super().learn(keys, streams, assigned, probabilities, table_size, first)
        for key, stream, priority in zip(keys, streams, assigned):
            if key >= self.newest[stream]:
                self.newest[stream], self.newest_priority[stream] = key, priority


def run(stream: Stream) -> dict[str, list[float]]:
    """Replays the stream through the reference and every model: {row: distance at each
    measurement}, plus the unassigned keys' share of the reference's probability."""
    rng = np.random.default_rng(stream.seed)
    warmup = int(np.ceil(max(stream.capacity, stream.min_size) / INSERTS_PER_STEP))
    steps = warmup + int(stream.lifetimes * stream.lifetime)
    num_keys = steps * INSERTS_PER_STEP + stream.envs_per_actor
    per_stream = num_keys // stream.num_streams + 1
    level = np.stack(
        [sequence_priorities(rng, per_stream, stream) for _ in range(stream.num_streams)]
    )
    level /= level.mean()
    stream_of = np.zeros(num_keys, int)  # each key's environment stream and step in it
    step_of = np.zeros(num_keys, int)
    assigned = np.full(num_keys, np.nan)  # each key's priority, NaN while unassigned
    times_sampled = np.zeros(num_keys, int)
    forest = Forest(stream.num_streams, stream.epsilon)
    interleaved = priorities.ContextualPriorityTree()
    pull = stream.pull_interval
    designs = [
        Design("uniform", stream, num_keys, pull),
        Estimated("max_priority", stream, num_keys, pull, "max"),
        Estimated("lazy_global", stream, num_keys, pull, "lazy_global"),
        Estimated("lazy", stream, num_keys, pull, "lazy"),
        StreamContext("stream_context", stream, num_keys, stream.context_pull),
    ]
    at_insert = Estimated("tree_at_insert", stream, num_keys, pull, "lazy")
    designs.append(at_insert)
    rows: dict[str, list[float]] = {d.name: [] for d in designs}
    rows.update({"interleaved tree": [], "balanced tree": [], "unassigned share": []})
    next_step = np.zeros(stream.num_streams, int)
    lo = hi = 0  # the replay holds keys lo..hi-1 (FIFO)
    batches = 0
    for step in range(steps):
        while hi < INSERTS_PER_STEP * (step + 1):  # actors step in turn, 5 keys per step
            actor = batches % stream.actors
            batches += 1
            mine = list(range(actor * stream.envs_per_actor, (actor + 1) * stream.envs_per_actor))
            for design in designs:
                design.read(step, actor, mine)
            for env in mine:
                key, hi = hi, hi + 1
                stream_of[key], step_of[key] = env, next_step[env]
                next_step[env] += 1
                forest.trees[env].insert(key)
                interleaved.insert(key)
                for design in designs:
                    design.insert(key, env)
                forest.masses()  # the root estimates, then the tree's estimate of the new key
                estimate = forest.trees[env].estimate(key)
                at_insert.weights[key] = estimate + at_insert.estimates.offset()
                if hi - lo > stream.capacity:
                    forest.evict(lo, stream_of[lo], assigned[lo])
                    interleaved.delete(lo)
                    lo += 1
        if hi - lo < stream.min_size:
            continue
        keys, probabilities = forest.sample(rng, lo, hi, stream_of)
        drift = 0.5 ** (step / (stream.drift_half_life * stream.lifetime))
        noise = np.exp(stream.assignment_noise * rng.normal(size=BATCH))
        values = drift * level[stream_of[keys], step_of[keys]] * noise
        first = np.zeros(BATCH, bool)
        for i, (key, value) in enumerate(zip(keys, values)):
            first[i] = times_sampled[key] == 0  # as Reverb's count of this sample is 1
            times_sampled[key] += 1
            forest.assign(key, stream_of[key], assigned[key], value)
            interleaved.set_priority(key, value)
            assigned[key] = value
        for design in designs:
            design.learn(keys, stream_of[keys], values, probabilities, hi - lo, first)
        if step >= warmup and (step - warmup) % stream.every == 0:
            measure(rows, designs, forest, interleaved, assigned, stream_of, lo, hi, stream)
    return rows


def measure(rows, designs, forest, interleaved, assigned, stream_of, lo, hi, stream) -> None:
    reference = mixture(forest.estimates(lo, hi), stream.epsilon)
    for design in designs:
        rows[design.name].append(total_variation(design.weights[lo:hi], reference))
    interleaved.root_estimate = forest.root_estimate()
    rows["interleaved tree"].append(
        total_variation(mixture(interleaved.table()[1], stream.epsilon), reference)
    )
    balanced = np.empty(hi - lo)
    for env in range(stream.num_streams):
        mine = np.flatnonzero(stream_of[lo:hi] == env)
        if len(mine):
            tree = priorities.ContextualPriorityTree.balanced(assigned[lo + mine])
            tree.root_estimate = forest.root_estimate()
            balanced[mine] = tree.table()[1]
    rows["balanced tree"].append(total_variation(mixture(balanced, stream.epsilon), reference))
    rows["unassigned share"].append(float(reference[np.isnan(assigned[lo:hi])].sum()))


def define_flags() -> dict:
    """One flag per `Stream` field, defined only when run as a program (tests import `run`)."""
    defaults = dataclasses.asdict(Stream())
    return {
        f.name: (flags.DEFINE_integer if f.type == "int" else flags.DEFINE_float)(
            f.name, defaults[f.name], f"Stream.{f.name} (module docstring)."
        )
        for f in dataclasses.fields(Stream)
    }


def main(argv, stream_flags):
    del argv
    stream = Stream(**{name: flag.value for name, flag in stream_flags.items()})
    print(f"CPU: {cpu_line()} (one core used)")
    print("stream: " + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(stream).items()))
    start = time.perf_counter()
    rows = run(stream)
    share = rows.pop("unassigned share")
    print(
        f"{len(share)} measurements in {time.perf_counter() - start:.0f} s; the unassigned keys "
        f"hold {np.mean(share):.2f} of the tree's probability on average\n"
    )
    print("| sampling | TV to the tree, mean | max |")
    print("|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {np.mean(values):.3f} | {np.max(values):.3f} |")


if __name__ == "__main__":
    _stream_flags = define_flags()
    app.run(lambda argv: main(argv, _stream_flags))
