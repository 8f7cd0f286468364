"""Where a sweep runs: in this process (serially, or a few points at once in threads), a local process pool, or
a Dask cluster (local, existing, SLURM).

:func:`sweep_executor` is a context manager that yields what :func:`bayesattn.sweep.run_sweep` takes as
``executor`` (None for serial). The science modules never see it: the same points, with keys folded from
each point's own fields, give the same point files whichever executor runs them (``tests/test_scaleout.py``).

``sweep_executor("thread", workers=2)`` computes two points at once in threads of this process. The compiled
programs are shared (each is compiled once); JAX releases the GIL while a program runs, so two points'
sampling programs run side by side, and one point's Python work and first-time compilations overlap the
other's sampling. On 2 cores this was the fastest executor measured (``docs/scaleout.md``).

Dask (the ``dask`` extra, ``pip install 'bayesattn[dask]'``) is imported only here, and only when asked for:

- ``sweep_executor("dask", workers=4)`` starts a ``distributed.LocalCluster`` of 4 single-threaded worker
  processes (each worker keeps its compiled programs between points, as a pool process does);
- ``sweep_executor("dask", scheduler="tcp://host:8786")`` joins a running cluster (a scheduler started with
  ``dask scheduler``, workers with ``dask worker tcp://host:8786 --nthreads 1``, or a ``dask_jobqueue``
  cluster: ``scripts/slurm_phase_diagram.py``). Its workers need bayesattn installed, at the same version.

A worker that dies mid-point (killed, out of memory, preempted) loses only that point: Dask's scheduler
reruns it on another worker (up to ``distributed.scheduler.allowed-failures`` times), and a point lost for
good is listed in the sweep's ``failures.jsonl`` and computed by the rerun.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import multiprocessing as mp
import socket
from collections.abc import Iterator
from typing import Any

from ._validate import check_choice, check_int

EXECUTORS = ("serial", "thread", "process", "dask")
CONNECT_TIMEOUT_S = 5.0


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise ValueError(
            "executor='dask': needs dask.distributed; install it with pip install 'bayesattn[dask]'"
        ) from None
    return distributed


def connect(scheduler: str, timeout: float = CONNECT_TIMEOUT_S):
    """A ``distributed.Client`` of the running scheduler at ``scheduler`` (``tcp://HOST:PORT``); ValueError
    naming it when it cannot be reached (at once where the port refuses or the host does not resolve, else after at
    most ``timeout`` seconds) or when what answers there is not a Dask scheduler."""
    distributed = check_scheduler(scheduler, timeout)
    try:
        return distributed.Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
    except Exception as e:  # noqa: BLE001 -- OSError, TimeoutError, or dask's parse errors of the address
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise _refusal(scheduler, f"cannot connect within {timeout:g} s ({why})") from None


def check_scheduler(scheduler: str, timeout: float = CONNECT_TIMEOUT_S):
    """Check that a Dask scheduler answers at ``scheduler`` (a tcp:// address: one plain connection, then its own
    identity query; other protocols are left to the client), without making a client; ValueError naming the
    address otherwise. Returns the ``distributed`` module."""
    distributed = _import_distributed()
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler={scheduler!r}: expected the address of a Dask scheduler, e.g. tcp://HOST:8786")
    if scheduler.startswith("tcp://"):  # other protocols (tls://, ...) need the security settings Dask's client reads
        _reachable(distributed, scheduler, timeout)
        _is_a_scheduler(distributed, scheduler, timeout)
    return distributed


def _refusal(scheduler: str, what: str) -> ValueError:
    return ValueError(
        f"scheduler={scheduler!r}: {what}; expected the address of a running Dask scheduler, e.g. tcp://HOST:8786"
    )


def _reachable(distributed, scheduler: str, timeout: float) -> None:
    """One plain TCP connection to a tcp:// address: a host that does not resolve or a port that refuses fails at
    once, where Dask's client retries until its timeout. ValueError naming the address."""
    try:
        host, port = distributed.comm.parse_host_port(distributed.comm.parse_address(scheduler)[1])
    except ValueError:  # no port: left to Dask's client
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:  # socket.gaierror, ConnectionRefusedError, TimeoutError
        raise _refusal(scheduler, f"cannot connect ({e.strerror or str(e) or type(e).__name__})") from None


def _is_a_scheduler(distributed, scheduler: str, timeout: float) -> None:
    """Ask the service at ``scheduler`` who it is, in Dask's own protocol; ValueError naming the address unless a
    scheduler answers. A ``Client`` given a service that is not a scheduler fails with an unreadable message, and its
    half-built self then hangs for 10 s and prints a traceback when the interpreter exits."""

    async def ask():
        comm = await distributed.comm.connect(scheduler, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    try:
        with cf.ThreadPoolExecutor(1) as pool:  # an event loop of its own, whatever loop the caller runs
            reply = pool.submit(asyncio.run, ask()).result()
    except Exception as e:  # noqa: BLE001 -- whatever a service that does not speak Dask's protocol makes it raise
        raise _refusal(scheduler, f"no Dask scheduler answers there ({type(e).__name__})") from None
    kind = reply.get("type") if isinstance(reply, dict) else None
    if not (isinstance(kind, str) and kind.endswith("Scheduler")):  # Scheduler, or a subclass named so
        raise _refusal(scheduler, f"a Dask {kind or 'service'} answers there, not a scheduler")


def local_cluster(workers: int, processes: bool = True, **kwargs):
    """A ``distributed.LocalCluster`` of ``workers`` single-threaded workers (worker processes by default; the
    dashboard on a free port, quiet logs) and its ``Client``."""
    distributed = _import_distributed()
    kwargs = {
        "n_workers": workers,
        "threads_per_worker": 1,
        "processes": processes,
        "dashboard_address": ":0",
        "silence_logs": logging.ERROR,
        **kwargs,
    }
    cluster = distributed.LocalCluster(**kwargs)
    return cluster, distributed.Client(cluster, set_as_default=False)


def check_executor(
    kind: str | None = None, workers: int | None = None, scheduler: str | None = None, *, processes: bool = True
) -> str:
    """The kind of executor :func:`sweep_executor` starts for these arguments (None resolved as it resolves it), its
    options checked: ValueError naming the first that does not fit. Starts nothing and connects nowhere, so that a
    command can refuse bad options before it makes its output folder."""
    if kind is None:
        kind = "dask" if scheduler else ("process" if (workers or 1) > 1 else "serial")
    check_choice("executor", kind, EXECUTORS)
    if workers is not None:
        check_int("workers", workers, minimum=1)
    if not processes and (kind != "dask" or scheduler):
        raise ValueError(
            f"processes=False with executor={kind!r}{' and a scheduler' if scheduler else ''}: thread "
            "workers are only for a local Dask cluster (or choose executor='thread')"
        )
    if scheduler and kind != "dask":
        raise ValueError(
            f"scheduler={scheduler!r} with executor={kind!r}: a scheduler is joined only with executor='dask'"
        )
    if kind == "serial" and workers not in (None, 1):
        raise ValueError(
            f"workers={workers} with executor='serial': expected 1 (or choose 'thread', 'process' or 'dask')"
        )
    return kind


@contextlib.contextmanager
def sweep_executor(
    kind: str | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    *,
    processes: bool = True,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> Iterator[Any]:
    """Yield the executor of ``kind`` for :func:`~bayesattn.sweep.run_sweep` (None: serial), closed on exit.

    kind: "serial", "thread" (a thread pool of ``workers`` in this process, default 2), "process" (a spawn
    process pool of ``workers``), "dask" (a local cluster of ``workers``, or the cluster at ``scheduler``);
    None: "dask" when ``scheduler`` is given, else "process" when ``workers > 1``, else "serial" (the behaviour
    of ``--workers N`` alone). ``processes=False``: the local Dask cluster's workers are threads of this
    process (``LocalCluster(processes=False)``), which share its compiled programs; a worker that crashes then
    takes the process with it."""
    kind = check_executor(kind, workers, scheduler, processes=processes)
    if kind == "serial":
        yield None
    elif kind == "thread":
        with cf.ThreadPoolExecutor(max_workers=workers or 2, thread_name_prefix="bayesattn-sweep") as pool:
            yield pool
    elif kind == "process":
        from .runtime import worker_init

        with cf.ProcessPoolExecutor(
            max_workers=workers or 1, mp_context=mp.get_context("spawn"), initializer=worker_init
        ) as pool:
            yield pool
    elif scheduler:
        if workers is not None:
            raise ValueError(
                f"workers={workers} with scheduler={scheduler!r}: an existing cluster has its own "
                "workers; give workers only for a local cluster"
            )
        client = connect(scheduler, connect_timeout)
        try:
            yield client
        finally:
            client.close()
    else:
        cluster, client = local_cluster(workers or 1, processes=processes)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
