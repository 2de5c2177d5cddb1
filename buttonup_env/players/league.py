"""A league table: ratings on one Elo scale for bots, graded bots and policies.

Players meet in matches to the target (15 points, the rules' match), and the results are fitted
with the Bradley-Terry model on the Elo scale: player ``a`` beats player ``b`` in a match with
probability ``1 / (1 + 10 ** (-(r_a - r_b) / 400))``, the random bot fixed at 0.

**Playing.** The matches are played by :mod:`buttonup_env.players.arena`: all of them at once, each
pair's from a generator of its own (seeded from the league's seed and the two names), so a
pair's matches are the same whatever else the league holds.

**Fitting.** :func:`fit_ratings` finds the ratings of largest posterior probability with scipy's
optimiser. The prior counts as ``prior`` extra matches per pair of players that met, won by each
side half of the time (half a match by default), which keeps ratings finite when a pair never
loses (the perfect bot against the random bot wins every match) and pulls gaps towards 0 by a
few Elo where results are mixed. A rating's 95% interval holds the values at which the log
posterior, the other ratings refitted, is within 1.92 of its top (a profile likelihood interval,
relative to the fixed players): lopsided where the results are.

**During training.** :func:`rate_against_ladder` rates one policy against a fixed ladder of
reference players whose ratings are held fixed, those of the shipped league
(``models/league.json``) for the default ladder (``training/train.py`` logs it at
every periodic evaluation).

Players by name: :func:`buttonup_env.players.arena.make_player`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..game.rules import DEFAULT_TARGET, is_whole_number
from .arena import PairResult, make_player, play_pairs, player_specs
from .bots import BOT_NAMES, GRADED_PREFIX
from .shipped import shipped_ratings

ELO_SCALE = 400 / math.log(10)
"""Elo points per unit of log-odds: a gap of 400 is odds of 10 to 1."""

ANCHOR = "random"
"""The player whose rating is fixed at 0 when it plays in a league."""

PRIOR_MATCHES = 0.5
"""The prior of :func:`fit_ratings`: extra matches per pair that met, half won by each side
(half a match: a quarter of a win for each)."""

DEFAULT_LADDER = ("random", "greedy", "perfect-0.25", "perfect-0.1", "perfect-0.05", "perfect")
"""The reference players that :func:`rate_against_ladder` rates a policy against."""

LADDER_MATCHES = 400
"""Matches per pair in the league that rates a ladder's players the shipped league does not
(:func:`ladder_ratings`)."""

LADDER_SEED = 2028
"""Seed of that league (fixed, so that every rating against one ladder uses the same scale)."""

ROUND_ROBIN_MAX = 12
"""The ``auto`` schedule plays a round robin up to this many players (66 pairs)."""

# --- schedules ---------------------------------------------------------------------------------


def round_robin(count: int) -> list[tuple[int, int]]:
    """Every pair of ``count`` players once: ``(i, j)`` with ``i < j``."""
    return [(i, j) for i in range(count) for j in range(i + 1, count)]


def neighbour_schedule(
    count: int, neighbours: int, references: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """A schedule for many players: each of the ``count`` players (in the order given, e.g. a
    run's snapshots by step) plays the next ``neighbours`` players, and the ``references``
    (indices of players such as the bots) play every other player, so that the pairs cover the
    whole scale at a cost that grows linearly with the players."""
    if not is_whole_number(neighbours) or neighbours < 1:
        raise ValueError(f"neighbours={neighbours!r} is not allowed; use a whole number >= 1")
    pairs = set()
    for i in range(count):
        for j in range(i + 1, min(count, i + 1 + neighbours)):
            pairs.add((i, j))
    for r in references:
        for j in range(count):
            if j != r:
                pairs.add((min(r, j), max(r, j)))
    return sorted(pairs)


SCHEDULES = ("auto", "round-robin", "neighbours")
"""The schedules :func:`schedule` knows."""


def schedule(
    names: Sequence[str], kind: str = "auto", neighbours: int = 2
) -> list[tuple[int, int]]:
    """The pairs (indices into ``names``) that meet: ``round-robin``; ``neighbours`` (see
    :func:`neighbour_schedule`, the bots and graded bots as references); or ``auto``, a round
    robin up to :data:`ROUND_ROBIN_MAX` players and ``neighbours`` beyond."""
    if kind not in SCHEDULES:
        raise ValueError(f"schedule {kind!r} is not known; use one of {', '.join(SCHEDULES)}")
    if len(names) < 2:
        raise ValueError(f"a league needs at least two players, got {len(names)}")
    if kind == "round-robin" or (kind == "auto" and len(names) <= ROUND_ROBIN_MAX):
        return round_robin(len(names))
    references = [i for i, n in enumerate(names) if n in BOT_NAMES or n.startswith(GRADED_PREFIX)]
    return neighbour_schedule(len(names), neighbours, references)


# --- fitting -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rating:
    """A player's rating on the Elo scale, its interval and the matches behind it."""

    elo: float
    interval: tuple[float, float]
    """The 95% interval (both ends equal for a fixed player)."""
    matches: int

    def to_dict(self) -> dict[str, Any]:
        return {"elo": self.elo, "interval": list(self.interval), "matches": self.matches}


@dataclass
class LeagueTable:
    """The fitted ratings of a league (:func:`fit_ratings`)."""

    ratings: dict[str, Rating]
    """By player, best first."""
    fixed: dict[str, float]
    """The players whose ratings were fixed, and their ratings."""
    prior: float
    """Extra matches per pair that met, half won by each side (see :func:`fit_ratings`)."""
    confidence: float
    covariance: np.ndarray = field(repr=False)
    """Covariance of the ratings in the order of :attr:`names` (zero for fixed players)."""
    names: list[str] = field(repr=False)
    """The players, in the order of :attr:`covariance`."""
    pairs: list[PairResult] = field(repr=False)

    def elo(self, name: str) -> float:
        """``name``'s rating."""
        return self.ratings[name].elo

    def win_probability(self, a: str, b: str) -> float:
        """The probability that ``a`` beats ``b`` in a match, by their ratings."""
        return float(expected_score(self.elo(a) - self.elo(b)))

    def gap_interval(self, a: str, b: str) -> tuple[float, float]:
        """The interval of the rating gap ``a`` minus ``b`` in the normal approximation (the
        gap plus or minus ``z`` standard errors from :attr:`covariance`)."""
        i, j = self.names.index(a), self.names.index(b)
        c = self.covariance
        sd = math.sqrt(max(c[i, i] + c[j, j] - 2 * c[i, j], 0.0))
        gap = self.elo(a) - self.elo(b)
        z = _z(self.confidence)
        return (gap - z * sd, gap + z * sd)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``training/league.py --json``: ratings and pairs."""
        return {
            "ratings": {name: r.to_dict() for name, r in self.ratings.items()},
            "pairs": [p.to_dict() for p in self.pairs],
            "fixed": self.fixed,
            "prior_matches": self.prior,
            "confidence": self.confidence,
        }

    def table(self) -> str:
        """The ratings as a text table: player, rating, interval, matches."""
        width = max(len("player"), *(len(n) for n in self.ratings))
        lines = [f"{'player':<{width}}  {'elo':>6}  {'95% interval':>15}  {'matches':>7}"]
        for name, r in self.ratings.items():
            low, high = r.interval
            span = "(fixed)" if name in self.fixed else f"{low:.0f} to {high:.0f}"
            lines.append(f"{name:<{width}}  {r.elo:>6.0f}  {span:>15}  {r.matches:>7}")
        return "\n".join(lines)


def expected_score(gap: float | np.ndarray) -> float | np.ndarray:
    """The probability of winning a match with a rating ``gap`` (Bradley-Terry, Elo scale)."""
    return 1.0 / (1.0 + 10.0 ** (-np.asarray(gap, dtype=float) / 400.0))


def _z(confidence: float) -> float:
    """The normal quantile of a two-sided ``confidence`` (1.96 for 0.95)."""
    return float(_scipy().special.ndtri(0.5 + confidence / 2))


def _scipy() -> Any:
    try:
        import scipy.optimize
        import scipy.special
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "fitting ratings needs scipy: pip install scipy (it comes with 'buttonup-env[train]')"
        ) from error
    return scipy


class _Posterior:
    """The negative log posterior of ratings (in log-odds units, one per player) given the
    pairs' results and the prior; each player's derivative is its expected wins minus its wins."""

    def __init__(self, a: np.ndarray, b: np.ndarray, wins: np.ndarray, losses: np.ndarray,
                 players: int) -> None:  # fmt: skip
        self.scipy = _scipy()
        self.a, self.b, self.wins, self.losses = a, b, wins, losses
        self.total = wins + losses
        self.design = np.zeros((len(a), players))  # d(gap of pair k) / d(rating): +1 a, -1 b
        np.add.at(self.design, (np.arange(len(a)), a), 1.0)
        np.add.at(self.design, (np.arange(len(a)), b), -1.0)

    def value(self, r: np.ndarray) -> float:
        gap = r[self.a] - r[self.b]
        log_expit = self.scipy.special.log_expit
        return float(-(self.wins * log_expit(gap) + self.losses * log_expit(-gap)).sum())

    def gradient(self, r: np.ndarray) -> np.ndarray:
        gap = r[self.a] - r[self.b]
        return -self.design.T @ (self.wins - self.total * self.scipy.special.expit(gap))

    def hessian(self, r: np.ndarray) -> np.ndarray:
        p = self.scipy.special.expit(r[self.a] - r[self.b])
        return self.design.T @ (self.design * (self.total * p * (1 - p))[:, None])

    def top(self, r: np.ndarray, free: list[int]) -> np.ndarray:
        """``r`` with the ratings ``free`` moved to the top of the posterior, the rest kept."""
        if not free:
            return r
        r = r.copy()

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            r[free] = x
            return self.value(r), self.gradient(r)[free]

        def hessian(x: np.ndarray) -> np.ndarray:
            r[free] = x
            return self.hessian(r)[np.ix_(free, free)]

        result = self.scipy.optimize.minimize(
            objective, r[free], jac=True, hess=hessian, method="trust-exact"
        )
        # The gradient is each player's expected wins minus its wins (the prior's included):
        # where they agree within a thousandth of a match the ratings are within about a
        # hundredth of an Elo point of the top, whatever the optimiser says about rounding.
        if not result.success and np.abs(result.jac).max() > 1e-3:  # pragma: no cover
            raise RuntimeError(f"the rating fit did not converge: {result.message}")
        r[free] = result.x
        return r

    def profile_interval(
        self, r_top: np.ndarray, free: list[int], i: int, drop: float
    ) -> tuple[float, float]:
        """The ratings of player ``i`` where the posterior, the other ``free`` ratings at their
        top for each, falls ``drop`` below its top (a profile likelihood interval)."""
        top = self.value(r_top)
        others = [j for j in free if j != i]
        warm = [r_top]  # the last refit: the next one starts from it

        def excess(v: float) -> tuple[float, float]:
            """How far the profile is below the cut at ``v``, and its slope there (the
            derivative in ``r_i`` at the refit: the other derivatives are 0 there)."""
            r = warm[0].copy()
            r[i] = v
            r = warm[0] = self.top(r, others)
            return self.value(r) - top - drop, float(self.gradient(r)[i])

        centre = r_top[i]
        half = math.sqrt(2 * drop / max(self.hessian(r_top)[i, i], 1e-12))  # the normal one
        ends = []
        for sign in (-1.0, 1.0):
            warm[0] = r_top
            # The profile is convex: Newton's steps from the normal approximation's end reach
            # the cut from outside and then close in on it without passing it.
            found = self.scipy.optimize.root_scalar(
                excess, x0=centre + sign * half, fprime=True, method="newton", xtol=1e-9
            )
            if not (found.converged and sign * (found.root - centre) > 0):  # pragma: no cover
                raise RuntimeError(f"the interval of a rating was not found: {found.flag}")
            ends.append(found.root)
        return ends[0], ends[1]


def fit_ratings(
    pairs: Sequence[PairResult],
    fixed: Mapping[str, float] | None = None,
    prior: float = PRIOR_MATCHES,
    confidence: float = 0.95,
) -> LeagueTable:
    """Bradley-Terry ratings on the Elo scale from the results of ``pairs``.

    ``fixed`` gives players whose ratings are not fitted (default: the random bot at 0, or,
    without it, the first pair's ``a`` at 0). The rest maximise the log posterior::

        sum over pairs (wins_a + prior/2) log P(a beats b) + (losses_a + prior/2) log P(b beats a)

    with ``P(a beats b) = 1 / (1 + 10 ** (-(r_a - r_b) / 400))``: the prior counts as
    ``prior`` extra matches per pair, won by each side half of the time, which keeps every
    rating finite when a pair never loses. It is concave, so scipy's trust-region optimiser
    finds its one top. A player's interval holds the ratings at which the log posterior, the
    other ratings refitted for each, is within ``z**2 / 2`` of its top (1.92 for 95%): a profile
    likelihood interval, lopsided where the results are (``perfect`` against ``random``: the
    lower end set by the matches, the upper one by the prior). :attr:`LeagueTable.covariance`
    (the inverse curvature at the top) gives the normal approximation.

    Raises ``ValueError`` for a player with no path of played pairs to a fixed player (its
    rating would be anything) and for a bad ``prior`` or ``confidence``.
    """
    if not pairs:
        raise ValueError("no pairs to fit: a league needs at least one pair that played")
    if not isinstance(prior, int | float) or not 0 < prior < math.inf:
        raise ValueError(f"prior={prior!r} is not allowed; use a number of matches > 0")
    if not isinstance(confidence, float) or not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r} is not allowed; use a number in (0, 1)")
    names, fixed = league_names(pairs, fixed)
    index = {name: i for i, name in enumerate(names)}
    _check_connected(names, pairs, fixed)
    free = [i for i, name in enumerate(names) if name not in fixed]
    posterior = _Posterior(
        np.array([index[p.a] for p in pairs]),
        np.array([index[p.b] for p in pairs]),
        np.array([p.wins_a for p in pairs], dtype=float) + prior / 2,
        np.array([p.matches - p.wins_a for p in pairs], dtype=float) + prior / 2,
        len(names),
    )
    start = np.zeros(len(names))
    for name, value in fixed.items():
        start[index[name]] = value / ELO_SCALE  # in log-odds units while fitting
    r = posterior.top(start, free)
    covariance = np.zeros((len(names), len(names)))
    if free:
        inverse = np.linalg.inv(posterior.hessian(r)[np.ix_(free, free)])
        covariance[np.ix_(free, free)] = inverse * ELO_SCALE**2
    drop = _z(confidence) ** 2 / 2
    played = dict.fromkeys(names, 0)
    for p in pairs:
        played[p.a] += p.matches
        played[p.b] += p.matches
    ratings = {}
    for i in sorted(range(len(names)), key=lambda i: -r[i]):
        if i in free:
            low, high = posterior.profile_interval(r, free, i, drop)
        else:
            low = high = r[i]
        interval = (float(low * ELO_SCALE), float(high * ELO_SCALE))
        ratings[names[i]] = Rating(float(r[i] * ELO_SCALE), interval, played[names[i]])
    return LeagueTable(
        ratings=ratings,
        fixed=fixed,
        prior=float(prior),
        confidence=confidence,
        covariance=covariance,
        names=names,
        pairs=list(pairs),
    )


def league_names(
    pairs: Sequence[PairResult], fixed: Mapping[str, float] | None
) -> tuple[list[str], dict[str, float]]:
    """The players of ``pairs`` in the order they first play (then the fixed players without a
    match here), and the fixed ratings (default: the random bot at 0, or, without it, the
    first pair's ``a``)."""
    names: list[str] = []
    for p in pairs:
        for name in (p.a, p.b):
            if name not in names:
                names.append(name)
    if fixed is None:
        fixed = {ANCHOR: 0.0} if ANCHOR in names else {pairs[0].a: 0.0}
    held = {name: float(value) for name, value in fixed.items()}
    names += [name for name in held if name not in names]  # fixed, maybe with no match here
    return names, held


def _check_connected(
    names: list[str], pairs: Sequence[PairResult], fixed: Mapping[str, float]
) -> None:
    """Every player must reach a fixed player through pairs that played."""
    reached = set(fixed)
    edges = [(p.a, p.b) for p in pairs if p.matches > 0]
    grown = True
    while grown:
        grown = False
        for x, y in edges:
            if (x in reached) != (y in reached):
                reached |= {x, y}
                grown = True
    cut = [name for name in names if name not in reached]
    if cut:
        raise ValueError(
            f"{', '.join(map(repr, cut))} never met, directly or through others, a player "
            f"whose rating is fixed ({', '.join(map(repr, fixed))}): the ratings are not defined"
        )


# --- a whole league ------------------------------------------------------------------------------


def run_league(
    specs: Sequence[str],
    matches: int,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
    schedule_kind: str = "auto",
    neighbours: int = 2,
    prior: float = PRIOR_MATCHES,
    progress: Callable[[int, int], None] | None = None,
) -> LeagueTable:
    """Play a league of the players ``specs`` name (see :func:`player_specs`) and fit it.

    ``matches`` per pair of :func:`schedule`; the random bot is fixed at 0, or without it the
    first player. ``progress(done, total)`` is called as matches finish.
    """
    named = player_specs(specs)
    names = [name for name, _ in named]
    pairs = schedule(names, schedule_kind, neighbours)
    players = [make_player(spec, name) for name, spec in named]
    total = len(pairs) * matches
    results = play_pairs(
        players,
        pairs,
        matches,
        seed,
        target,
        progress=None if progress is None else lambda done: progress(done, total),
    )
    anchor = ANCHOR if ANCHOR in names else names[0]
    return fit_ratings(results, fixed={anchor: 0.0}, prior=prior)


# --- rating against a ladder ---------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def ladder_ratings(
    ladder: tuple[str, ...] = DEFAULT_LADDER,
    matches: int = LADDER_MATCHES,
    seed: int = LADDER_SEED,
) -> dict[str, float]:
    """The ratings of a ladder's players: those of the shipped league
    (:func:`buttonup_env.players.shipped.shipped_ratings`, the scale the web app shows) when it
    rates them all, as it does the default ladder; otherwise from a round robin of ``matches`` per
    pair among them (the random bot at 0, or the first player), played once per process."""
    shipped = shipped_ratings()
    if all(name in shipped for name in ladder):
        return {name: shipped[name] for name in ladder}
    table = run_league(ladder, matches, seed)
    return {name: table.elo(name) for name in ladder}


def check_ladder(ladder: Sequence[str]) -> tuple[str, ...]:
    """``ladder`` as a tuple, after checking that it names two or more players, each once,
    none of them a run folder. Raises ``ValueError`` otherwise."""
    ladder = tuple(str(name) for name in ladder)
    named = player_specs(ladder)
    if len(named) != len(ladder):
        raise ValueError(f"the ladder {list(ladder)} holds a run folder; name players one by one")
    if len(ladder) < 2:
        raise ValueError(f"a ladder needs at least two players, got {list(ladder)}")
    return tuple(name for name, _ in named)


def rate_against_ladder(
    policy: str | Path | Any,
    ladder: Sequence[str] = DEFAULT_LADDER,
    matches: int = 200,
    seed: int = 0,
    target: int = DEFAULT_TARGET,
) -> dict[str, Any]:
    """The rating of ``policy`` (a player's name or file, or a loaded policy) against a fixed
    ladder of reference players.

    ``matches`` are shared evenly between the ladder's players (seats and starters
    alternating), and the policy's rating is fitted with the ladder's ratings
    (:func:`ladder_ratings`) held fixed, so that ratings of different policies, such as one
    run's snapshots, are on the same scale. Returns ``{"elo", "elo_low", "elo_high",
    "ladder_matches", "ladder_score"}``: the rating, its 95% interval, the matches played and
    the share of them won.
    """
    ladder = check_ladder(ladder)
    if not is_whole_number(matches) or matches < len(ladder):
        raise ValueError(
            f"matches={matches!r} is not allowed; use a whole number >= {len(ladder)}, at least "
            "one match against each player of the ladder"
        )
    fixed = ladder_ratings(ladder)
    name = "rated policy"
    player = make_player(policy, name)
    player.name = name
    members = [make_player(spec) for spec in ladder]
    per_pair = matches // len(ladder)
    results = play_pairs(
        [player, *members], [(0, j) for j in range(1, len(ladder) + 1)], per_pair, seed, target
    )
    table = fit_ratings(results, fixed=fixed)
    rating = table.ratings[name]
    wins = sum(r.wins_a for r in results)
    played = per_pair * len(ladder)
    return {
        "elo": rating.elo,
        "elo_low": rating.interval[0],
        "elo_high": rating.interval[1],
        "ladder_matches": played,
        "ladder_score": wins / played,
    }
