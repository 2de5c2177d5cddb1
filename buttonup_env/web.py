"""The browser app: ``python -m buttonup_env.web`` (installed as ``buttonup-web``; the ``web``
extra).

The command lives in :mod:`buttonup_env.ui.web.server`.
"""

import sys

from .ui.web.server import main

if __name__ == "__main__":
    sys.exit(main())
