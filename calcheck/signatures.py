"""The plumbing behind the public functions' signatures: keyword-only parameters named like
the command's long options (:func:`keywords` checks them and maps 0.4's names), the source and
options of one call (:func:`inputs`: a path, a table, :class:`~calcheck.data.Predictions` or
arrays), and the ``Parameters`` section every public function's docstring gets from the option
table (:func:`parameters_doc`).  Used by :mod:`calcheck.api`, :mod:`calcheck.auditing` and
:mod:`calcheck.monitoring`."""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from calcheck.data import Predictions
from calcheck.errors import UsageError
from calcheck.option_checks import parse
from calcheck.options import COMMANDS, Options

F = TypeVar("F", bound=Callable[..., Any])
# 0.4's keywords that differ from the long option: accepted until 0.6, with a warning
LEGACY = {"variables": "var", "methods": "method"}


def keywords(fn: F) -> F:
    """Accept :data:`LEGACY` keywords under their new names, with a DeprecationWarning; an
    unknown keyword is a UsageError naming the closest known one (a display option of the
    command line, how to do the same)."""
    import difflib

    from calcheck.option_checks import DISPLAY_ONLY

    known = list(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name in kwargs:
            if name in known or name in LEGACY:
                continue
            if name in DISPLAY_ONLY:
                raise UsageError(f"{fn.__name__}() does not take {name}= (a command-line display "
                                 f"option): {DISPLAY_ONLY[name]}")
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{fn.__name__}() got an unknown option {name!r}{hint}; options: "
                             f"{', '.join(k for k in known if k != 'source')}")
        for old, new in LEGACY.items():
            if old in kwargs:
                if new in kwargs:
                    raise UsageError(f"give {new}= only ({old}= is its deprecated name)")
                warnings.warn(f"calcheck.{fn.__name__}({old}=...) is deprecated and will be "
                              f"removed in 0.6: use {new}= (the command line's --{new})",
                              DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
        return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def given(command: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The options a caller set: None and a scalar equal to the option's default are "not
    given" (so ``ci_reps=1000`` without ``ci`` is no error, as on the command line)."""
    table = {o.kw: o for o in COMMANDS[command]}
    out = {}
    for k, v in values.items():
        if v is None:
            continue
        d = table[k].default
        if table[k].type != "toggle" and isinstance(v, (bool, int, float, str)) and \
                type(v) is type(d) and v == d:
            continue
        out[k] = v
    return out


def is_array(v: Any) -> bool:
    """Data rather than column names: an array, or a sequence whose items are not text."""
    if v is None or isinstance(v, (str, bytes, os.PathLike)):
        return False
    if hasattr(v, "__array__"):
        return True
    if isinstance(v, Sequence):
        return len(v) > 0 and not isinstance(v[0], str)
    return False


def inputs(command: str, values: Mapping[str, Any], *,
            required: bool = True) -> tuple[Any, Options]:
    """The source and the parsed options of one API call (``values``: its ``locals()``).
    ``scores=``/``probs=`` arrays with ``labels=`` become :class:`Predictions`; then ``by=``,
    ``correct_from=``, ``time=`` and ``var=`` may be arrays (or ``var={name: array}``)."""
    values = dict(values)
    source, scores, labels = values.pop("source"), values.pop("scores"), values.pop("labels")
    values.pop("ax", None)
    probs = values.get("probs")
    columns: dict[str, Any] = {}
    if scores is not None or labels is not None or is_array(probs):
        if source is not None:
            raise UsageError(f"{command}(): give a source (a file, a DataFrame, …) or arrays "
                             "(scores= or probs=, with labels=), not both")
        if labels is None:
            raise UsageError(f"{command}(): labels= is required with scores= or probs=")
        if (scores is None) == (not is_array(probs)):
            raise UsageError(f"{command}(): give scores= (binary: an array of n probabilities) "
                             "or probs= (multiclass: an n × K array), not both")
        for key, name in (("by", "group"), ("correct_from", "correct_from"), ("time", "time"),
                          ("weight", "weight"), ("count", "count")):
            if is_array(values.get(key)):
                columns[name], values[key] = values[key], name
        for key in ("segment", "audit"):
            named = values.get(key)
            if isinstance(named, Mapping):
                columns.update({str(k): a for k, a in named.items()})
                values[key] = [str(k) for k in named]
        var = values.get("var")
        if isinstance(var, Mapping):
            columns.update({str(k): a for k, a in var.items()})
            values["var"] = [str(k) for k in var]
        elif is_array(var):
            columns["var"], values["var"] = var, "var"
        values.pop("probs")
        source = Predictions(scores=scores, probs=None if scores is not None else probs,
                             labels=labels, columns=columns)
    elif source is None:
        raise UsageError(f"{command}(): give a source (a CSV or Parquet file, a directory, a "
                         "DataFrame, a pyarrow Table, Predictions) or arrays: scores= (or "
                         "probs=) with labels=")
    else:
        for key in ("by", "correct_from", "time", "var", "segment", "weight", "count"):
            if is_array(values.get(key)) or isinstance(values.get(key), Mapping):
                raise UsageError(f"{key}= names a column of the source; arrays are for input "
                                 "given as arrays (scores= or probs= with labels=)")
    return source, parse(command, given(command, values), style="python", required=required)


API_ONLY = {
    "source": ("str, path, DataFrame, pyarrow.Table or Predictions, optional",
               "The predictions: a CSV or Parquet file, a directory of Parquet parts, \"-\" "
               "(stdin), a pandas or polars DataFrame, a pyarrow Table or calcheck.Predictions."),
    "scores": ("array_like of shape (n,), optional",
               "Binary input given as arrays: the predicted probabilities of the positive "
               "class (with labels=, instead of a source)."),
    "labels": ("array_like of shape (n,), optional",
               "The labels of scores= (0/1) or probs= (class indices 0..K-1)."),
    "ax": ("matplotlib Axes, optional",
           "Draw the diagram's main panel into this Axes and return it."),
    "output": ("str or path", "The file to write: .html or .pdf (figure: .png, .svg, .pdf)."),
    "old": ("source", "The reference model's predictions (as source= of score)."),
    "new": ("source, optional", "The candidate model's predictions on the same rows."),
}
ARRAY_NOTES = {"probs": " Or an (n, K) array of class probabilities, with labels=.",
               "by": " With array input, also an array of group values.",
               "var": " With array input, also an array or a {name: array} mapping.",
               "correct_from": " With array input, also an array.",
               "time": " With array input, also an array of timestamps.",
               "weight": " With array input, also an array of weights.",
               "count": " With array input, also an array of counts."}


def parameters_doc(fn: Callable[..., Any], command: str) -> str:
    table = {o.kw: o for o in COMMANDS[command]}
    out = ["", "    Parameters", "    ----------"]
    for name, par in inspect.signature(fn).parameters.items():
        if name in API_ONLY:
            kind, text = API_ONLY[name]
        else:
            o = table[name]
            kind = {"list": "str or list of str", "bool": "bool", "toggle": "bool",
                    "int": "int", "float": "float"}.get(o.type, "str")
            kind += f", default {par.default!r}" if par.default is not None else ", optional"
            text = f"{o.help} (command line: {o.flags[0]})"
            if command != "compare":
                text += ARRAY_NOTES.get(name, "")
        out.append(f"    {name} : {kind}")
        words, line = text.split(), "       "
        for w in words:
            if len(line) + len(w) > 95:
                out.append(line)
                line = "       "
            line += " " + w
        out.append(line)
    return "\n".join(out) + "\n"
