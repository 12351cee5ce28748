"""A training log with gaps, as the pieces between them.

A row of a log that holds a NaN or an infinity (a sensor that dropped out, a state the reference
system lost) is a gap. A filter learns its transition from consecutive rows, so the rows on either
side of a gap must not be joined by dropping it: the log is cut there instead, and each piece is a
training sequence of its own (``fit`` takes lists of sequences).
"""

import numpy as np

from .._validation import check_int, check_matrix, check_same_length, check_samples, several_sequences
from .._warnings import warn_user

__all__ = ["cut_at_gaps"]


def _finite_rows(values):
    return np.isfinite(values).all(axis=1)


def _runs(states, observations, controls, suffix):
    """One sequence's columns (states, observations in their shape[, controls]) and its runs of
    finite rows, as ``(start, stop)`` pairs."""
    X = check_matrix(states, f"states{suffix}", finite=False)
    Z, shape = check_samples(observations, f"observations{suffix}", finite=False)
    check_same_length(f"states{suffix}", X, f"observations{suffix}", Z)
    kept = _finite_rows(X) & _finite_rows(Z)
    columns = [X, Z.reshape(len(Z), *shape)]
    if controls is not None:
        U = check_matrix(controls, f"controls{suffix}", finite=False)
        check_same_length(f"states{suffix}", X, f"controls{suffix}", U)
        kept &= _finite_rows(U)
        columns.append(U)
    # where each run of finite rows starts and where it ends
    edges = np.flatnonzero(np.diff(np.r_[0, kept.astype(np.int8), 0]))
    return columns, list(zip(edges[::2], edges[1::2]))


def _as_sequences(values, name, n):
    if not isinstance(values, (list, tuple)) or len(values) != n:
        raise ValueError(f"states and {name}: expected both one sequence or both lists of {n} sequences, got "
                         f"{len(values) if isinstance(values, (list, tuple)) else type(values).__name__}")
    return list(values)


def cut_at_gaps(states, observations, controls=None, min_length=2):
    """Cut a log at its gaps: the runs of rows between the rows that hold a NaN or an infinity.

    Parameters
    ----------
    states : array-like of shape (T, dim_x), or a list of such arrays
        The logged states, one row a step; several sequences (runs) as a list, as ``fit`` takes
        them, are each cut.
    observations : array-like of shape (T, ...), or a list of such arrays
        Their observations (vectors, or images in their natural shape, which they keep).
    controls : array-like of shape (T, dim_u), or a list of such arrays, optional
        The controls, one a step, cut with the states.
    min_length : int, default=2
        The fewest steps a piece keeps (two make a transition); shorter pieces are left out,
        and a :class:`UserWarning` says how many steps that drops.

    Returns
    -------
    states, observations : list of ndarray
        The pieces, in the log's order: what ``fit`` takes as several sequences.
    controls : list of ndarray
        Only when ``controls`` is given: its pieces, which ``fit`` takes by keyword
        (``xs, zs, us = cut_at_gaps(states, obs, controls)``, ``fit(xs, zs, controls=us)``).

    Raises
    ------
    ValueError
        When no piece of ``min_length`` steps remains.

    Examples
    --------
    >>> import numpy as np
    >>> states = np.arange(8.0).reshape(8, 1)
    >>> states[3] = np.nan
    >>> xs, zs = cut_at_gaps(states, states + 0.5)
    >>> [x.ravel().tolist() for x in xs]
    [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0, 7.0]]
    """
    min_length = check_int(min_length, "min_length", minimum=2)
    if several_sequences(states):
        n = len(states)
        logs = zip(states, _as_sequences(observations, "observations", n),
                   [None] * n if controls is None else _as_sequences(controls, "controls", n))
        logs = [(x, z, u, f"[{i}]") for i, (x, z, u) in enumerate(logs)]
    else:
        logs = [(states, observations, controls, "")]
    pieces, short = [], []
    for log in logs:
        columns, runs = _runs(*log)
        for start, stop in runs:
            if stop - start >= min_length:
                pieces.append([column[start:stop] for column in columns])
            else:
                short.append(stop - start)
    if not pieces:
        raise ValueError(f"states and observations: expected a run of at least min_length = {min_length} steps "
                         f"without a NaN or an infinity, got {len(short)} run(s), the longest of "
                         f"{max(short, default=0)}")
    if short:
        warn_user(f"cut_at_gaps: left out {sum(short)} step(s) in {len(short)} piece(s) shorter than "
                  f"min_length = {min_length} between gaps", UserWarning)
    # one list a column: the states' pieces, the observations'[, the controls']
    return tuple(map(list, zip(*pieces)))
