"""Warnings reported at the user's line.

A fixed ``stacklevel`` names the right line for one call path only: the same fallback is reached
from ``update``, ``batch_filter``, ``reset``, a tuning loop or a thread-limiting wrapper, each at
another depth. :func:`warn_user` counts the frames instead.
"""

import contextlib
import os
import sys
import threading
import warnings
from importlib.util import find_spec


def _folder(module):
    """The folder of ``module``'s package, found without importing it."""
    return os.path.dirname(os.path.abspath(find_spec(module).origin)) + os.sep


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# frames passed over on the way to the user's line: ours, joblib's (tuning and the bench call back
# into the package through it) and filterpy's (its unscented filter calls back into ours to invert a
# covariance): their frames sit between the user and the warning
_PASSED_OVER = (_PACKAGE, _folder("joblib"), _folder("filterpy"))


def warn_user(message, category):
    """``warnings.warn`` attributed to the innermost caller outside this package (and joblib).

    Parameters
    ----------
    message : str
        The warning's text.
    category : type
        A ``Warning`` subclass.

    Returns
    -------
    None
    """
    level, frame = 2, sys._getframe(1)
    # stop at the outermost frame when every caller is ours (the command line)
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PASSED_OVER):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


#: what Python's default filters hide outside __main__: warnings for a library's developers
_DEVELOPERS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def recorded(func, *args, **kwargs):
    """``func(*args, **kwargs)`` with the warnings it raised returned as ``(message, category)``
    pairs, for work run in another process or thread: there a warning prints at the worker's own
    line (multiprocessing's), or never reaches the caller (a Dask worker's log).

    Work running at once in several threads of one process (joblib's threading backend, Dask's
    threaded scheduler) is recorded apart, each thread's warnings its own; the caller's threads
    warn as they would have.

    Returns
    -------
    result, messages : object, list of (str, type)
        What ``func`` returned, and each warning's text and category.
    """
    log = []
    with _recording(log):
        result = func(*args, **kwargs)
    # what the default filters hide stays hidden (a worker runs library code, none of the
    # caller's): reissued at the caller's line, a dependency's deprecation would read as its own
    return result, [(message, category) for message, category in log if not issubclass(category, _DEVELOPERS)]


class _Recorder:
    """One ``warnings.showwarning`` for every thread recording at once.

    ``warnings.catch_warnings`` swaps the process's warning state in and out: entered in two
    threads at once, the second's exit restores the first's recorder for good, and every later
    warning of the process is lost in a list nobody reads. Here the first thread to record
    installs one hook, under the process's filters with ``"always"`` in front (a worker's second
    run must not be muted by its first); it sends each warning to the log of the thread that
    raised it, and any other thread's to the hook it replaced. The last thread to finish puts the
    process's state back.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._logs = {}  # thread ident -> (log, the entry of the recording it sits in, or None)
        self._saved = self._passed_on = None

    def _show(self, message, category, filename, lineno, file=None, line=None):
        entry = self._logs.get(threading.get_ident())
        if entry is None:
            self._passed_on(message, category, filename, lineno, file, line)
        else:
            entry[0].append((str(message), category))

    @contextlib.contextmanager
    def __call__(self, log):
        ident = threading.get_ident()
        with self._lock:
            if not self._logs:
                self._saved = warnings.catch_warnings()
                self._saved.__enter__()
                warnings.simplefilter("always")
                self._passed_on, warnings.showwarning = warnings.showwarning, self._show
            outer = self._logs.get(ident)
            self._logs[ident] = (log, outer)
        try:
            yield
        finally:
            with self._lock:
                if outer is None:
                    del self._logs[ident]
                else:
                    self._logs[ident] = outer
                if not self._logs:
                    self._saved.__exit__(None, None, None)
                    self._saved = self._passed_on = None


_recording = _Recorder()


def reissued(messages):
    """Warn each distinct ``(message, category)`` of ``messages`` once, at the user's line (the
    warnings :func:`recorded` brought back from the workers)."""
    for message, category in dict.fromkeys(messages):
        warn_user(message, category)
