"""Names that moved: for one release the old import still works and says where the name went.

A module whose names moved ends with ``__getattr__ = moved_names(__name__, {...})``: reading
one of those names from it gives the object from its new home, with a ``DeprecationWarning``
naming that home. They go away in the release after 0.1.0.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` whose names in ``moved`` now live elsewhere.

    ``moved`` maps an old name to its new place, ``"package.module:name"``. Any other name
    raises ``AttributeError`` as a module does.
    """

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, new_name = moved[name].partition(":")
        warnings.warn(
            f"{module}.{name} is now {home}.{new_name}; the old name goes away after 0.1.0",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), new_name)

    return __getattr__
