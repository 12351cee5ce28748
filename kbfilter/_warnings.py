"""Warnings reported at the user's line.

A fixed ``stacklevel`` names the right line for one call path only: the same fallback is reached
from ``update``, ``batch_filter``, ``reset``, a tuning loop or a thread-limiting wrapper, each at
another depth. :func:`warn_user` counts the frames instead.
"""

import contextlib
import os
import re
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
    threaded scheduler) is recorded apart, each thread's warnings its own (see :func:`ignored`).

    Returns
    -------
    result, messages : object, list of (str, type)
        What ``func`` returned, and each warning's text and category.
    """
    log = []
    with _scopes.entered(log):
        result = func(*args, **kwargs)
    # what the default filters hide stays hidden (a worker runs library code, none of the
    # caller's): reissued at the caller's line, a dependency's deprecation would read as its own
    return result, [(message, category) for message, category in log if not issubclass(category, _DEVELOPERS)]


def ignored(*categories, message=None):
    """A context in which this thread's warnings of ``categories`` (default: all) are dropped, and
    only this thread's: ``warnings.catch_warnings`` with ``simplefilter("ignore", ...)`` in its
    place swaps the whole process's warning state in and out.

    Parameters
    ----------
    *categories : type
        ``Warning`` subclasses; none given means every warning.
    message : str, optional
        A regular expression the start of the warning's text must match (as a filter's).

    Returns
    -------
    context manager
    """
    return _scopes.entered((categories or (Warning,), None if message is None else re.compile(message, re.I)))


class _ThreadScopes:
    """One ``warnings.showwarning`` for every thread that records or drops warnings at once.

    ``warnings.catch_warnings`` swaps the process's warning state in and out: entered in two
    threads at once, the one that leaves last restores what the other had set, for good — a
    recorder no one reads, or an "ignore" filter, and every later warning of the process is lost.
    Here the first thread to enter a scope installs one hook, with ``"always"`` in front of the
    process's filters so that each warning reaches it (a worker's second run must not be muted by
    its first); the hook looks at the scopes of the thread that raised the warning, innermost
    first: an ignoring one that matches drops it, a recording one keeps it. A thread in no scope,
    or whose scopes let the warning through, gets it as the process's own filters say: "ignore"
    drops it, "error" raises it, "default", "module" and "once" show it once a line, a module or
    at all while any scope is open (as ``warnings`` would, whose own record of what it showed is
    bypassed by ``"always"``), any other action shows it. The last scope to end puts the process's
    state back.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._scopes = {}  # thread ident -> its scopes, innermost last
        self._saved = self._filters = self._passed_on = None
        self._shown = set()  # what the "default", "module" and "once" actions have shown

    def _show(self, message, category, filename, lineno, file=None, line=None):
        text = str(message)
        for scope in reversed(self._scopes.get(threading.get_ident(), ())):
            if isinstance(scope, list):
                scope.append((text, category))
                return
            categories, pattern = scope
            if issubclass(category, categories) and (pattern is None or pattern.match(text)):
                return
        # a warning in flight as the last scope ends finds the process's own state back
        filters, passed_on = self._filters or warnings.filters, self._passed_on or warnings.showwarning
        action = _action(filters, text, category, filename, lineno)
        if action == "error":
            raise message if isinstance(message, Warning) else category(text)
        if action in _ONCE_PER:
            key = (action, text, category, *_ONCE_PER[action](filename, lineno))
            if key in self._shown:
                return
            self._shown.add(key)
        if action != "ignore":
            passed_on(message, category, filename, lineno, file, line)

    @contextlib.contextmanager
    def entered(self, scope):
        ident = threading.get_ident()
        with self._lock:
            if not self._scopes:
                self._saved = warnings.catch_warnings()
                self._saved.__enter__()
                self._filters = list(warnings.filters)
                warnings.simplefilter("always")
                self._passed_on, warnings.showwarning = warnings.showwarning, self._show
            self._scopes.setdefault(ident, []).append(scope)
        try:
            yield
        finally:
            with self._lock:
                scopes = self._scopes[ident]
                scopes.pop()
                if not scopes:
                    del self._scopes[ident]
                if not self._scopes:
                    self._saved.__exit__(None, None, None)
                    self._saved = self._filters = self._passed_on = None
                    self._shown = set()


# where each of warnings' showing-once actions shows a warning once: a line, a module, anywhere
_ONCE_PER = {"default": lambda filename, lineno: (filename, lineno),
             "module": lambda filename, lineno: (filename,),
             "once": lambda filename, lineno: ()}


def _action(filters, text, category, filename, lineno):
    """What ``filters`` (``warnings.filters`` as it was) say of a warning, as ``warnings`` decides
    it; the module is the one whose file raised it."""
    module = _module_names().get(os.path.abspath(filename)) or os.path.splitext(os.path.basename(filename))[0]
    for action, pattern, kind, mod, line in filters:
        if ((pattern is None or pattern.match(text)) and issubclass(category, kind)
                and (mod is None or mod.match(module)) and line in (0, lineno)):
            return action
    return warnings.defaultaction


def _module_names():
    """File -> module name, of the modules imported so far."""
    return {os.path.abspath(f): name for name, m in list(sys.modules.items())
            if isinstance(f := getattr(m, "__file__", None), str)}


_scopes = _ThreadScopes()


def reissued(messages):
    """Warn each distinct ``(message, category)`` of ``messages`` once, at the user's line (the
    warnings :func:`recorded` brought back from the workers)."""
    for message, category in dict.fromkeys(messages):
        warn_user(message, category)
