"""Moved: the ONNX writer is :mod:`buttonup_env.onnx_writer` (``training/export.py`` is the
command that exports a run or a ``.zip`` with its card). Reading a name from here gives it from
there, with a ``DeprecationWarning``, until the release after 0.1.0."""

from __future__ import annotations

from .deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {
        name: f"buttonup_env.onnx_writer:{name}"
        for name in (
            "OPSET",
            "SUPPORTED_POLICIES",
            "actor_to_onnx",
            "check_exportable",
            "export_onnx",
        )
    },
)
