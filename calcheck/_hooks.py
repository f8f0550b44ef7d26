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
* :func:`binomial_ufuncs` — scipy's private ``scipy.special._ufuncs`` binomial functions, loaded
  through the import machinery's own ``importlib._bootstrap._load`` without
  ``scipy.special``'s ``__init__`` (~0.1 s; ``scipy.stats`` would take ~0.45 s): TCE's
  binomial tests with scipy's own values (calcheck._binom_dist).
* :func:`silenced_unraisable` — ``sys.unraisablehook`` swapped while pyarrow's CSV row handler
  runs: a row it cannot decode is reported by the parse error itself, not as a warning.
* :func:`freeze_at_exit` — ``gc.freeze()`` before the command exits (public, but it changes how
  the interpreter ends): the collection of every module object at exit, ~0.02 s, is skipped.

Imports nothing from calcheck.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def enabled() -> bool:
    """False when ``CALCHECK_NO_HOOKS`` is set (to anything but empty or 0)."""
    return os.environ.get("CALCHECK_NO_HOOKS", "") in ("", "0")


def plain_values(command: Any, help_names: list[str]) -> None:
    """Let values reach :func:`calcheck.option_checks.parse` as typed on the command line:
    typer's own coercion (which loads pydantic, ~0.2 s) is not needed for text, lists and
    flags.  Skipped when the
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


# The extension modules of scipy.special that ``_ufuncs`` imports as it initialises, in an
# order that loads each after those it imports, by scipy version (read off an import of
# ``_ufuncs`` under a stand-in package in each version; ``tests/test_tce.py`` checks the
# installed one in a fresh interpreter).
_UFUNC_DEPENDENCIES: dict[tuple[int, ...], tuple[str, ...]] = {
    (1, 14): ("_ufuncs_cxx", "_special_ufuncs"),
    (1, 15): ("_ufuncs_cxx", "_special_ufuncs"),
    (1, 16): ("_ufuncs_cxx", "_ellip_harm_2", "_special_ufuncs", "_gufuncs"),
    (1, 17): ("_ufuncs_cxx", "_ellip_harm_2", "_special_ufuncs", "_gufuncs"),
}


def _load_ufuncs_alone() -> None:
    """Load ``scipy.special._ufuncs`` (and the extension modules it imports) without running
    ``scipy.special/__init__.py``: that package's import costs ~0.1 s (its array-API layer
    loads numpy.testing, numpy.f2py and more), a third of a default ``score`` on a small file,
    and the binomial ufuncs need none of it.  Each module is loaded by the import machinery's
    own ``_load`` (module lock held, marked initialising, removed again if it fails), so
    another thread that imports it meanwhile waits for it, and a later ``import scipy.special``
    finds the modules loaded and runs its ``__init__`` over them as usual.  Only for the scipy
    versions in :data:`_UFUNC_DEPENDENCIES`, and only when ``scipy.special`` is not loaded
    already; anything unexpected leaves the ordinary import to the caller."""
    if "scipy.special" in sys.modules or "scipy.special._ufuncs" in sys.modules:
        return
    try:
        from importlib import _bootstrap
        from importlib.machinery import ExtensionFileLoader, PathFinder

        import scipy

        version = tuple(int(x) for x in scipy.__version__.split(".")[:2])
        names = _UFUNC_DEPENDENCIES.get(version)
        if names is None:
            return
        path = [os.path.join(scipy.__path__[0], "special")]
        specs = [PathFinder.find_spec(f"scipy.special.{n}", path) for n in (*names, "_ufuncs")]
        for spec in specs:
            if spec is None or not isinstance(spec.loader, ExtensionFileLoader):
                return
        for spec in specs:
            if spec is not None and spec.name not in sys.modules:
                _bootstrap._load(spec)  # type: ignore[attr-defined]
    except Exception:       # the ordinary import follows, and says what fails
        return


def binomial_ufuncs() -> tuple[Any, Any, Any] | None:
    """scipy's private binomial ufuncs (``scipy.special._ufuncs``: ``_binom_pmf``, ``_binom_cdf``,
    ``_binom_sf``, scipy ≥ 1.14), loaded without ``scipy.special``'s ``__init__`` where the
    version is known (:func:`_load_ufuncs_alone`: ~0.1 s, a third of a small ``score``); None
    with the hooks off or an older scipy (the caller then uses ``scipy.stats.binom``)."""
    if not enabled():
        return None
    _load_ufuncs_alone()
    try:
        from scipy.special._ufuncs import _binom_cdf, _binom_pmf, _binom_sf
    except ImportError:
        return None
    return _binom_pmf, _binom_cdf, _binom_sf


@contextmanager
def silenced_unraisable(on: bool = True) -> Iterator[None]:
    """``sys.unraisablehook`` set to ignore, and put back, while the block runs (``on``)."""
    hook = sys.unraisablehook
    if on and enabled():
        sys.unraisablehook = lambda _: None
    try:
        yield
    finally:
        sys.unraisablehook = hook
