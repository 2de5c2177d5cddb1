"""Animate a recorded game: ``python -m buttonup_env.animate RECORDS.jsonl --id ID --out game.gif``.

The command lives in :mod:`buttonup_env.ui.animate`.
"""

import sys

from .ui.animate import main

if __name__ == "__main__":
    sys.exit(main())
