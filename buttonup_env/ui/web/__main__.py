"""``python -m buttonup_env.web``: see :mod:`buttonup_env.ui.web.server`."""

import sys

from .server import main

sys.exit(main())
