"""Progress bars on long fits, and how to keep them quiet.

A fit on the local path at ``T = 10^6`` training states runs for most of a minute, nearly all of
it learning the localized transition at every state; a Nyström fit at ``T = 10^5`` spends a third
of its time choosing landmarks by pivoted Cholesky. That work shows a
`tqdm <https://tqdm.github.io>`_ bar on standard error once it has run for ``PROGRESS_DELAY``
seconds, so short work prints nothing, and the bar is removed when the work is done.

:func:`~kbfilter.tune_filter` and the benchmarks keep the fits they run themselves quiet and show
their own bar instead (``progress=False`` quiets the tuned filter's final fit too). Quiet a
block of your own code with :func:`quiet_progress`, or every bar of the process with the
environment variable ``TQDM_DISABLE=1`` (read by tqdm when it is imported, so set it before Python starts).

Examples
--------
>>> import kbfilter as kb
>>> states, obs = kb.systems.Rotation().simulate(300, rng=0)
>>> with kb.progress.quiet_progress():
...     kbf = kb.KernelBayesFilter(approximation="local").fit(states, obs)
"""

import contextlib
import threading

from tqdm.auto import tqdm

__all__ = ["PROGRESS_DELAY", "progress_bar", "quiet_progress"]

#: seconds a piece of work runs before its bar appears
PROGRESS_DELAY = 2.0

_local = threading.local()


def progress_bar(total, desc, unit="it", shown=True):
    """A bar over ``total`` units of work, shown after ``PROGRESS_DELAY`` seconds unless quiet.

    Parameters
    ----------
    total : int or None
        The units of work (None: not known yet; set ``bar.total`` before the bar appears).
    desc : str
        What the work is.
    unit : str, default="it"
        What one unit is.
    shown : bool, default=True
        False: quiet (a caller's ``progress=False``); True still leaves it to
        :func:`quiet_progress` and ``TQDM_DISABLE``.

    Returns
    -------
    tqdm.tqdm
        The bar (disabled inside :func:`quiet_progress`); close it, or use it as a context manager.
    """
    # disable is only passed to quiet a bar: passed always, it would override TQDM_DISABLE
    quiet = {"disable": True} if getattr(_local, "quiet", False) or not shown else {}
    return tqdm(total=total, desc=desc, unit=unit, delay=PROGRESS_DELAY, leave=False, **quiet)


@contextlib.contextmanager
def quiet_progress(quiet=True):
    """Keep the progress bars of the work inside the ``with`` block quiet (in this thread).

    Parameters
    ----------
    quiet : bool, default=True
        False leaves the bars as they are (so a caller can pass its own ``progress`` flag on).

    Yields
    ------
    None
    """
    previous = getattr(_local, "quiet", False)
    _local.quiet = previous or bool(quiet)
    try:
        yield
    finally:
        _local.quiet = previous
