"""Check game records: ``python -m buttonup_env.replay FILE [FILE ...]``.

Prints ``INVALID <id>: <reason>`` for every invalid record (named by its line number when it has
no id), then ``<n> valid, <n> invalid``. A line that is not a record (not UTF-8, not JSON, longer
than 1 MiB, ...) is an invalid record too, and the rest of the file is still checked. What is
printed is escaped (a newline or an escape code in an id is shown as ``\\n``, ``\\x1b``), so
every record is one line. Exit status: 0 when every record is valid, 1 when any is invalid, 2
when a file cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..game.records import printable, problem, read_records


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m buttonup_env.replay",
        description="Check Button Up! game records (JSON Lines, see docs/rules.md): replay every "
        "move and verify every claim.",
        epilog="Exit status: 0 all valid, 1 some record invalid, 2 a file could not be read.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines files of records")
    args = parser.parse_args(argv)
    valid = invalid = 0
    unreadable = False
    for path in args.files:
        try:
            for line in read_records(path):
                reason = line.error
                if reason is None:
                    assert line.record is not None
                    reason = problem(line.record)
                if reason is None:
                    valid += 1
                    continue
                invalid += 1
                name = line.name if len(args.files) == 1 else f"{line.name} ({printable(path)})"
                print(f"INVALID {name}: {printable(reason)}")
        except OSError as error:
            why = error.strerror or error
            print(f"error: cannot read {printable(path)}: {why}", file=sys.stderr)
            unreadable = True
    print(f"{valid} valid, {invalid} invalid")
    if unreadable:
        return 2
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
