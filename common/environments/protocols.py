"""What the agent sees and how episodes end: each paper's Atari protocol (`PROTOCOLS`) and MinAtar's
published one (`MINATAR_PROTOCOL`), and the environment frames one agent step consumes."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from common.environments.env_names import env_family


@dataclasses.dataclass(frozen=True)
class AtariProtocol:
    """The Atari settings of one paper's experiments (what the agent sees and how episodes end)."""

    name: str
    frame_skip: int  # action repeat: each agent action is applied to this many emulator frames
    screen_size: int  # frames are resized to screen_size x screen_size
    frame_stack: int  # observation = the last frame_stack processed frames, channels last
    noop_max: int  # random no-op starts: up to this many raw NOOP frames after each reset
    repeat_action_probability: float  # sticky actions
    full_action_space: bool  # 18 actions, or the game's minimal action set
    terminal_on_life_loss: bool  # a lost life sets `terminated` (the game itself continues)
    reward_clip: float | None  # reward = clip(raw, -c, c); None: reward = raw
    max_episode_frames: int  # episode cap in emulator frames (action repeats included): truncation


PROTOCOLS: dict[str, AtariProtocol] = {
    "impala": AtariProtocol(
        name="impala",
        frame_skip=4,  # Table G.1 "Action repetitions 4"
        screen_size=84,  # Table G.1 "84 x 84"
        frame_stack=4,  # Table G.1 "Frame stacking 4"
        noop_max=30,  # §5.3.2: evaluation starts with up to 30 no-ops; training too (ours)
        repeat_action_probability=0.0,  # choice: no sticky actions (none mentioned)
        full_action_space=False,  # App. G: only the multi-task agent uses the full set
        terminal_on_life_loss=True,  # Table G.1 "End of episode when life lost: yes"
        reward_clip=1.0,  # Table G.1 "Reward clipping [-1, 1]"
        max_episode_frames=108_000,  # choice: 30 minutes of play (not stated)
    ),
    "dice_gdi_lbc": AtariProtocol(
        name="dice_gdi_lbc",
        frame_skip=4,  # DiCE Table 5, GDI Table 5, LBC Table 3: action repeats 4
        screen_size=84,  # same tables: image size (84, 84)
        frame_stack=4,  # same tables: frame stacks 4
        noop_max=30,  # same tables: random no-ops 30
        repeat_action_probability=0.0,  # GDI Table 5, LBC Table 3; DiCE does not say
        full_action_space=True,  # DiCE Table 5, GDI Table 5, LBC Table 3: full (18 actions)
        terminal_on_life_loss=False,  # DiCE Table 5 "No"; GDI, LBC: life information "Not allowed"
        reward_clip=None,  # "Reward Clip: No": the learners shape raw rewards themselves
        max_episode_frames=108_000,  # LBC Table 3 (30 min); DiCE silent; GDI App. H says 100K
    ),
}


@dataclasses.dataclass(frozen=True)
class MinAtarProtocol:
    """MinAtar's published protocol (Young & Tian 2019; the MinAtar README): what the agent sees
    and how episodes end. The fields are what `make_env` can vary; the class constants are fixed
    by the games themselves."""

    name: str = "minatar"
    # `minatar.Environment(sticky_action_prob=0.1)`, the default (MinAtar's environment.py) of
    # the published experiments (Young & Tian 2019): with this probability the previous action is
    # played instead of the chosen one.
    sticky_action_prob: float = 0.1
    # `minatar.Environment(difficulty_ramping=True)`, the default (MinAtar's environment.py; the
    # MinAtar README: Asterix, Seaquest and Space Invaders speed up as the game goes on).
    difficulty_ramping: bool = True
    # Rewards as the game gives them (+1 per treasure, brick, crossing or enemy; Seaquest's
    # oxygen bonus; MinAtar README): no clipping.
    reward_clip: float | None = None

    # One agent action is one game frame: MinAtar's games have no frame skip or action repeat.
    frame_skip: ClassVar[int] = 1
    # No frame stacking: the agent sees the one [10, 10, C] state, whose trail channels show
    # motion (MinAtar README).
    frame_stack: ClassVar[int] = 1
    # MinAtar's games have no lives: an episode is one game.
    terminal_on_life_loss: ClassVar[bool] = False
    # No cap beyond the games' own ends (Freeway ends itself after 2500 frames, MinAtar's
    # freeway.py); `truncated` is never set.
    max_episode_frames: ClassVar[int | None] = None


MINATAR_PROTOCOL = MinAtarProtocol()


def frames_per_step(env: str, protocol: str | AtariProtocol = "impala") -> int:
    """Environment frames one agent step consumes: the protocol's action repeat on Atari (frames
    count action repeats, as IMPALA Table 1 does), 1 on CartPole and on MinAtar (no frame skip,
    `MinAtarProtocol.frame_skip`)."""
    family = env_family(env)
    if family == "cartpole":
        return 1
    if family == "minatar":
        return MinAtarProtocol.frame_skip
    return (PROTOCOLS[protocol] if isinstance(protocol, str) else protocol).frame_skip
