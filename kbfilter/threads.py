"""How many BLAS threads kbfilter's own work runs with.

A filter's linear algebra is many small products (a step at ``T = 1,000`` is two ``T x T``
matrix-vector products), too small for threads to pay for their start-up, and tuning already runs
one fit per joblib worker. With OpenBLAS's default of one thread per core, the threads spin and
contend with the other workers and with whatever else the machine runs. Measured on a 2-core
machine with another process busy on one core (``benchmarks/threads.py --busy 1 --tune``), the
front page's tracking example took 299 s with the default threads and 50 s with one, and an exact
step at ``T = 4,000`` 117 ms against 18 ms; on the idle machine one thread costs up to 1.5x on a
large exact fit and saves 2.4x on its steps. So kbfilter's public entry points (fitting,
filtering, tuning, benchmarking) run with **one BLAS thread** by default and restore the
process's setting when they return; code outside kbfilter is not affected.

Change it for the whole process with :func:`set_blas_threads` or the environment variable
``KBFILTER_BLAS_THREADS`` (an integer, or ``default`` to leave BLAS as it is). Large exact fits
(``T`` of several thousand) on an otherwise idle machine gain from more threads.

Examples
--------
>>> import kbfilter as kb
>>> previous = kb.set_blas_threads(2)
>>> kb.blas_threads()
2
>>> _ = kb.set_blas_threads(previous)
"""

import functools
import os
import threading

from threadpoolctl import ThreadpoolController

__all__ = ["blas_threads", "set_blas_threads", "limited_blas"]

_ENV = "KBFILTER_BLAS_THREADS"
_local = threading.local()
_controller = None
# held by the thread whose entry point holds the process's BLAS limit (see limited_blas)
_limit_held = threading.Lock()


def _parse(value, name):
    if value is None or (isinstance(value, str) and value.strip().lower() in ("default", "none", "")):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    # True is 1 to int(), but a flag is not a thread count
    if n < 1 or isinstance(value, bool) or (not isinstance(value, str) and n != value):
        raise ValueError(f"{name}: expected a positive integer or None ('default'), got {value!r}")
    return n


_setting = _parse(os.environ.get(_ENV, "1"), _ENV)


def blas_threads():
    """The number of BLAS threads kbfilter's entry points run with.

    Returns
    -------
    int or None
        None: kbfilter leaves the process's BLAS threading as it is.
    """
    return _setting


def set_blas_threads(n):
    """Set how many BLAS threads kbfilter's entry points run with, for the whole process.

    Parameters
    ----------
    n : int or None
        A positive number of threads (1 is the default), or None to leave BLAS threading to the
        process (its own default, ``OMP_NUM_THREADS``, or an enclosing ``threadpool_limits``).

    Returns
    -------
    int or None
        The previous setting, so that it can be restored.
    """
    global _setting
    previous, _setting = _setting, _parse(n, "n")
    return previous


def _threadpools():
    global _controller
    if _controller is None:  # built on first use, after numpy's and scipy's BLAS are loaded
        _controller = ThreadpoolController()
    return _controller


def limited_blas(func):
    """Decorator for a public entry point: run it under the :func:`blas_threads` setting.

    Nested entry points (a filter fitted inside ``tune_filter``) inherit the outermost limit and
    pay nothing more.
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _setting is None or getattr(_local, "active", False):
            return func(*args, **kwargs)
        # BLAS threads are the process's, not a thread's: one thread at a time sets the limit and
        # restores what it found. Had each thread saved and restored its own, a thread entering
        # while another held the limit would have saved that limit as the process's setting and
        # left it behind (one BLAS thread for the rest of the process)
        owner = _limit_held.acquire(blocking=False)
        _local.active = True
        try:
            if not owner:  # run under the limit another thread holds (or, once it is done, none)
                return func(*args, **kwargs)
            with _threadpools().limit(limits=_setting, user_api="blas"):
                return func(*args, **kwargs)
        finally:
            _local.active = False
            if owner:
                _limit_held.release()

    return wrapper
