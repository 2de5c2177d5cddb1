"""The players the web app offers: bots, graded bots and policies, each under a key the page
names it by, with its label and its rating; nothing a request says opens a file."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ...players.bots import BOT_NAMES, Player, graded_name, graded_p, make_bot
from ..play import load_opponent
from .schemas import (
    HUMAN,
)


@dataclass(frozen=True)
class OfferedPlayer:
    """A player the server offers by ``key``; ``make()`` gives the one a new game uses."""

    key: str
    label: str
    make: Callable[[], Player]
    elo: float | None = None
    """Its rating in the shipped league (:func:`buttonup_env.players.shipped.shipped_ratings`), if
    any."""


def _bot_key(spec: str) -> str | None:
    """The key of the bot or graded bot ``spec`` names (``perfect-0.50``: ``perfect-0.5``),
    None for a policy. Raises ``ValueError`` for ``perfect-`` and no probability."""
    name = spec.lower()
    if name in BOT_NAMES:
        return name
    p = graded_p(name)
    return None if p is None else graded_name(p)


def _taken(key: str, keys: set[str]) -> bool:
    """True when a policy cannot have ``key``: taken, or the name of a bot or graded bot."""
    try:
        bot = _bot_key(key) is not None
    except ValueError:  # perfect-<not a probability>: no bot's name
        bot = False
    return key in keys or bot


def _bot_label(key: str, levels: tuple[str, ...]) -> str:
    if key in BOT_NAMES:
        return f"the {key} bot"
    percent = f"{100 * (graded_p(key) or 0.0):g}%"
    if key in levels:
        return f"level {levels.index(key) + 1} of {len(levels)}: perfect, {percent} random moves"
    return f"the perfect bot with {percent} random moves"


def offer(
    specs: Iterable[str],
    labels: dict[str, str] | None = None,
    levels: Iterable[str] = (),
    ratings: dict[str, float] | None = None,
) -> list[OfferedPlayer]:
    """The players the page offers: each of ``specs`` (a bot name, a graded bot ``perfect-P``
    or a policy file, in order), then the built-in bots not among them, the graded bots of
    ``levels`` between the greedy and the perfect bot.

    A bot is made anew for every game; a policy is loaded once and shared (it is deterministic).
    ``labels`` may name a spec (e.g. the shipped agent); ``ratings`` gives the Elo rating of a
    bot by its name or of a policy by its spec. Raises ``ValueError`` with one line for a spec
    that names no bot and no readable policy.
    """
    labels = labels or {}
    ratings = ratings or {}
    levels = tuple(_bot_key(level) or level for level in levels)
    offered: list[OfferedPlayer] = []
    keys: set[str] = {HUMAN}
    for spec in [*specs, "random", "greedy", *levels, "perfect"]:
        key = _bot_key(spec)
        if key is not None:
            if key in keys:
                continue
            label = labels.get(spec, _bot_label(key, levels))
            make = functools.partial(make_bot, key)
            offered.append(OfferedPlayer(key, label, make, ratings.get(key)))
            keys.add(key)
            continue
        player, _ = load_opponent(spec)
        stem = Path(spec).stem or "policy"
        key, n = stem, 1
        while _taken(key, keys):
            n += 1
            key = f"{stem}-{n}"
        keys.add(key)
        label = labels.get(spec, f"the policy {Path(spec).name}")
        offered.append(OfferedPlayer(key, label, lambda player=player: player, ratings.get(spec)))
    return offered
