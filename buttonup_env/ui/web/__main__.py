"""``python -m buttonup_env.web``: see :mod:`buttonup_env.ui.web.cli`."""

import sys

from .cli import main

sys.exit(main())
