"""Moved: the web API's pydantic models are :mod:`buttonup_env.web.schemas` ("models" is the
shipped policies' word, :mod:`buttonup_env.models`). Reading a name from here gives it from
there, with a ``DeprecationWarning``, until the release after 0.1.0."""

from __future__ import annotations

from ..deprecation import moved_names
from . import schemas

__getattr__ = moved_names(
    __name__,
    {name: f"{schemas.__name__}:{name}" for name in vars(schemas) if not name.startswith("_")},
)
