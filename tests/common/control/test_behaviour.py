"""common/control/behaviour.py: per-game parameters from real bandit controllers, updated once per
game, saved and restored across processes, and an evaluation mode that plays the best choice.

The controller, `tests.controller_helpers.EtaController`, is built from common.control.bandits'
parts alone, so these tests need no paper package."""

import functools
import os

import numpy as np
import pytest


from common.control import controllers
from common.control import behaviour as behaviour_lib
from tests.controller_helpers import EtaController

SPEC = behaviour_lib.BehaviourSpec(make_controller=EtaController, param_shapes={"eta": ()})
NAN = float("nan")


def counts(selector, env):
    return selector.controller_of(env).state_dict()["selector0/bandit0/counts"].sum()


def test_each_ended_game_updates_its_own_controller_and_redraws_only_there(tmp_path):
    selector = behaviour_lib.Behaviour(SPEC, 3, seed=0, state_path=None)
    before = selector.params["eta"].copy()
    selector.end_games(np.array([NAN, 5.0, NAN]))
    assert [counts(selector, env) for env in range(3)] == [0, 1, 0]
    assert selector.params["eta"][0] == before[0] and selector.params["eta"][2] == before[2]
    assert selector.games_updated == 1


def test_global_scope_shares_one_controller():
    spec = behaviour_lib.BehaviourSpec(SPEC.make_controller, SPEC.param_shapes, scope="global")
    selector = behaviour_lib.Behaviour(spec, 4, seed=0, state_path=None)
    assert len(selector.controllers) == 1
    selector.end_games(np.array([1.0, NAN, 2.0, 3.0]))
    assert counts(selector, 0) == 3


def test_state_survives_a_restart_and_evaluation_plays_the_best_region(tmp_path):
    path = behaviour_lib.state_path(str(tmp_path), actor_id=0)
    selector = behaviour_lib.Behaviour(SPEC, 2, seed=0, state_path=path)
    rng = np.random.default_rng(0)
    for _ in range(40):  # games whose return grows with eta: the bandits learn a high region
        returns = selector.params["eta"].copy()
        selector.end_games(returns + rng.normal(0, 0.1, 2))
    selector.save()
    restarted = behaviour_lib.Behaviour(SPEC, 2, seed=99, state_path=path)
    for env in range(2):
        saved = selector.controller_of(env).state_dict()
        restored = restarted.controller_of(env).state_dict()
        assert restored.keys() == saved.keys()
        for key in saved:  # every statistic; the generator has moved on by the first draw
            if key != "rng":
                np.testing.assert_array_equal(restored[key], saved[key])
    # Evaluation (three envs from a two-controller file): the best region, and no learning.
    evaluation = behaviour_lib.Behaviour(SPEC, 3, seed=5, state_path=path, evaluation=True)
    best = [evaluation.controller_of(env).propose_best()["eta"] for env in range(3)]
    assert np.mean(best) > 25.0  # upper half of [0, 50]: the region that paid
    evaluation.end_games(np.array([1.0, 1.0, 1.0]))
    assert evaluation.games_updated == 0
    assert [counts(evaluation, env) for env in range(3)] == [
        counts(selector, env % 2) for env in range(3)
    ]


def test_bad_scope_or_evaluation_is_refused():
    with pytest.raises(ValueError, match="behaviour scope 'shared' is not one of per_env, global"):
        behaviour_lib.BehaviourSpec(SPEC.make_controller, SPEC.param_shapes, scope="shared")
    with pytest.raises(ValueError, match="evaluation 'greedy' is not one of best, training, own"):
        behaviour_lib.BehaviourSpec(SPEC.make_controller, SPEC.param_shapes, evaluation="greedy")


def test_evaluation_can_play_the_training_distribution(tmp_path):
    path = behaviour_lib.state_path(str(tmp_path), actor_id=0)
    trained = behaviour_lib.Behaviour(SPEC, 1, seed=0, state_path=path)
    for _ in range(30):
        trained.end_games(trained.params["eta"].copy())  # return = eta: the top region pays
    trained.save()
    draws = {}
    for mode in ("best", "training"):
        spec = behaviour_lib.BehaviourSpec(SPEC.make_controller, SPEC.param_shapes, evaluation=mode)
        evaluation = behaviour_lib.evaluation_selector(spec, 1, seed=1, directory=str(tmp_path))
        assert evaluation.evaluation  # actor 0's controllers, frozen
        draws[mode] = []
        for _ in range(40):
            evaluation.end_games(np.array([0.0]))
            draws[mode].append(float(evaluation.params["eta"][0]))
        assert evaluation.games_updated == 0
        assert counts(evaluation, 0) == counts(trained, 0) == 30
    # The best region is one tile (of 10 on x = log(1 + eta)); propose() still explores.
    x_best, x_all = np.log1p(draws["best"]), np.log1p(draws["training"])
    assert np.ptp(x_best) <= np.log(51) / 10 < np.ptp(x_all)


def test_evaluator_with_own_controllers_learns_from_its_games_and_resumes(tmp_path):
    """Evaluation actors run bandit ensembles of their own (GDI §4.1 leaves this open; our reading:
    docs/papers/gdi.md#departures-from-the-paper)."""
    trained = behaviour_lib.Behaviour(
        SPEC, 2, seed=0, state_path=behaviour_lib.state_path(str(tmp_path), 0)
    )
    trained.end_games(np.array([1.0, 1.0]))
    trained.save()  # actor 0's file exists, and the evaluator must not read or write it
    spec = behaviour_lib.BehaviourSpec(SPEC.make_controller, SPEC.param_shapes, evaluation="own")
    first = behaviour_lib.evaluation_selector(spec, 3, seed=7, directory=str(tmp_path))
    assert not first.evaluation and [counts(first, env) for env in range(3)] == [0, 0, 0]
    for _ in range(5):
        first.end_games(np.array([2.0, NAN, 3.0]))
    second_round = behaviour_lib.evaluation_selector(spec, 3, 7, str(tmp_path), current=first)
    assert second_round is first  # the controllers carry over between rounds
    assert [counts(first, env) for env in range(3)] == [5, 0, 5]
    first.save()
    assert os.path.exists(behaviour_lib.evaluator_state_path(str(tmp_path)))
    resumed = behaviour_lib.evaluation_selector(spec, 3, seed=8, directory=str(tmp_path))
    assert [counts(resumed, env) for env in range(3)] == [5, 0, 5]
    with np.load(behaviour_lib.state_path(str(tmp_path), 0)) as saved:
        assert saved["0/selector0/bandit0/counts"].sum() == 1


def test_fixed_controller_never_moves_and_guards_its_saved_value(tmp_path):
    spec = behaviour_lib.BehaviourSpec(
        functools.partial(controllers.FixedController, {"eta": 1.0}), {"eta": ()}
    )
    path = behaviour_lib.state_path(str(tmp_path), actor_id=0)
    selector = behaviour_lib.Behaviour(spec, 2, seed=0, state_path=path)
    selector.end_games(np.array([100.0, -3.0]))
    assert selector.params["eta"].tolist() == [1.0, 1.0]
    selector.save()
    assert behaviour_lib.Behaviour(spec, 2, seed=1, state_path=path).params["eta"].tolist() == [
        1.0,
        1.0,
    ]
    other = behaviour_lib.BehaviourSpec(
        functools.partial(controllers.FixedController, {"eta": 2.0}), {"eta": ()}
    )
    with pytest.raises(ValueError, match=r"saved fixed behaviour params/eta=1.0 differs"):
        behaviour_lib.Behaviour(other, 2, seed=1, state_path=path)
    with pytest.raises(ValueError, match="episode_return must be finite"):
        selector.controllers[0].update({"eta": 1.0}, float("inf"))


def test_summary_reports_the_learned_region():
    selector = behaviour_lib.Behaviour(SPEC, 2, seed=0, state_path=None)
    assert selector.summary()["games"] == 0.0
    for _ in range(40):  # return = eta: the top of [0, 50] pays
        selector.end_games(selector.params["eta"].copy())
    summary = selector.summary()
    assert summary["games"] == 40.0  # 20 games per env, averaged over the two controllers
    assert summary["best_eta"] > 25.0 and summary["best_value"] > summary["mean_value"]
    fixed = behaviour_lib.BehaviourSpec(
        functools.partial(controllers.FixedController, {"eta": 1.0}), {"eta": ()}
    )
    assert behaviour_lib.Behaviour(fixed, 2, seed=0, state_path=None).summary() == {}


def test_the_evaluator_reads_the_lowest_index_actor_s_state(tmp_path):
    directory = str(tmp_path)
    # No actor saved yet: actor 0's path, which does not exist (fresh controllers).
    assert behaviour_lib.first_actor_state(directory) == behaviour_lib.state_path(directory, 0)
    # A cluster whose actor hosts start at --first_actor=5: actor 5's, by index, not by name
    # (actor_12 sorts first as text); an interrupted save's temporary file does not count.
    os.makedirs(os.path.dirname(behaviour_lib.state_path(directory, 0)))
    for name in ["actor_12.npz", "actor_5.npz", "actor_3.npz.tmp.npz", "evaluator.npz"]:
        open(os.path.join(directory, "behaviour", name), "w").close()
    assert behaviour_lib.first_actor_state(directory) == behaviour_lib.state_path(directory, 5)


def play(selector, games: int, seed: int) -> None:
    """`games` rounds of games whose return grows with eta, on every env."""
    rng = np.random.default_rng(seed)
    for _ in range(games):
        selector.end_games(selector.params["eta"] + rng.normal(0, 0.1, selector.num_envs))


def statistics(selector) -> dict[str, np.ndarray]:
    return {k: v for k, v in selector.state_dict().items() if not k.endswith("rng")}


def test_an_actor_running_across_a_resume_rolls_back_to_the_checkpoint_s_state(tmp_path):
    # An actor host of a multi-host run outlives the learner's restart: the learner puts the
    # checkpoint's files back and marks the folder; the actor, at its next save, takes the
    # checkpoint's state instead of writing its newer one over it.
    directory, kept = str(tmp_path / "run"), str(tmp_path / "kept")
    path = behaviour_lib.state_path(directory, actor_id=4)
    actor = behaviour_lib.Behaviour(SPEC, 2, seed=0, state_path=path)
    play(actor, 10, seed=0)
    actor.save()
    behaviour_lib.keep_states(directory, kept)  # the checkpoint
    at_checkpoint = statistics(actor)
    play(actor, 15, seed=1)
    actor.save()
    after_checkpoint = statistics(actor)
    assert counts(actor, 0) == 25
    # A save with no resume in between keeps the actor's own state.
    actor.save()
    assert counts(actor, 0) == 25
    behaviour_lib.restore_states(directory, kept)  # the learner resumes from the checkpoint
    with np.load(path) as restored:  # the file is the checkpoint's again ...
        assert restored["0/selector0/bandit0/counts"].sum() == 10
    play(actor, 2, seed=2)  # ... while the actor still holds its newer state and plays on
    actor.save()
    assert counts(actor, 0) == 10  # rolled back: the games since the resume are not kept either
    for key, value in at_checkpoint.items():
        np.testing.assert_array_equal(statistics(actor)[key], value)
    assert any(not np.array_equal(after_checkpoint[k], v) for k, v in statistics(actor).items())
    with np.load(path) as saved:
        for key, value in at_checkpoint.items():
            np.testing.assert_array_equal(saved[key], value)
    # The roll-back happens once: the next games add to the checkpoint's state.
    play(actor, 3, seed=3)
    actor.save()
    assert counts(actor, 0) == 13
    # An actor that starts after the resume loads the restored file and never rolls back.
    later = behaviour_lib.Behaviour(
        SPEC, 2, seed=7, state_path=behaviour_lib.state_path(directory, 5)
    )
    play(later, 4, seed=4)
    later.save()
    assert counts(later, 0) == 4


def test_a_resume_whose_checkpoint_kept_no_file_of_an_actor_gives_it_new_bandits(tmp_path):
    directory = str(tmp_path / "run")
    path = behaviour_lib.state_path(directory, actor_id=0)
    actor = behaviour_lib.Behaviour(SPEC, 2, seed=0, state_path=path)
    play(actor, 6, seed=0)
    actor.save()
    other = behaviour_lib.state_path(directory, actor_id=1)
    behaviour_lib.Behaviour(SPEC, 2, seed=1, state_path=other).save()
    behaviour_lib.restore_states(directory, None)  # the run starts over: no state at all
    assert sorted(os.listdir(os.path.dirname(path))) == [behaviour_lib.RESTORED]
    actor.save()
    assert counts(actor, 0) == counts(actor, 1) == 0
    fresh = behaviour_lib.Behaviour(SPEC, 2, seed=0, state_path=None)
    for key, value in statistics(fresh).items():
        np.testing.assert_array_equal(statistics(actor)[key], value)
    assert os.path.exists(path) and not os.path.exists(other)
