"""What a request to the web app can meet: the errors of its games and records, each a
sentence the app answers with its status (:data:`buttonup_env.ui.web.app.PROBLEMS`)."""

from __future__ import annotations


class IllegalMove(ValueError):
    """A move the rules do not allow; the message names the slot and the legal ones."""


class NotNow(ValueError):
    """A request that does not fit the game's moment (not your turn, round over, ...)."""


class UnknownGame(LookupError):
    """No game has this id (never made, or dropped to make room)."""


class PlayerFailed(RuntimeError):
    """A bot or policy failed to choose a move (it raised, chose an illegal slot, or took
    longer than the time limit)."""


class ServerBusy(RuntimeError):
    """Every worker thread is taken, or the server is stopping: no move can be computed now."""


class StoreFull(RuntimeError):
    """The server keeps as many games as it may, none of them this client's or idle."""
