"""Check game records: ``python -m buttonup_env.replay FILE ...`` (installed as
``buttonup-replay``).

The command lives in :mod:`buttonup_env.ui.replay`.
"""

import sys

from .ui.replay import main

if __name__ == "__main__":
    sys.exit(main())
