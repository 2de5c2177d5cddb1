"""Griffe extension for the documentation site: the docstrings' Sphinx roles become links.

The docstrings are written for ``help()`` in the usual Python way, with roles such as
``:class:`~buttonup_env.game.rules.State``` and ``:meth:`play```. mkdocstrings renders Markdown,
where a role would show up as literal text, so once the package is loaded every role becomes a
cross-reference that mkdocs-autorefs turns into a link:
``[`State`][buttonup_env.game.rules.State]``. A relative target is looked up like Python names: in
the object itself, then its parents, then the package. A role naming nothing in the package is a
warning, so ``mkdocs build --strict`` fails on it. An reST ``text::`` before an indented example
loses one colon.

Used by ``mkdocs.yml`` (``plugins: mkdocstrings: ... extensions``); not part of the package.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|data|mod|obj|exc):`(~?)([\w.]+)(\(\))?`")
EXTERNAL = ("numpy", "gymnasium", "torch", "stable_baselines3", "sb3_contrib", "onnx", "pettingzoo")
"""Packages outside this one: their roles stay code, without a link."""

logger = logging.getLogger("mkdocs.plugins.griffe_roles")


def _child(obj: griffe.Object | griffe.Alias, name: str) -> griffe.Object | griffe.Alias | None:
    try:
        return obj.members.get(name)
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _walk(scope: griffe.Object | griffe.Alias, dotted: str) -> str | None:
    """The canonical path of ``dotted`` looked up from ``scope``, or None."""
    obj: griffe.Object | griffe.Alias | None = scope
    for name in dotted.split("."):
        obj = _child(obj, name) if obj is not None else None
        if obj is None:
            return None
    if isinstance(obj, griffe.Alias):
        try:
            return obj.final_target.path
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return obj.target_path
    return obj.path


def _resolve(owner: griffe.Object, package: griffe.Module, target: str) -> str | None:
    root, _, rest = target.partition(".")
    if root == package.name:
        return _walk(package, rest) if rest else package.path
    scope: griffe.Object | None = owner
    while scope is not None:
        found = _walk(scope, target)
        if found is not None:
            return found
        scope = scope.parent
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring of the package as autorefs links."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = self._rewrite(obj, pkg, obj.docstring.value)

    def _rewrite(self, owner: griffe.Object, package: griffe.Module, text: str) -> str:
        def link(match: re.Match[str]) -> str:
            _, short, target, call = match.groups()
            shown = (target.rsplit(".", 1)[-1] if short else target) + (call or "")
            path = _resolve(owner, package, target)
            if path is None:
                if target.split(".")[0] not in EXTERNAL:
                    logger.warning(
                        "%s: the docstring names %r, which is nowhere in %s",
                        owner.path,
                        match.group(0),
                        package.name,
                    )
                return f"`{shown}`"
            return f"[`{shown}`][{path}]"

        text = ROLE.sub(link, text)
        return re.sub(r"(\S)::\n\n", r"\1:\n\n", text)


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not isinstance(member, griffe.Alias):
            found.extend(_objects(member))
    return found
