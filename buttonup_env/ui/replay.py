"""Check game records: ``python -m buttonup_env.replay FILE [FILE ...]``.

Prints ``INVALID <id>: <reason>`` for every invalid record (named by its line number when it has
no id), then ``<n> valid, <n> invalid``. A line that is not a record (not UTF-8, not JSON, longer
than 1 MiB, ...) is an invalid record too, and the rest of the file is still checked. What is
printed is escaped (a newline or an escape code in an id is shown as ``\\n``, ``\\x1b``), so
every record is one line. Only regular files are read: a device such as ``/dev/zero`` (endless)
or a pipe (which waits for a writer) is a file that cannot be read. Exit status: 0 when every
record is valid, 1 when any is invalid, 2 when a file cannot be read or the output cannot be
written (standard output closed, ``> /dev/full``), each said in one line on standard error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from ..game.records import printable, problem, read_records
from .cli import Checked, StreamError, after_output_failed, parse_arguments, report

PROG = "python -m buttonup_env.replay"


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m buttonup_env.replay``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Check Button Up! game records (JSON Lines, see docs/rules.md): replay every "
        "move and verify every claim.",
        epilog="Exit status: 0 all valid, 1 some record invalid, 2 a file could not be read "
        "or the output could not be written.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines files of records")
    return parser


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the checker; return the exit status. The streams default to the process's own."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    try:
        out = Checked(stdout, "standard output")
        args = parse_arguments(build_parser(), argv, out, stderr)
        if isinstance(args, int):
            out.flush()
            return args
        status = _check(args.files, out, stderr)
        out.flush()
        return status
    except BrokenPipeError:  # the reader of the output went away (... | head)
        after_output_failed(stdout)
        return 1
    except StreamError as error:
        report(stderr, f"error: {error}")
        after_output_failed(stdout)
        return 2


def _check(files: list[str], out: Checked, stderr: TextIO | None) -> int:
    """Check every record of ``files``, writing to ``out``; return the exit status."""
    valid = invalid = 0
    unreadable = False
    for path in files:
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
                name = line.name if len(files) == 1 else f"{line.name} ({printable(path)})"
                out.write(f"INVALID {name}: {printable(reason)}\n")
        except BrokenPipeError:  # writing failed, not reading
            raise
        except OSError as error:
            why = error.strerror or error
            out.flush()  # what was found so far comes before the error line
            report(stderr, f"error: cannot read {printable(path)}: {why}")
            unreadable = True
    out.write(f"{valid} valid, {invalid} invalid\n")
    if unreadable:
        return 2
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
