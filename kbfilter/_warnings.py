"""Warnings reported at the user's line.

A fixed ``stacklevel`` names the right line for one call path only: the same fallback is reached
from ``update``, ``batch_filter``, ``reset``, a tuning loop or a thread-limiting wrapper, each at
another depth. :func:`warn_user` counts the frames instead.
"""

import os
import sys
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
    pairs, for work run in another process: there a warning prints at the worker's own line
    (multiprocessing's), or never reaches the caller (a Dask worker's log).

    Returns
    -------
    result, messages : object, list of (str, type)
        What ``func`` returned, and each warning's text and category.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args, **kwargs)
    # what the default filters hide stays hidden (a worker runs library code, none of the
    # caller's): reissued at the caller's line, a dependency's deprecation would read as its own
    return result, [(str(w.message), w.category) for w in caught if not issubclass(w.category, _DEVELOPERS)]


def reissued(messages):
    """Warn each distinct ``(message, category)`` of ``messages`` once, at the user's line (the
    warnings :func:`recorded` brought back from the workers)."""
    for message, category in dict.fromkeys(messages):
        warn_user(message, category)
