"""The running process and its output folders: output paths checked before any work, one run per result folder
(:func:`folder_lock`), and interrupts that never cut a result file in half (:func:`exit_on_interrupt`)."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .files import WRITE_LOCK, clear_stale_temps, read_json, write_json_atomic


def warn(message: str) -> None:
    """One warning line on stderr, as the command line prints them."""
    print(f"bayesattn: warning: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- output paths
def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder``: raises OSError if the folder cannot take new files."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bayesattn-probe-")
    os.close(fd)
    os.unlink(tmp)


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def prepare_output_dir(path: str | os.PathLike, name: str = "out_dir") -> Path:
    """Create the folder ``path`` (and its parents) and check that files can be written there.

    ValueError naming ``name`` when it is an existing file or cannot be created or written: call it before any
    work, so that a bad path fails in a second and not after the computation."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r}: exists and is not a folder; expected a folder to write results into")
    try:
        path.mkdir(parents=True, exist_ok=True)
        _probe(path)
    except OSError as e:
        raise ValueError(
            f"{name}={str(path)!r}: cannot write files there ({_why(e)}); expected a writable folder"
        ) from None
    return path


def check_output_file(path: str | os.PathLike, name: str = "out") -> Path:
    """Check that the file ``path`` can be written (creating its parent folders); ValueError naming ``name``."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{name}={str(path)!r}: is a folder; expected a file name")
    above = next((a for a in path.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise ValueError(f"{name}={str(path)!r}: {str(above)!r} is a file, not a folder; expected a path in a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{name}={str(path)!r}: exists and is not writable")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _probe(path.parent)
    except OSError as e:
        raise ValueError(
            f"{name}={str(path)!r}: cannot write files in {str(path.parent)!r} ({_why(e)}); "
            "expected a path in a writable folder"
        ) from None
    return path


# ----------------------------------------------------------------------------------------------- interrupts
_WATCHER: dict[str, Any] = {}
TRACKER_QUIET = "ignore:resource_tracker:UserWarning"  # a -W option: the warnings that begin "resource_tracker"


def exit_on_interrupt(message: str) -> None:
    """For a command-line process: on SIGINT (SIGTERM) print ``message`` and end at once with status 130 (143).

    Why not KeyboardInterrupt: JAX dispatches work to XLA's threads asynchronously, so when the exception
    reaches the top, compiled code or a compilation may still be running; Python's teardown then frees
    buffers and the client under those threads, which crashed (status 139) in 3 of 13 tries. Instead,
    Python's C-level handler writes the signal number to a pipe (``signal.set_wakeup_fd``) the moment it
    arrives, and a watcher thread ends the process with ``os._exit`` (no teardown) as soon as no result file
    is being written. Every finished point is already on disk (written atomically), so nothing is lost, and
    the exit does not wait for the running computation to finish. Call from the main thread."""
    if _WATCHER:
        _WATCHER["message"] = message
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)  # the watcher acts; no KeyboardInterrupt in the main thread
    _WATCHER.update(message=message, fds=(r, w))
    # A process pool's semaphores, left by os._exit, are unlinked by multiprocessing's resource tracker, which
    # then warns about each ("leaked semaphore objects"): that is the cleanup working. The tracker, started with
    # the pool, takes this process's -W options (multiprocessing.util._args_from_interpreter_flags).
    if TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_QUIET)

    def watch():
        sig = 0
        while sig not in (signal.SIGINT, signal.SIGTERM):  # the pipe also carries other handled signals
            sig = os.read(r, 1)[0]
        with WRITE_LOCK:  # let a result file that is being written be renamed into place first
            try:
                sys.stdout.flush()
                sys.stderr.write(f"\n{_WATCHER['message']}\n")
                sys.stderr.flush()
            finally:
                os._exit(128 + sig)

    threading.Thread(target=watch, name="bayesattn-interrupt", daemon=True).start()


def warnings_as_lines() -> None:
    """A warning of the library or of a dependency is one line, ``bayesattn: warning: ...`` with where it came from,
    not Python's two-line form with the source line (the command line and its worker processes)."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        where = f"{Path(filename).parent.name}/{Path(filename).name}:{lineno}"
        text = " ".join(str(message).split())
        print(f"bayesattn: warning: {text} ({category.__name__}, {where})", file=file or sys.stderr, flush=True)

    warnings.showwarning = show


def worker_init() -> None:
    """Pool workers: leave interrupts to the parent, end when the parent has ended, and write warnings as one
    line like the parent does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings_as_lines()
    parent = os.getppid()

    def watch_parent():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch_parent, name="bayesattn-parent-watch", daemon=True).start()


# ----------------------------------------------------------------------------------------------- locks
LOCK = ".bayesattn.lock"  # in a result folder: held by the run writing there


class FolderInUse(ValueError):
    """Another run holds the result folder's lock."""


@contextlib.contextmanager
def folder_lock(
    folder: str | os.PathLike,
    wait: bool = False,
    name: str = "--out",
    advice: str = "wait for it to end, give --wait to start when it has, or choose another --out",
) -> Iterator[None]:
    """Hold ``folder``'s lock for the block: FolderInUse (one line naming the option ``name``, the other run and
    ``advice``) if another process holds it, unless ``wait``. The lock is an OS file lock (``filelock``), which
    the system releases when its process ends, however it ends: a lock left by a killed run is taken over by the
    next one (which says so)."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    lock = FileLock(folder / LOCK)
    info = folder / f"{LOCK}.json"
    try:
        lock.acquire(timeout=-1 if wait else 0)
    except Timeout:
        try:
            who = read_json(info)
            holder = f"pid {who['pid']} on {who['host']}, since {who['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            holder = "another process"
        raise FolderInUse(f"{name}={str(folder)!r}: another run is writing there ({holder}); {advice}") from None
    try:
        # the folder's own files (run.json, summary.json, this note) half-written by a killed run: cleared, now that
        # no other run writes here
        clear_stale_temps(folder)
        if info.exists():  # the lock is free but its holder's note is there: that run ended without releasing it
            try:
                who = read_json(info)
                warn(
                    f"{folder}: took over the lock of a run that ended without releasing it (pid {who['pid']} "
                    f"on {who['host']}, since {who['since']})"
                )
            except (OSError, ValueError, KeyError, TypeError):
                pass
        write_json_atomic(
            info, {"pid": os.getpid(), "host": platform.node(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        )
        yield
    finally:
        info.unlink(missing_ok=True)
        lock.release()


# ----------------------------------------------------------------------------------------------- compilation cache
CACHE_ENV = "BAYESATTN_CACHE_DIR"  # a folder for JAX's persistent compilation cache, or "off"


def compile_cache_dir() -> Path | None:
    """Where the command line keeps JAX's persistent compilation cache: ``$BAYESATTN_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/bayesattn/jax`` (``~/.cache/bayesattn/jax``); None when the variable is ``off``."""
    env = os.environ.get(CACHE_ENV)
    if env is not None and env.strip().lower() in ("off", "0", "no", "false", "none"):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bayesattn" / "jax"


def enable_compile_cache(disabled: bool = False) -> Path | None:
    """Switch on JAX's persistent compilation cache for this process and the worker processes it starts, so that
    a second run of a command loads its compiled programs instead of compiling them again (``docs/benchmarks``).
    A compiled program is the same whether it was compiled now or loaded, so results do not depend on the cache.
    Returns the folder, or None when off (``disabled``, ``BAYESATTN_CACHE_DIR=off``) or not writable (a warning)."""
    folder = None if disabled else compile_cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder)
    except OSError as e:
        warn(
            f"compilation cache {folder} is not writable ({e.strerror or e}); compiling without it "
            f"(set {CACHE_ENV} to another folder, or to 'off')"
        )
        return None
    # environment variables as well: spawned worker processes read them when they import JAX
    settings = {
        "jax_compilation_cache_dir": str(folder),
        # every program, however quick: a second run then compiles nothing, whatever the load made each take
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    for name, value in settings.items():
        os.environ[name.upper()] = str(value)
    import jax

    for name, value in settings.items():
        jax.config.update(name, value)
    return folder
