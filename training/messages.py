"""What passes between a run's workers, as bytes: JSON and files, never a pickle.

torch.distributed's ``broadcast_object_list`` and ``gather_object`` pickle what they send and
unpickle what they receive, so a process that joined the run could run code in every worker.
The workers send JSON text instead (:func:`encode`), and read a peer's bytes as JSON only
(:func:`decode`), after checking the length it announced (:func:`checked_length`), so what
another process sends is at worst refused, in one sentence (:class:`BadMessage`, a
:class:`WorkerLost`: the run stops as when a worker is lost).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_MESSAGE_BYTES = 8 << 30
"""The most bytes one worker sends the others at once (a run's files: its snapshots and a
checkpoint of at most 1 GiB); a length beyond it is refused before anything is allocated."""


class WorkerLost(RuntimeError):
    """Another worker of the run is gone (died, killed, or silent for the collectives'
    timeout), never came, or sent what a worker of the run does not; the message is one
    sentence."""


class BadMessage(WorkerLost):
    """Bytes from another worker that are not a message of this run's workers: it is not
    one of them, or no longer works as one."""


class WorkerFailed(RuntimeError):
    """The error another worker met computing what it sent (its type and message), raised
    where its value was awaited."""


def encode(value: Any) -> bytes:
    """``value`` (JSON: None, booleans, numbers, text, lists and dicts; or an exception, sent
    as its type and message) as the bytes a worker sends."""
    if isinstance(value, BaseException):
        message = {"error": f"{type(value).__name__}: {' '.join(str(value).split())[:500]}"}
    else:
        message = {"value": value}
    return json.dumps(message, separators=(",", ":")).encode()


def decode(data: bytes, rank: int) -> Any:
    """What worker ``rank`` sent as ``data``, read as JSON: its value, or a
    :class:`WorkerFailed` for an error it sent; :class:`BadMessage` for anything else."""
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise BadMessage(
            f"worker {rank} sent {len(data):,} bytes that are not JSON ({type(error).__name__}); "
            "a worker of this run sends JSON, so it is not one"
        ) from None
    if isinstance(message, dict) and set(message) == {"value"}:
        return message["value"]
    if isinstance(message, dict) and set(message) == {"error"}:
        return WorkerFailed(f"worker {rank}: {str(message['error'])[:500]}")
    raise BadMessage(f"worker {rank} sent JSON that is not a message of this run's workers")


def checked_length(length: int, rank: int) -> int:
    """The length worker ``rank`` announced, if it is one (:class:`BadMessage` otherwise)."""
    if not 0 <= length <= MAX_MESSAGE_BYTES:
        raise BadMessage(
            f"worker {rank} announced {length:,} bytes; a worker sends 0 to "
            f"{MAX_MESSAGE_BYTES:,}, so it is not one of this run's"
        )
    return length


_PART = r"(?!\.\.?(?:/|$))[A-Za-z0-9_.-]+"
_FILE_NAME = re.compile(rf"{_PART}(?:/{_PART})*")


def file_sizes(header: Any) -> dict[str, int]:
    """The names and sizes of the files worker 0 shares (a list of ``[name, size]``),
    checked: paths inside a folder (no ``..``, not absolute), each given once."""
    sizes: dict[str, int] = {}
    for entry in header if isinstance(header, list) else [None]:
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and _FILE_NAME.fullmatch(entry[0])
            and entry[0] not in sizes
            and type(entry[1]) is int
            and 0 <= entry[1] <= MAX_MESSAGE_BYTES
        ):
            raise BadMessage("worker 0 sent a list of files that is not one of a run folder")
        sizes[entry[0]] = entry[1]
    return sizes
