"""Lazy prioritisation against reactor.md §9 Tests 13-14 (the CPT worked example, the replay
mixture and its importance weights) and the Reverb mapping's estimator."""

import numpy as np
import pytest

from reactor import priorities

UNKNOWN = np.nan
# Test 13: keys 1..6, root 4 (p = 3), left subtree {1, 2, 3} unknown, right subtree root 6
# (p = 6) with left child 5 unknown.
TEST13 = [UNKNOWN, UNKNOWN, UNKNOWN, 3.0, UNKNOWN, 6.0]
TEST13_PROBABILITIES = [1 / 6, 1 / 6, 1 / 6, 0.1, 0.2, 0.2]


def test_the_balanced_tree_is_test_13_s_tree():
    root = priorities.ContextualPriorityTree.root_of
    assert root(0, 5) == 3  # key 4
    assert (root(0, 2), root(0, 0), root(2, 2)) == (1, 0, 2)  # key 2, children 1 and 3
    assert (root(4, 5), root(4, 4)) == (5, 4)  # key 6 with left child 5


def test_cpt_worked_example():
    tree = priorities.ContextualPriorityTree(TEST13)
    np.testing.assert_allclose(tree.estimates, [5, 5, 5, 3, 6, 6])  # 5 = 1/3 * 3 + 2/3 * 6
    # The path-product probability query gives the same numbers as p_hat / sum(p_hat).
    np.testing.assert_allclose(tree.tree_probabilities, TEST13_PROBABILITIES, atol=1e-12)
    np.testing.assert_allclose(tree.estimates / tree.estimates.sum(), TEST13_PROBABILITIES)
    assert tree.probabilities().sum() == pytest.approx(1.0)


def test_cpt_all_known_is_exact_proportional_and_none_known_is_uniform():
    known = [2.0, 1.0, 4.0, 3.0, 5.0, 6.0]
    np.testing.assert_allclose(
        priorities.ContextualPriorityTree(known).probabilities(),
        [0.095238, 0.047619, 0.190476, 0.142857, 0.238095, 0.285714],
        atol=1e-6,
    )
    np.testing.assert_allclose(
        priorities.ContextualPriorityTree([UNKNOWN] * 6).probabilities(), np.full(6, 1 / 6)
    )


def test_cpt_fig6_caption_pattern_on_a_larger_tree():
    # 11 keys; known: key 4 (index 3) = 2, key 6 (index 5) = 9 (the root), key 10 (index 9) = 7.
    p = np.full(11, UNKNOWN)
    p[[3, 5, 9]] = [2.0, 9.0, 7.0]
    tree = priorities.ContextualPriorityTree(p)
    # Keys 8, 9, 11 share their subtree only with key 10: they get its priority (Fig. 6).
    np.testing.assert_allclose(tree.estimates[[7, 8, 10]], 7.0)
    assert tree.probabilities().sum() == pytest.approx(1.0)


def test_cpt_sampling_frequencies_match_the_probabilities():
    tree = priorities.ContextualPriorityTree(TEST13)
    rng = np.random.default_rng(0)
    n = 20_000
    counts = np.bincount([tree.sample(rng, 0.1) for _ in range(n)], minlength=6)
    expected = tree.probabilities(0.1)
    np.testing.assert_allclose(counts / n, expected, atol=4 * np.sqrt(0.25 / n))


def test_test_14_mixture_and_importance_weights():
    tree = priorities.ContextualPriorityTree(TEST13)
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
    estimates = priorities.ContextualPriorityTree(TEST13).estimates
    folded = priorities.sampling_priorities(estimates, estimates.mean(), 0.1, 1.0)
    np.testing.assert_allclose(
        folded / folded.sum(), priorities.ContextualPriorityTree(TEST13).probabilities(0.1)
    )
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
    tree = priorities.ContextualPriorityTree(p)
    known = ~np.isnan(p)
    np.testing.assert_array_equal(tree.estimates[known], p[known])  # known keys keep theirs
    # The path products are exactly proportional to the estimates, and sum to 1.
    np.testing.assert_allclose(tree.tree_probabilities, tree.estimates / tree.estimates.sum())
    assert tree.probabilities(0.05).sum() == pytest.approx(1.0)
    if known.any():  # every estimate is a weighted mean of known priorities
        assert p[known].min() - 1e-12 <= tree.estimates.min()
        assert tree.estimates.max() <= p[known].max() + 1e-12
