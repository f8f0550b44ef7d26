"""Writing output files without ever losing what was there.

:func:`check_output` runs before any input is read: it refuses an empty name, a target that is
not a regular file (a symlink, FIFO or device is written through only when it is a symlink to
a regular file), a read-only file, the input itself or a file inside an input directory, and
creates a missing parent folder.  :func:`write_output` then writes a temporary file beside the
target and renames it over the target — never a half file — keeping the target's mode (and
owner, when allowed); the temporary file is removed on any error and on SIGINT/SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from calcheck.errors import InputError, UsageError

_pending: set[str] = set()                       # temporary files being written


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def resolve_target(path: str) -> Path:
    """The file a write to ``path`` lands in: a symlink to a regular file is followed."""
    p = Path(path)
    if p.is_symlink():
        return Path(os.path.realpath(p))
    return p


def check_output(path: str, *, label: str = "--output",
                 inputs: tuple[str, ...] = ()) -> Path:
    """Check ``path`` before anything is computed (see the module docstring); returns the
    file that will be written."""
    if not path:
        raise UsageError(f"{label}: empty file name")
    if path == "-":
        raise UsageError(f"{label} -: write to stdout with the format options instead")
    if path.endswith(("/", os.sep)):
        raise UsageError(f"{label} {path}: names a folder; calcheck writes a file (give a file "
                         "name with its extension)")
    target = resolve_target(path)
    if target.exists() and not target.is_file():
        kind = "a directory" if target.is_dir() else "not a regular file"
        raise UsageError(f"{label} {path}: {kind}; calcheck writes regular files only")
    if target.exists() and (not os.access(target, os.W_OK)
                            or not stat.S_IMODE(target.stat().st_mode) & 0o222):
        raise UsageError(f"{label} {path}: the file is read-only; remove it or make it writable "
                         "first")
    for src in inputs:
        if not src or src == "-":
            continue
        try:
            s = Path(src).resolve()
            t = target.resolve()
        except OSError:
            continue
        if t == s:
            raise UsageError(f"{label} {path} is the input file; write the report elsewhere")
        if s.is_dir() and s in t.parents:
            raise UsageError(f"{label} {path} is inside the input directory {src}; write the "
                             "report elsewhere")
    parent = target.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{label} {path}: cannot create the folder {parent} "
                             f"({_one_line(exc)})") from None
    elif not parent.is_dir():
        raise UsageError(f"{label} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{label} {path}: the folder {parent} is not writable")
    return target


def _cleanup_handler(signum: int, frame: Any) -> None:
    for tmp in list(_pending):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _pending.clear()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_previous: dict[int, Any] = {}


@contextlib.contextmanager
def _signals_clean(tmp: str) -> Iterator[None]:
    """Remove ``tmp`` if SIGINT or SIGTERM arrives while it exists (main thread only)."""
    main = threading.current_thread() is threading.main_thread()
    _pending.add(tmp)
    if main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if sig not in _previous:
                _previous[sig] = signal.getsignal(sig)
                signal.signal(sig, _cleanup_handler)
    try:
        yield
    finally:
        _pending.discard(tmp)
        if main and not _pending:
            for signum, prev in list(_previous.items()):
                signal.signal(signum, prev)
                del _previous[signum]


def write_output(path: str, write: Callable[[str], None], *,
                 label: str = "--output") -> None:
    """Write a file with ``write(tmp_path)``, then rename it over ``path`` atomically."""
    target = check_output(path, label=label)
    old = target.stat() if target.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        with _signals_clean(tmp):
            write(tmp)
            if old is not None:
                os.chmod(tmp, stat.S_IMODE(old.st_mode))
                with contextlib.suppress(OSError):
                    os.chown(tmp, old.st_uid, old.st_gid)
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, target)
    except Exception as exc:
        cause = os_error_in(exc)
        if cause is None:
            raise
        raise InputError(f"{path}: cannot write output ({_one_line(cause)})") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def os_error_in(exc: BaseException) -> OSError | None:
    """The operating-system error behind ``exc``: itself, or the one it was raised while
    handling — a writer that cleans up after a full disk can fail again in its own way
    (matplotlib's PDF writer: "zlib.error: Error -2 while flushing"), hiding the reason."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, OSError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def atomic_write(path: str, text: str, *, label: str = "--output") -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    write_output(path, write, label=label)


def atomic_write_bytes(path: str, data: bytes, *, label: str = "--output") -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    write_output(path, write, label=label)
