"""Where calcheck reaches into another library's private code: each hook here, with what it
buys, and one switch that turns every one off — ``CALCHECK_NO_HOOKS=1`` (calcheck then runs on
each library's public behaviour: the same results, a slower start).  Nothing else in calcheck
touches a private name of typer or numba (``tests/test_architecture.py`` checks).

* :func:`plain_values` — typer's private ``_coercion.RuntimeParam``: values reach calcheck's own
  option checks as typed, without typer's coercion, which loads pydantic (~0.2 s of every
  command; the small-file goal is 0.15 s).
* :func:`word_metavars` — click parameters' ``_usage_display_name``: the help shows FILE, not
  ``{FILE} <str>`` (help text only).
* :func:`arraymath_without_scipy_linalg` — numba's ``numba.np.linalg.ensure_blas``: numba's
  first compile or cache load of the PAVA-BC scan without importing ``scipy.linalg`` (~0.19 s
  of a ~0.23 s first call).
* :func:`freeze_at_exit` — ``gc.freeze()`` before the command exits (public, but it changes how
  the interpreter ends): the collection of every module object at exit, ~0.02 s, is skipped.

Imports nothing from calcheck.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def enabled() -> bool:
    """False when ``CALCHECK_NO_HOOKS`` is set (to anything but empty or 0)."""
    return os.environ.get("CALCHECK_NO_HOOKS", "") in ("", "0")


def plain_values(command: Any, help_names: list[str]) -> None:
    """Let values reach :func:`O.parse` as typed on the command line: typer's own coercion
    (which loads pydantic, ~0.2 s) is not needed for text, lists and flags.  Skipped when the
    installed typer does not have the hook."""
    if not enabled():
        return
    try:
        from dataclasses import dataclass

        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover - depends on the installed typer
        return

    @dataclass(frozen=True)
    class Text(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return list(value) if isinstance(value, tuple) else value

    from types import SimpleNamespace

    names = SimpleNamespace(help_option_names=help_names)
    for cmd in (command, *getattr(command, "commands", {}).values()):
        params = list(cmd.params)
        try:           # -h/--help, made (and kept) here rather than during parsing
            params.append(cmd.get_help_option(names))
        except (AttributeError, TypeError):  # pragma: no cover - depends on the installed typer
            pass
        for p in params:                    # with the root's completion options
            desc = getattr(p, "type_descriptor", None)
            if desc is not None and hasattr(p, "_runtime_param"):
                p._runtime_param = Text(annotation=desc.annotation,
                                        parameter_info=desc.parameter_info)


def word_metavars(param: Any) -> None:
    """An argument's usage and help show its name in capitals (FILE), without a type."""
    import types

    if not enabled():
        return
    param._usage_display_name = types.MethodType(lambda self: self.name.upper(), param)
    param.display_type_rich = types.MethodType(lambda self, ctx: None, param)
    param.display_type = types.MethodType(lambda self, ctx: None, param)


def arraymath_without_scipy_linalg() -> None:
    """Import ``numba.np.arraymath`` — which numba's first compile, or first load from its
    cache, imports — without the BLAS check that imports ``scipy.linalg`` (~0.19 s: scipy's
    array-API layer, of a ~0.23 s first call).  The kernels here use no BLAS.  The check
    (``numba.np.linalg.ensure_blas``) is answered from scipy's files — BLAS is there when
    ``scipy/linalg/cython_blas`` is — for that import only, then put back, so anything that
    compiles BLAS calls later runs numba's own check (and its integer-width guard)."""
    if not enabled():
        return
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        import numba.np.linalg as nl

        original = nl.ensure_blas
    except (ImportError, AttributeError):          # another numba: its own import, as is
        return

    def present() -> None:
        import scipy

        if not any(any(Path(d, "linalg").glob("cython_blas.*")) for d in scipy.__path__):
            raise ImportError("scipy.linalg.cython_blas not found")

    nl.ensure_blas = present
    try:
        import numba.np.arraymath as am
    finally:
        nl.ensure_blas = original
    am.ensure_blas = original  # type: ignore[attr-defined]   # (its own name for the check)


def freeze_at_exit() -> None:
    """Leave the objects alive at exit to the operating system instead of collecting them
    (nothing calcheck writes waits on a collection: reports are written and closed before)."""
    if enabled():
        import gc

        gc.freeze()
