"""Lazy prioritisation against Tests 13-14 of docs/papers/reactor.md#worked-test-numbers (the CPT
worked example, its AVL insert / delete / set, the replay mixture and its importance weights)
and the Reverb mapping's estimator."""

import numpy as np
import pytest

from reactor import priorities

UNKNOWN = np.nan
# Test 13: keys 1..6, root 4 (p = 3), left subtree {1, 2, 3} unknown, right subtree root 6
# (p = 6) with left child 5 unknown.
TEST13 = [UNKNOWN, UNKNOWN, UNKNOWN, 3.0, UNKNOWN, 6.0]
TEST13_PROBABILITIES = [1 / 6, 1 / 6, 1 / 6, 0.1, 0.2, 0.2]


def shape(node):
    """(key, left shape, right shape), None for an empty subtree."""
    return None if node is None else (node.key, shape(node.left), shape(node.right))


def balanced(p):
    return priorities.ContextualPriorityTree.balanced(p)


def test_the_balanced_tree_is_test_13_s_tree():
    # Keys 0..5 stand for 1..6: root 4, left 2 with children 1 and 3, right 6 with left child 5.
    assert shape(balanced(TEST13).root) == (
        3,
        (1, (0, None, None), (2, None, None)),
        (5, (4, None, None), None),
    )


def test_cpt_worked_example():
    tree = balanced(TEST13)
    keys, estimates, tree_probabilities = tree.table()
    assert keys == list(range(6))
    np.testing.assert_allclose(estimates, [5, 5, 5, 3, 6, 6])  # 5 = 1/3 * 3 + 2/3 * 6
    # The path-product probability query gives the same numbers as p_hat / sum(p_hat).
    np.testing.assert_allclose(tree_probabilities, TEST13_PROBABILITIES, atol=1e-12)
    np.testing.assert_allclose([tree.probability(k) for k in keys], TEST13_PROBABILITIES)
    np.testing.assert_allclose([tree.estimate(k) for k in keys], [5, 5, 5, 3, 6, 6])
    assert tree.probabilities().sum() == pytest.approx(1.0)


def test_cpt_all_known_is_exact_proportional_and_none_known_is_uniform():
    known = [2.0, 1.0, 4.0, 3.0, 5.0, 6.0]
    np.testing.assert_allclose(
        balanced(known).probabilities(),
        [0.095238, 0.047619, 0.190476, 0.142857, 0.238095, 0.285714],
        atol=1e-6,
    )
    np.testing.assert_allclose(balanced([UNKNOWN] * 6).probabilities(), np.full(6, 1 / 6))


def test_cpt_fig6_caption_pattern_on_a_larger_tree():
    # 11 keys; known: key 4 (index 3) = 2, key 6 (index 5) = 9 (the root), key 10 (index 9) = 7.
    p = np.full(11, UNKNOWN)
    p[[3, 5, 9]] = [2.0, 9.0, 7.0]
    tree = balanced(p)
    # Keys 8, 9, 11 share their subtree only with key 10: they get its priority (Fig. 6).
    np.testing.assert_allclose(tree.table()[1][[7, 8, 10]], 7.0)
    assert tree.probabilities().sum() == pytest.approx(1.0)


def test_cpt_sampling_frequencies_match_the_probabilities():
    tree = balanced(TEST13)
    rng = np.random.default_rng(0)
    n = 20_000
    counts = np.bincount([tree.sample(rng, 0.1) for _ in range(n)], minlength=6)
    expected = tree.probabilities(0.1)
    np.testing.assert_allclose(counts / n, expected, atol=4 * np.sqrt(0.25 / n))


def test_a_new_key_takes_the_estimate_of_its_time_neighbours():
    # Keys 0..5 all known; key 6 arrives unknown. AVL insertion puts it right of key 5 (whose
    # left child is key 4) without a rotation, so its context is the subtree {4, 5}: the
    # count-weighted mean of the known parts, (p4 + p5) / 2.
    tree = balanced([2.0, 1.0, 4.0, 3.0, 5.0, 8.0])
    tree.insert(6)
    assert shape(tree.root)[2] == (5, (4, None, None), (6, None, None))
    assert tree.estimate(6) == pytest.approx((5.0 + 8.0) / 2)
    np.testing.assert_allclose(tree.table()[1], [2, 1, 4, 3, 5, 8, 6.5])
    # Once the learner sets it, sampling is exactly proportional again.
    tree.set_priority(6, 3.0)
    p = np.array([2.0, 1.0, 4.0, 3.0, 5.0, 8.0, 3.0])
    np.testing.assert_allclose(tree.probabilities(), p / p.sum())


def brute_summary(node):
    """(count, mean) of a subtree by our reading of Fig. 5's rules, written out independently."""
    if node is None:
        return 0, np.nan
    parts = [brute_summary(node.left), (1, node.priority), brute_summary(node.right)]
    count = sum(c for c, _ in parts)
    known = [(c, m) for c, m in parts if c > 0 and not np.isnan(m)]
    if not known:
        return count, np.nan
    return count, sum(c * m for c, m in known) / sum(c for c, _ in known)


def check_avl(node, lo=-np.inf, hi=np.inf) -> int:
    """Asserts order, heights, AVL balance, counts and means below `node`; returns its height."""
    if node is None:
        return 0
    assert lo < node.key < hi
    left = check_avl(node.left, lo, node.key)
    right = check_avl(node.right, node.key, hi)
    assert abs(left - right) <= 1
    assert node.height == 1 + max(left, right)
    count, mean = brute_summary(node)
    assert node.count == count
    np.testing.assert_allclose(node.mean, mean, rtol=1e-12)  # NaN equals NaN here
    return node.height


def find(node, key):
    while node.key != key:
        node = node.left if key < node.key else node.right
    return node


@pytest.mark.parametrize("seed", range(2))
def test_random_insert_delete_set_sequences_keep_the_tree_valid(seed):
    """Test 13's last part: a replay's life (new keys unknown, oldest evicted, sampled keys set)."""
    rng = np.random.default_rng(seed)
    tree = priorities.ContextualPriorityTree()
    alive, next_key, capacity = [], 0, 40
    for step in range(400):
        action = rng.random()
        if action < 0.45 or len(alive) < 2:
            tree.insert(next_key)
            alive.append(next_key)
            next_key += 1
            if len(alive) > capacity:
                tree.delete(alive.pop(0))  # FIFO eviction
        elif action < 0.55:
            key = alive.pop(int(rng.integers(len(alive))))
            tree.delete(key)
        else:
            key = tree.sample(rng, 0.01)
            tree.set_priority(key, float(rng.exponential()) + 0.01)
            node = find(tree.root, key)
            # A leaf, or lifted by its insertion's double rotation to the parent of two leaves.
            assert node.height == 1 or (
                node.height == 2 and node.left.height == node.right.height == 1
            )
        check_avl(tree.root)
        keys, estimates, tree_probabilities = tree.table()
        assert keys == alive and len(tree) == len(alive)
        assert tree_probabilities.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(tree_probabilities, estimates / estimates.sum(), rtol=1e-9)
        if step % 50 == 0:
            for key, estimate in zip(keys, estimates):
                assert tree.estimate(key) == pytest.approx(estimate)
    known = np.array([find(tree.root, k).priority for k in alive])
    _, estimates, _ = tree.table()
    np.testing.assert_array_equal(estimates[~np.isnan(known)], known[~np.isnan(known)])


def test_the_tree_stays_logarithmic_and_rejects_bad_input():
    tree = priorities.ContextualPriorityTree()
    n = 2000
    for key in range(n):  # time-ordered insertion: the worst case for an unbalanced tree
        tree.insert(key)
    assert tree.root.height <= 1.45 * np.log2(n + 2)
    for key in range(0, n, 2):
        tree.delete(key)
    assert len(tree) == n // 2 and tree.root.height <= 1.45 * np.log2(n // 2 + 2)
    with pytest.raises(KeyError, match="already"):
        tree.insert(1)
    with pytest.raises(KeyError, match="not in the tree"):
        tree.delete(0)
    with pytest.raises(KeyError, match="not in the tree"):
        tree.probability(0)
    with pytest.raises(ValueError, match="priority must be"):
        tree.set_priority(1, -1.0)
    with pytest.raises(ValueError, match="empty"):
        priorities.ContextualPriorityTree().sample(np.random.default_rng(0))


def test_test_14_mixture_and_importance_weights():
    tree = balanced(TEST13)
    p = tree.probabilities(0.1)
    np.testing.assert_allclose(
        p, [0.166667, 0.166667, 0.166667, 0.106667, 0.196667, 0.196667], atol=1e-6
    )
    w = priorities.importance_weights(p, 6, normalise=False)
    np.testing.assert_allclose(w, [1, 1, 1, 1.5625, 0.847458, 0.847458], atol=1e-6)
    f = np.arange(1.0, 7.0)
    assert np.sum(p * w * f) == pytest.approx(3.5)  # E_P[w f] = mean f
    np.testing.assert_allclose(
        priorities.importance_weights(p, 6), [0.64, 0.64, 0.64, 1, 0.542373, 0.542373], atol=1e-6
    )
    # Sampled: the IS-weighted mean of f is within 3 standard errors of 3.5.
    rng = np.random.default_rng(1)
    keys = rng.choice(6, size=100_000, p=p)
    estimates = w[keys] * f[keys]
    assert abs(estimates.mean() - 3.5) < 3 * estimates.std() / np.sqrt(len(keys))


def test_folded_priorities_reproduce_the_mixture_exactly():
    # With alpha = 1, sampling in proportion to p_hat + eps/(1-eps) mean(p_hat) is the mixture.
    estimates = balanced(TEST13).table()[1]
    folded = priorities.sampling_priorities(estimates, estimates.mean(), 0.1, 1.0)
    np.testing.assert_allclose(folded / folded.sum(), balanced(TEST13).probabilities(0.1))
    # Any alpha: proportional to folded ** alpha is eps uniform + (1 - eps) prop. to p ** alpha.
    p, alpha, eps = np.array([0.5, 2.0, 3.0, 7.0]), 0.6, 0.2
    weights = priorities.sampling_priorities(p, np.mean(p**alpha), eps, alpha) ** alpha
    np.testing.assert_allclose(
        weights / weights.sum(), eps / 4 + (1 - eps) * p**alpha / np.sum(p**alpha)
    )
    np.testing.assert_array_equal(priorities.sampling_priorities(p, 9.0, eps, 0.0), p)


def test_horvitz_thompson_estimate_is_not_inflated_by_prioritised_sampling():
    rng = np.random.default_rng(2)
    p = rng.exponential(size=1000) + 0.01
    probabilities = p / p.sum()
    keys = rng.choice(1000, size=20_000, p=probabilities)
    naive = p[keys].mean()  # size-biased: E = sum p^2 / sum p
    estimate = priorities.horvitz_thompson_mean(p[keys], probabilities[keys], 1000)
    assert naive > 1.5 * p.mean()
    assert estimate == pytest.approx(p.mean(), rel=0.03)


@pytest.mark.parametrize("seed", range(5))
def test_cpt_on_random_known_sets(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    p = rng.exponential(size=n) + 0.1
    p[rng.random(n) < 0.6] = UNKNOWN
    tree = balanced(p)
    known = ~np.isnan(p)
    _, estimates, tree_probabilities = tree.table()
    np.testing.assert_array_equal(estimates[known], p[known])  # known keys keep theirs
    # The path products are exactly proportional to the estimates, and sum to 1.
    np.testing.assert_allclose(tree_probabilities, estimates / estimates.sum())
    assert tree.probabilities(0.05).sum() == pytest.approx(1.0)
    if known.any():  # every estimate is a weighted mean of known priorities
        assert p[known].min() - 1e-12 <= estimates.min()
        assert estimates.max() <= p[known].max() + 1e-12


def test_priority_estimates_hand_worked():
    # N P(k) = (1, 2, 0.5, 1), so the Horvitz-Thompson weights are (1, 0.5, 2, 1); keys 0 and 2
    # are sampled for the first time. eps = 0.1, rate 0.5, alpha = 1, everything starts at 1.
    p, probabilities, first = [2.0, 4.0, 1.0, 3.0], [0.1, 0.2, 0.05, 0.1], [1, 0, 1, 0]
    inserts = {}
    for design in priorities.PRIORITISATIONS:
        estimates = priorities.PriorityEstimates(design, epsilon=0.1, rate=0.5)
        written = estimates.update(p, probabilities, 10, first)
        inserts[design] = estimates.insert_priority
        if design == "uniform":
            np.testing.assert_array_equal(written, p)
            continue
        # All keys: (1*2 + 0.5*4 + 2*1 + 1*3) / 4.5 = 2; the mean moves half way: 1.5.
        assert estimates.mean_weight == pytest.approx(1.5)
        # Unassigned keys: sums 1 + (4 - 1) / 2 = 2.5 and 1 + (3 - 1) / 2 = 2: mean 1.25.
        assert estimates.unassigned_sum / estimates.unassigned_count == pytest.approx(1.25)
        np.testing.assert_allclose(written, np.add(p, 0.1 / 0.9 * 1.5))  # + the uniform share
    assert inserts["lazy"] == pytest.approx(1.25 + 1 / 6)
    assert inserts["lazy_global"] == pytest.approx(1.5 / 0.9)  # today's (m / (1 - eps))
    assert inserts["max"] == pytest.approx(4.0 + 1 / 6)
    assert inserts["uniform"] == 1.0
    # A batch with no key sampled for the first time scales both sums alike: the unassigned
    # mean, and so lazy's new-key priority, stay where they were while the global mean moves.
    estimates = priorities.PriorityEstimates("lazy", epsilon=0.1, rate=0.5)
    estimates.update(p, probabilities, 10, first)
    estimates.update([5.0] * 4, [0.1] * 4, 10, [0] * 4)
    assert estimates.unassigned_sum / estimates.unassigned_count == pytest.approx(1.25)
    assert estimates.mean_weight == pytest.approx(3.25)
    assert estimates.insert_priority == pytest.approx(1.25 + 0.1 / 0.9 * 3.25)
    with pytest.raises(ValueError, match="prioritisation"):
        priorities.PriorityEstimates("tree", 0.1, 0.5)


def test_replay_model_is_fifo_and_proportional():
    model = priorities.ReplayModel(capacity=3, exponent=0.5)
    for key, priority in zip("abcd", [4.0, 1.0, 9.0, 16.0]):
        model.insert(key, priority)
    assert list(model.priorities) == ["b", "c", "d"]  # "a" evicted first
    np.testing.assert_allclose(model.probabilities(["b", "c", "d"]), [1 / 8, 3 / 8, 4 / 8])
    model.update(["a", "b"], [100.0, 9.0])  # "a" is gone: ignored, as Reverb does
    assert list(model.priorities) == ["b", "c", "d"] and len(model) == 3
    np.testing.assert_allclose(model.probabilities(["b"]), [3 / 10])
