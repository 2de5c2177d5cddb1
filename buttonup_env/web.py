"""The browser app: ``python -m buttonup_env.web`` (installed as ``buttonup-web``; the ``web``
extra).

The command lives in :mod:`buttonup_env.ui.web.cli`.
"""

import sys

from .ui.web.cli import main

if __name__ == "__main__":
    sys.exit(main())
