"""Evaluate a policy against a bot or another policy.

    python training/evaluate.py --model buttonup-ppo --opponent perfect --matches 500
    python training/evaluate.py --model a.onnx --opponent b.onnx --matches 200 --record games.jsonl

Plays N matches with the seats alternating (and the first round's starter alternating every two
matches) and prints, from the model's side: matches won and lost with a 95% Wilson interval,
the mean round margin, the mean regret per decision (how many round points worse than the exact
solver's best move the model's choice was, averaged over the model's decisions), the mean
match regret per decision (the probability of winning the match given away against the best
move of the match), the round regret for each of a round's eight moves (where the mistakes
sit) and matches per second, measured as a card and the training log measure
(``buttonup_env.players.evaluation.evaluate``: the same matches for one seed). ``--json FILE``
writes the same figures; ``--record FILE`` writes the games as match records
(``docs/rules.md``), which ``python -m buttonup_env.replay FILE`` checks. Neither replaces an
existing file without ``--force``, nor a policy the command reads, nor the other.

A player is ``random``, ``greedy``, ``margin`` (perfect play of each round's margin),
``perfect`` (perfect play of the match), a graded bot ``perfect-P`` (a random legal move with
probability P, the perfect move otherwise), the name of a shipped policy (``buttonup-ppo``) or
a path to an exported ``.onnx`` policy (an SB3 ``.zip`` only with ``--trusted``: loading one
runs pickled code).

``--opponent best-response`` measures exploitability instead, exactly and without sampling, at
both levels. The **match** exploitability: how much more often than half the best possible
reply strategy wins the match to ``--target`` against the model, from 0-0, averaged over its
seat and the first round's starter (``buttonup_env.players.best_response``; perfect play of
the match scores 0, the margin player 0.0564 at 15). The **round** exploitability: how many
round points the best reply gains against the model's choices in one round, beyond the round's
value, averaged over all 1,680 set-ups and both seats at 0-0 (``buttonup_env.players.exploit``).
The random and greedy bots' figures are printed beside them.

``--audit`` judges the model at every decision it can meet instead of playing matches, with
``buttonup_env.audit``: every position reachable from the 1,680 set-ups and both starters
under any play, at the score states of ``--scores`` (each ``R-B``, Red's points then Black's,
with both starters; or ``all``, the 225 scores of a match to ``--target`` 15, 450 states; by
default 0-0). Each move is judged against the exact values of the match (the probability of
winning given away) and of the round (the round points given away). It prints the counts
(real choices, the non-optimal ones for the match and for the round) and the losses: in all,
by move number, by kind of position (whether the match asks for another move than the round
there) and, at several scores, the scores of the largest loss; then the ``--worst`` decisions
in the rules' notation. ``--json FILE`` writes the same figures (every score's too), and
``--plot FILE`` draws them as a PNG picture: at several scores the mean loss by score as a
heat map beside the loss by move, at one score the loss and the non-optimal choices by move.
The model's inference is batched (two batches at once on 2 cores). Measured on 2 cores, wall
clock with Python's start: at 0-0, 10 s for a policy blind to the score and 12 s for one that
sees it (as the shipped agent does); ``--scores all``, 4.6 minutes for a blind policy and 18
minutes for one that sees the score, which it asks 174 million times, at every score
(docs/training.md):

    python training/evaluate.py --model buttonup-ppo --audit --plot audit.png
    python training/evaluate.py --model my-agent.onnx --audit --scores all --json audit.json
    python training/evaluate.py --model buttonup-ppo --audit --scores 0-0 14-13 --worst 20
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import tyro
from tqdm import tqdm

from buttonup_env.game.equity import MAX_SOLVED_TARGET
from buttonup_env.game.files import reason
from buttonup_env.game.records import write_records
from buttonup_env.game.rules import LAYOUTS, MAX_TARGET
from buttonup_env.players.audit import audit
from buttonup_env.players.best_response import match_best_response
from buttonup_env.players.bots import BOT_NAMES, GreedyBot, Player, RandomBot, graded_p, make_bot
from buttonup_env.players.evaluation import evaluate
from buttonup_env.players.exploit import exploitability
from buttonup_env.players.policy import PolicyError, load_policy
from buttonup_env.players.shipped import shipped_policies
from buttonup_env.ui.cli import Named, check_outputs, run_cli, write_output
from training.bounds import Matches, Seed
from training.plots import audit_picture
from training.typed_json import Range, check_fields

MAX_WORST = 10_000
"""The most worst decisions ``--audit`` lists."""


@dataclass
class EvaluateArgs:
    """Evaluate a policy (or bot) against an opponent over whole matches."""

    model: str
    """The player measured: a .onnx policy, a shipped policy's name, random|greedy|margin|
    perfect, or a graded bot perfect-P (a random legal move with probability P, else the
    perfect one)."""
    opponent: str = "random"
    """random|greedy|margin|perfect, a graded bot perfect-P, a shipped policy's name, a path to
    another policy, or best-response (the match and round exploitability)."""
    matches: Matches = 1000
    """Matches to play."""
    seed: Seed = 0
    """Seed of the layouts and of the players' random choices."""
    target: Annotated[int, Range(1, MAX_TARGET)] = 15
    """Points that win a match."""
    json: Path | None = None
    """Write the figures to this JSON file (its folder must exist)."""
    record: Path | None = None
    """Write the games to this JSON Lines file (match records, see docs/rules.md)."""
    force: bool = False
    """Replace the --json, --record and --plot files if they exist (without it, an existing
    file is kept and the command stops before any work)."""
    trusted: bool = False
    """Allow loading SB3 .zip files (they unpickle code: only files you made)."""
    progress: bool = True
    """Show a progress bar."""
    audit: bool = False
    """Audit every decision the model can meet at --scores against the solved match and
    round, instead of playing matches (so without --opponent, --matches, --seed and
    --record)."""
    scores: tuple[str, ...] = ("0-0",)
    """With --audit: the score states, each R-B (Red's points, then Black's; both starters
    each), or all (every score below --target: 450 states at 15)."""
    plot: Path | None = None
    """With --audit: draw the figures into this PNG file (at several scores the mean loss by
    score as a heat map and by move; at one score the loss and the non-optimal choices by
    move)."""
    worst: Annotated[int, Range(0, MAX_WORST)] = 10
    """With --audit: how many of the worst decisions to list, in the rules' notation (0:
    none)."""


def player_file(spec: str) -> Path | None:
    """The file a player ``spec`` names, None for a bot or a shipped policy (an input of the
    command, which no output may replace)."""
    if spec in BOT_NAMES or spec == BEST_RESPONSE or spec in shipped_policies():
        return None
    try:
        if graded_p(spec) is not None:
            return None
    except ValueError:
        pass
    return Path(spec)


def load_player(spec: str, trusted: bool) -> Player:
    """A bot, a graded bot or a shipped policy by name, or a policy from a file; ``ValueError``
    otherwise."""
    if spec in BOT_NAMES or graded_p(spec) is not None:  # graded_p raises for perfect-<not P>
        return make_bot(spec)
    if spec in shipped_policies():
        return load_policy(spec)
    path = Path(spec)
    if not path.exists():
        raise ValueError(
            f"{spec!r} is neither a bot ({', '.join(BOT_NAMES)}), a shipped policy "
            f"({', '.join(shipped_policies())}) nor an existing policy file"
        )
    return load_policy(path, trusted=trusted)


BEST_RESPONSE = "best-response"

AUDIT_ONLY = {"--scores": ("0-0",), "--plot": None, "--worst": 10}
"""The flags that go with --audit alone, and their defaults."""

NOT_AUDIT = {"--opponent": "random", "--matches": 1000, "--seed": 0, "--record": None}
"""The flags of matches that --audit plays none of, and their defaults."""


def audit_scores(texts: tuple[str, ...], target: int) -> list[tuple[int, int]] | str:
    """The score states of ``--scores``: ``"all"``, or each ``R-B`` as (Red's points, Black's
    points) of a match to ``target``; ``ValueError`` in one sentence for a bad one."""
    if not texts:
        raise ValueError("--scores needs a score state: R-B (e.g. 0-0 or 14-13), or all")
    if "all" in texts:
        if len(texts) > 1:
            raise ValueError("--scores all is every score already; give it alone")
        return "all"
    scores = []
    for text in texts:
        parts = text.split("-")
        if len(parts) != 2 or not all(p.isdecimal() and len(p) <= 4 for p in parts):
            raise ValueError(
                f"--scores {text[:40]!r} is not a score; write R-B (Red's points, then "
                "Black's), e.g. 0-0 or 14-13, or all"
            )
        r, b = int(parts[0]), int(parts[1])
        if r >= target or b >= target:
            raise ValueError(
                f"--scores {text} is not a score of a match to {target}: each player's points "
                f"are a whole number from 0 to {target - 1}"
            )
        scores.append((r, b))
    return scores


def check_audit(args: EvaluateArgs) -> list[tuple[int, int]] | str:
    """The checks of --audit's flags (and of the flags that go with it alone), before any
    work: the score states it audits, or ``ValueError`` in one sentence."""
    if not args.audit:
        given = [flag for flag, default in AUDIT_ONLY.items() if _value(args, flag) != default]
        if given:
            goes = "goes" if len(given) == 1 else "go"
            raise ValueError(f"{' and '.join(given)} {goes} with --audit; add --audit")
        return []
    given = [flag for flag, default in NOT_AUDIT.items() if _value(args, flag) != default]
    if given:
        raise ValueError(
            f"--audit judges the model's every decision and plays no matches; leave out "
            f"{' and '.join(given)}"
        )
    if args.target > MAX_SOLVED_TARGET:
        raise ValueError(
            f"--audit judges the match to --target, which is solved for targets up to "
            f"{MAX_SOLVED_TARGET}, not {args.target}"
        )
    if args.plot is not None and (args.plot.suffix.lower() != ".png" or args.plot.is_dir()):
        raise ValueError(f"--plot {args.plot}: give the .png file to draw")
    return audit_scores(args.scores, args.target)


def _value(args: EvaluateArgs, flag: str) -> object:
    return getattr(args, flag[2:].replace("-", "_"))


def run_audit(args: EvaluateArgs, model: Player, scores: list[tuple[int, int]] | str) -> int:
    """Audit ``model`` at ``scores``, print the summary and write the --json figures and the
    --plot picture."""
    count = args.target**2 if scores == "all" else len(scores)
    with tqdm(
        total=count, unit="score", disable=not args.progress or count == 1, leave=False
    ) as bar:
        found = audit(
            model,
            scores,
            args.target,
            worst=args.worst,
            progress=lambda done, total: bar.update(done - bar.n),
        )
    print(f"{args.model}: {found.summary()}")
    if args.json is not None:
        figures = {"model": args.model, "audit": found.to_dict()}
        write_output(args.json, (json.dumps(figures, indent=2) + "\n").encode())
        print(f"figures written to {args.json}")
    if args.plot is not None:
        write_output(args.plot, audit_picture(found, f"{args.model}: the audit at {found.where()}"))
        print(f"picture drawn in {args.plot}")
    return 0


def best_response(args: EvaluateArgs, model: Player) -> int:
    """Print (and write with --json) the match and round exploitability of the model and of
    two bots."""
    figures: dict[str, dict] = {}
    for name, player in ((args.model, model), ("random", RandomBot()), ("greedy", GreedyBot())):
        with tqdm(
            total=args.target**2, unit="score", disable=not args.progress, leave=False, desc=name
        ) as bar:
            match = match_best_response(
                player, args.target, progress=lambda done, total, bar=bar: _count(bar, done, total)
            )
        with tqdm(
            total=len(LAYOUTS), unit="set-up", disable=not args.progress, leave=False, desc=name
        ) as bar:
            result = exploitability(player, progress=lambda n, bar=bar: bar.update(n - bar.n))
        figures[name] = {"match": match.to_dict(), "round": asdict(result)}
        print(f"{name}: {match.summary()}")
        print(f"{name}: round {result.summary()}")
    if args.json is not None:
        figures = {"opponent": BEST_RESPONSE, **figures}
        write_output(args.json, (json.dumps(figures, indent=2) + "\n").encode())
        print(f"figures written to {args.json}")
    return 0


def _count(bar: tqdm, done: int, total: int) -> None:
    bar.total = total
    bar.update(done - bar.n)


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(EvaluateArgs, args=argv, description=__doc__)
    try:
        check_fields(args)
        scores = check_audit(args)
        inputs: list[Named] = [("--model", player_file(args.model))]
        inputs.append(("--opponent", player_file(args.opponent)))
        outputs = [("--json", args.json), ("--record", args.record), ("--plot", args.plot)]
        check_outputs(outputs, inputs, args.force)
        model = load_player(args.model, args.trusted)
        if args.audit:
            return run_audit(args, model, scores)
        if args.opponent == BEST_RESPONSE:
            if args.target > MAX_SOLVED_TARGET:
                raise ValueError(
                    f"--opponent {BEST_RESPONSE} measures the match to --target, which is "
                    f"solved for targets up to {MAX_SOLVED_TARGET}, not {args.target}"
                )
            return best_response(args, model)
        opponent = load_player(args.opponent, args.trusted)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        with tqdm(total=args.matches, unit="match", disable=not args.progress, leave=False) as bar:
            result = evaluate(
                model,
                opponent,
                args.matches,
                seed=args.seed,
                target=args.target,
                keep_records=args.record is not None,
                progress=lambda n: bar.update(n - bar.n),
            )
    except PolicyError as error:  # a policy that broke while it played: its file, in a sentence
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.model} against {args.opponent}, seed {args.seed}")
    print(result.summary())
    try:
        if args.json is not None:
            figures = {
                "model": args.model,
                "opponent": args.opponent,
                "seed": args.seed,
                "target": args.target,
                **result.to_dict(),
            }
            write_output(args.json, (json.dumps(figures, indent=2) + "\n").encode())
            print(f"figures written to {args.json}")
        if args.record is not None:
            count = write_records(args.record, result.records)
            print(f"{count} match records written to {args.record}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: cannot write {args.record} ({reason(error)})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_cli(main)
