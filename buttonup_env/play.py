"""Play in a terminal: ``python -m buttonup_env.play`` (installed as ``buttonup-play``).

The command lives in :mod:`buttonup_env.ui.play`.
"""

import sys

from .ui.play import main

if __name__ == "__main__":
    sys.exit(main())
