"""Filter-level hyperparameter selection by validation (algorithms §7; Xu et al. (2022) §6.2).

The last ``validation_length`` steps of the training data are held out; the filter is fitted on
the rest and run on the held-out observations; the point with the smallest state MSE wins, and
the filter is refitted on all the data with it. Test data are never looked at.

Evaluations run through joblib without a fixed backend: wrap the call in
``joblib.parallel_config(backend="dask")`` (or any registered backend) to move it to a cluster.
"""

import copy
import inspect
import itertools
import time
from collections import Counter
from collections.abc import Mapping
from numbers import Real

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import clone

from ._validation import (as_hashable, check_bool, check_choice, check_controls, check_int, check_n_jobs, check_rng,
                          check_sequences, check_values)
from ._warnings import ignored, warn_user
from .filters.grids import (BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, MONTE_CARLO_IMAGE_GRID,
                            MONTE_CARLO_SCALABLE_IMAGE_GRID, NEAREST_IMAGE_GRID, NEIGHBOUR_GRID, SCALABLE_BLUR_GRID,
                            SCALABLE_GRID)
from .linalg import NumericalWarning
from .progress import progress_bar, quiet_progress
from .stats import mean_nees
from .threads import limited_blas

__all__ = ["DEFAULT_GRID", "SCALABLE_GRID", "IMAGE_GRID", "FEATURE_GRID", "BLUR_GRID", "MONTE_CARLO_IMAGE_GRID",
           "MONTE_CARLO_SCALABLE_IMAGE_GRID", "SCALABLE_BLUR_GRID",
           "NEIGHBOUR_GRID", "NEAREST_IMAGE_GRID", "tune_filter", "validation_split",
           "validation_mse", "check_validation_length", "default_validation_length", "VALIDATION_LENGTH",
           "check_param_grid", "default_grid", "MAX_EXTENSIONS"]

#: the steps :func:`tune_filter` holds out when told no number, from a long enough sequence
VALIDATION_LENGTH = 200


def default_validation_length(n_steps, n_folds=1, name="train_length"):
    """The held-out block of :func:`tune_filter` when it is given none: the last
    :data:`VALIDATION_LENGTH` steps, or half of a shorter sequence, so that the fit keeps as many
    steps as the block, and no longer than ``n_folds`` blocks leave room for.

    Parameters
    ----------
    n_steps : int
        Steps in the (last) training sequence.
    n_folds : int, default=1
        The number of blocks.
    name : str
        What the error message calls ``n_steps``.

    Returns
    -------
    int
        ``min(200, n_steps // 2, (n_steps - 3) // n_folds)``.

    Examples
    --------
    >>> default_validation_length(1000), default_validation_length(300), default_validation_length(300, n_folds=3)
    (200, 150, 99)
    """
    n_folds = check_int(n_folds, "n_folds")
    if n_steps < n_folds + 3:
        raise ValueError(f"{name}: expected at least n_folds + 3 = {n_folds + 3} steps (a held-out step per "
                         f"block and three to fit on), got {n_steps}")
    return min(VALIDATION_LENGTH, n_steps // 2, (n_steps - 3) // n_folds)


def check_validation_length(n_steps, validation_length, n_folds=1, name="train_length"):
    """Check that ``n_steps`` training steps leave room for ``n_folds`` validation blocks.

    Every held-out block of ``validation_length`` steps needs a fit on what is left, and that
    needs at least three steps: ``n_steps >= n_folds x validation_length + 3``.

    Parameters
    ----------
    n_steps : int
        Steps in the (last) training sequence.
    validation_length : int
        The length of each held-out block.
    n_folds : int, default=1
        The number of blocks.
    name : str
        What the error message calls ``n_steps``.

    Returns
    -------
    validation_length, n_folds : int
        Checked.
    """
    V = check_int(validation_length, "validation_length")
    n_folds = check_int(n_folds, "n_folds")
    if n_steps < n_folds * V + 3:
        raise ValueError(f"{name}: expected at least n_folds x validation_length + 3 = {n_folds * V + 3} steps, "
                         f"got {n_steps}; lower validation_length ({V}) or n_folds ({n_folds})")
    return V, n_folds


def _on_last_sequence(check, n_sequences, *args):
    """``check(*args)`` on the last training sequence, whose end is held out: of several, the
    refusal of a short one says that another may go last (a log cut at its gaps often ends in a
    short piece)."""
    try:
        return check(*args)
    except ValueError as exc:
        if n_sequences < 2:
            raise
        raise ValueError(f"{exc}; the blocks are held out from the end of the last sequence, so put a longer one "
                         f"last") from None


def validation_split(states, observations, validation_length, fold=0, controls=None):
    """Hold out a block of steps of the last training sequence.

    The block is the last ``validation_length`` steps (``fold=0``), or the block ``fold`` blocks
    before them (blocked cross-validation). The steps before and after the held-out block stay
    as two training sequences, so no transition crosses it.

    Parameters
    ----------
    states : array-like of shape (T, dim_x), or a list of such arrays
        The training states.
    observations : array-like, or a list of arrays
        Their observations (images keep their shape).
    validation_length : int
        The length of the held-out block.
    fold : int, default=0
        Which block, counted back from the end.
    controls : array-like or list of arrays, optional
        The controls, split with the states.

    Returns
    -------
    train : (list of ndarray, list of ndarray[, list of ndarray])
        The training state, observation (and control) sequences that remain.
    validation : (ndarray, ndarray[, ndarray])
        The held-out states, observations (and controls).
    """
    xs, zs, shape = check_sequences(states, observations)
    us = None if controls is None else check_controls(controls, xs)
    zs = [z.reshape(len(z), *shape) for z in zs]  # images stay images (a GaussianBlur needs their shape)
    fold = check_int(fold, "fold", minimum=0)
    T = len(xs[-1])
    V, _ = _on_last_sequence(check_validation_length, len(xs), T, validation_length, fold + 1,
                             "states (the last training sequence)")
    stop = T - fold * V
    start = stop - V
    pieces = [xs, zs] if us is None else [xs, zs, us]
    train = [seqs[:-1] + [seqs[-1][:start]] for seqs in pieces]
    if T - stop >= 2:  # a piece after the block needs a transition to be of use
        for part, seqs in zip(train, pieces):
            part.append(seqs[-1][stop:])
    return tuple(train), tuple(seqs[-1][start:stop] for seqs in pieces)


def _same(a, b):
    # grid values are numbers, strings or objects (a feature map): objects are the same only as themselves
    return a is b or (isinstance(a, (str, Real)) and isinstance(b, (str, Real)) and type(a) is type(b) and a == b)


def _key(point):
    """A grid point (a tuple of values) as a dictionary key."""
    return tuple(as_hashable(v) for v in point)


def _reused(fitted, fitted_with, params):
    """``fitted`` (fitted with ``fitted_with``) with ``params`` set by its ``with_params``, or None."""
    with_params = getattr(fitted, "with_params", None)  # a filter outside the library may not have it
    if not callable(with_params):
        return None
    return with_params(**{k: v for k, v in params.items() if not _same(v, fitted_with.get(k))})


def fitted_on_run(estimator, states, observations, controls=None):
    """``estimator`` fitted on a run; controls go by keyword, and only when there are any (a
    filter that takes none has no such argument). The benchmark fits its trained methods with it too."""
    if controls is None:
        return estimator.fit(states, observations)
    return estimator.fit(states, observations, controls=controls)


def _validation_scores(estimator, settings, train, validation):
    """For each of ``settings`` in turn, ``(mse, None, mean NEES)`` on the validation block, or
    ``(inf, "ErrorType: message", None)`` for a setting that fails (the mean NEES is None when the
    filter reports no positive definite covariance). One fit serves the settings that differ from
    the last one fitted only in what the filter takes without a new fit (its ``with_params``)."""
    x_val, z_val, *u_val = validation
    scores, fitted, fitted_with = [], None, None
    for params in settings:
        # tune_filter's own bar counts these fits. A candidate's warnings are not the chosen filter's:
        # its numerical events belong to a setting that may lose, and what its fit says of the data
        # the final fit says once, at the caller's line (in a worker process they had printed at
        # multiprocessing's, once per candidate)
        with ignored(), quiet_progress():
            try:
                kbf = _reused(fitted, fitted_with, params)
                if kbf is None:
                    fitted = None  # the last fit is let go before the next is made
                    kbf = fitted = fitted_on_run(clone(estimator).set_params(**params), *train)
                    fitted_with = params
                result = tuple(kbf.batch_filter(z_val, us=u_val[0] if u_val else None))
                means, covs = result[0], (result[1] if len(result) > 1 else None)
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
                scores.append((np.inf, f"{type(exc).__name__}: {exc}", None))
                continue
        mse = float(np.mean(np.sum((means - x_val) ** 2, axis=1)))
        scores.append((np.inf, "the filter's estimates were not finite", None) if not np.isfinite(mse)
                      else (mse, None, mean_nees(x_val, means, covs)))
    return scores


def _chunks(items, n):
    """``items`` in at most ``n`` consecutive runs of about equal length."""
    bounds = np.linspace(0, len(items), min(n, len(items)) + 1).round().astype(int)
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _repeat_seeds(filter, n_repeats):
    """Parameter overrides, one per validation run: ``[{}]`` for one run, else ``n_repeats`` seeds
    drawn from the template's ``random_state`` (a Generator passed in is not advanced)."""
    if n_repeats == 1:
        return [{}]
    params = filter.get_params()
    if "random_state" not in params:
        raise ValueError(f"n_repeats: {type(filter).__name__} draws no random numbers (it has no random_state), "
                         f"so repeated runs would all agree; expected 1, got {n_repeats}")
    rng = check_rng(copy.deepcopy(params["random_state"]))
    return [{"random_state": int(s)} for s in rng.integers(2**63, size=n_repeats)]


def validation_mse(estimator, params, train, validation):
    """State MSE of ``estimator`` with ``params`` fitted on ``train``, run on ``validation``.

    Parameters
    ----------
    estimator : KernelBayesFilter
        The template (cloned, never changed).
    params : dict
        Parameters to set on the clone.
    train : tuple
        ``(states, observations[, controls])`` to fit on.
    validation : tuple
        ``(states, observations[, controls])`` to filter and score.

    Returns
    -------
    float
        The mean squared state error; ``inf`` for a setting that fails numerically (a
        ``ValueError``, ``LinAlgError`` or ``FloatingPointError``, recorded rather than raised).
    """
    return _validation_scores(estimator, [params], train, validation)[0][0]


def default_grid(filter, observations):
    """The grid :func:`tune_filter` searches when given none: the filter's own ``default_grid``.

    Parameters
    ----------
    filter : LearnedFilter
        The template (any filter of :mod:`kbfilter.filters` that learns from data).
    observations : array-like or list of array-like
        The training observations (images may get other grids than vectors).

    Returns
    -------
    dict
        ``filter.default_grid(observations)``; the grids themselves are in
        :mod:`kbfilter.filters.grids`.
    """
    grid = getattr(filter, "default_grid", None)
    if not callable(grid):
        raise ValueError(f"param_grid: {type(filter).__name__} has no default grid; pass one")
    return grid(observations)


#: how many times :func:`tune_filter` may extend each end of each grid axis by default
MAX_EXTENSIONS = 3
#: a grid end whose step from its neighbour lowered the validation MSE by less than this fraction
#: of it is where the score has levelled off (a regulariser's limit): :func:`tune_filter` does not
#: warn that the best value may lie beyond it
LEVELLED_OFF = 1e-3


def check_param_grid(filter, param_grid, name="param_grid"):
    """Check a grid of hyperparameters against the filter it is for, before any fit.

    Parameters
    ----------
    filter : estimator
        The template the grid's settings are set on.
    param_grid : dict
        ``{parameter name: non-empty list of distinct candidate values}``.
    name : str, default="param_grid"
        The argument's name, for the messages.

    Returns
    -------
    dict
        ``{parameter name: tuple of values}``.

    Raises
    ------
    ValueError
        If ``param_grid`` is not such a dict, names a parameter ``filter`` does not have, or holds
        a value the filter's own ``check_params`` refuses. Each value is set alone on a clone of
        the template; a refusal that names the axis itself is the value's (one that names another
        parameter may depend on the combination, and is left to the search, which skips a failing
        setting). The template's own parameters outside the grid are checked with the first value
        of every axis. A filter without ``check_params`` is checked for the names only.

    Examples
    --------
    >>> import kbfilter as kb
    >>> kb.tuning.check_param_grid(kb.KernelBayesFilter(), {"scale": [0.5, 1.0]})
    {'scale': (0.5, 1.0)}
    >>> kb.tuning.check_param_grid(kb.KernelBayesFilter(), {"scale": [0.5, -1.0]})
    Traceback (most recent call last):
    ...
    ValueError: param_grid: KernelBayesFilter refuses scale=-1.0 (scale: expected a positive finite number, got -1.0)
    """
    if not isinstance(param_grid, Mapping) or not param_grid:
        raise ValueError(f"{name}: expected a dict of parameter names and non-empty value lists, got {param_grid!r}")
    grid = {axis: check_values(values, f"{name}[{axis!r}]", "candidate values") for axis, values in param_grid.items()}
    valid = filter.get_params()
    for axis in grid:
        if axis not in valid:
            raise ValueError(f"{name}: {axis!r} is not a parameter of {type(filter).__name__}")
    if not callable(getattr(filter, "check_params", None)):
        return grid
    for axis, values in grid.items():
        for value in values:
            exc = _refusal(filter, {axis: value})
            if exc is not None and str(exc).startswith(f"{axis}:"):
                raise ValueError(f"{name}: {type(filter).__name__} refuses {axis}={value!r} ({exc})")
    exc = _refusal(filter, {axis: values[0] for axis, values in grid.items()})
    if exc is not None and not any(str(exc).startswith(f"{axis}:") for axis in grid):
        raise ValueError(f"filter: {exc}")
    return grid


def _refusal(filter, params):
    """The ValueError ``filter.check_params()`` raises with ``params`` set on a clone, or None."""
    try:
        clone(filter).set_params(**params).check_params()
    except ValueError as exc:
        return exc
    return None


def _extendable(values):
    """True for an axis :func:`tune_filter` can extend: three or more numbers (not booleans),
    strictly increasing or strictly decreasing."""
    if len(values) < 3 or not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                                  for v in values):
        return False
    steps = np.diff(np.asarray(values, dtype=np.float64))
    return bool(np.all(steps > 0) or np.all(steps < 0))


def _end_chosen(values, best):
    """``"last"`` or ``"first"`` when ``best`` is that end of an extendable axis, else None."""
    if not _extendable(values) or best not in (values[0], values[-1]):
        return None
    return "last" if best == values[-1] else "first"


def _end_and_inner(values, side):
    """The ``side`` end (``"last"`` or ``"first"``) of an axis and its neighbour."""
    return (values[-1], values[-2]) if side == "last" else (values[0], values[1])


def _beyond(end, inner):
    """The value one step past ``end``, away from its neighbour ``inner``: by their ratio when both
    are positive (a geometric grid), by their difference otherwise; an integer axis stays integer.
    None when there is no such value (a positive axis would reach zero, an integer would repeat)."""
    if end > 0 and inner > 0:
        new = end * (end / inner)
    else:
        new = end + (end - inner)
    if isinstance(end, (int, np.integer)) and isinstance(inner, (int, np.integer)):
        new = int(round(new))
        if new == end:
            return None
    else:
        new = float(f"{new:.12g}")  # 1e-6 x 0.1 is 1e-07, not 1.0000000000000002e-07
    if end > 0 and inner > 0 and not new > 0:
        return None
    return new if np.isfinite(new) else None


def _extend_edges(grid, best, added, counts, max_extensions):
    """Extend, in place, each axis of ``grid`` whose ``best`` value is one of its ends, past that end.

    ``added`` maps an axis to the values added so far and ``counts`` an ``(axis, end)`` pair to the
    extensions of that end (both updated); each end is extended at most ``max_extensions`` times.
    Returns the names of the axes extended now."""
    grown = []
    for name, values in grid.items():
        side = _end_chosen(values, best[name])
        if side is None:
            continue
        last = side == "last"
        if counts[name, last] >= max_extensions:
            continue
        new = _beyond(*_end_and_inner(values, side))
        if new is None:
            continue
        grid[name] = values + (new,) if last else (new,) + values
        added.setdefault(name, []).append(new)
        counts[name, last] += 1
        grown.append(name)
    return grown


def _edge_warnings(grid, best, added, max_extensions, score):
    """Warn for each axis whose chosen value is still an end of its (monotone, numeric) list, unless
    nothing lies past that end (a positive integer axis at 1: see :func:`_beyond`), or the score has
    levelled off there: the step to the end from its neighbour lowered the validation MSE by less
    than :data:`LEVELLED_OFF` of it. ``score`` gives the validation MSE of a setting evaluated (None
    for one that was not)."""
    for name, values in grid.items():
        end = _end_chosen(values, best[name])
        if end is None or _beyond(*_end_and_inner(values, end)) is None:
            continue
        inner = score({**best, name: _end_and_inner(values, end)[1]})
        if inner is not None and np.isfinite(inner) and inner - score(best) < LEVELLED_OFF * inner:
            continue
        side = "smallest" if best[name] == min(values) else "largest"
        done = (f"after {len(added[name])} extension(s) of the axis (max_extensions={max_extensions})"
                if name in added else f"(max_extensions={max_extensions})")
        warn_user(f"tune_filter: the chosen {name}={best[name]!r} is the {side} value of its grid {done}; the "
                  f"best value may lie beyond it (raise max_extensions or extend param_grid[{name!r}])", UserWarning)


def _calibrated_scale(filter, consistency, states):
    """The ``covariance_scale`` that makes the mean validation NEES ``dim_x``, from the template's."""
    scale = filter.get_params()["covariance_scale"]
    if any(c is None for c in consistency) or not np.isfinite(np.mean(consistency)):
        warn_user("tune_filter: the chosen setting reported a covariance that is not positive definite on the "
                  "validation data; covariance_scale is left as it was", NumericalWarning)
        return scale
    dim_x = np.shape(states[0] if isinstance(states, (list, tuple)) else states)[-1]
    return float(scale * np.mean(consistency) / dim_x)


def _check_template(filter):
    """``tune_filter``'s template must be a filter object: it is cloned, set and fitted."""
    if inspect.isclass(filter):
        raise ValueError(f"filter: expected a filter, got the class {filter.__name__}; pass an instance, "
                         f"e.g. {filter.__name__}()")
    if not all(callable(getattr(filter, m, None)) for m in ("get_params", "set_params", "fit", "batch_filter")):
        raise ValueError(f"filter: expected a filter estimator (get_params, set_params, fit and batch_filter, as "
                         f"every filter of kbfilter.filters has), got {type(filter).__name__}")


@limited_blas
def tune_filter(filter, states, observations, param_grid=None, validation_length=None, n_jobs=None,
                progress=True, search="coordinate", n_folds=1, controls=None, n_repeats=1,
                max_extensions=MAX_EXTENSIONS, calibrate=True):
    """Choose a filter's hyperparameters on held-out training steps; refit on all the data.

    Parameters
    ----------
    filter : KernelBayesFilter, KernelMonteCarloFilter or another filter estimator
        The template; its other parameters are kept.
    states, observations : arrays or lists of arrays
        Training data, as for ``fit``.
    param_grid : dict, optional
        Distinct values per parameter. By default :func:`default_grid` chooses: :data:`DEFAULT_GRID`
        (bandwidth scale 0.1-4, both regularisers 1e-6-1) for vector observations, the image
        grids (observation bandwidth down to 0.05 x median) for images.
    validation_length : int or None, default=None
        Steps held out from the end of the (last) training sequence. None:
        :func:`default_validation_length`, the last 200 steps, or half of a last sequence shorter
        than 400 (so that a short log keeps as many steps for the fit as for tuning); a warning
        says when another sequence, put last, would give a longer block.
    n_jobs : int or None
        joblib workers for the evaluations (the active joblib backend is used).
    progress : bool
        Show a progress bar (once the search has run for ``PROGRESS_DELAY`` seconds, and not inside
        :func:`~kbfilter.progress.quiet_progress` or with ``TQDM_DISABLE`` set).
    search : {"coordinate", "grid"}
        ``"grid"`` evaluates every combination; ``"coordinate"`` starts from the filter's own
        values (or the middle of each list) and sweeps one parameter at a time over its whole
        list until a full sweep changes nothing.
    n_folds : int
        Validation blocks: the last ``validation_length`` steps (1, the paper protocol), or
        that many consecutive blocks from the end, each held out in turn with the filter fitted
        on the rest; the score is the mean MSE over blocks. More blocks make the choice less
        sensitive to what one short stretch happens to contain, at ``n_folds`` times the cost.
    controls : array-like or list of arrays, optional
        Training controls, as for the filter's ``fit``; validation runs pass them to
        ``batch_filter(zs, us)``.
    n_repeats : int
        Runs of a Monte Carlo filter (one with a ``random_state``) per validation block; the
        score is the mean over blocks and runs. One run (the default) uses the template's
        ``random_state``, and on a short block its single draw of the particles can decide
        between neighbouring settings. With more, run ``i`` has ``random_state`` set to the
        ``i``-th of ``n_repeats`` integers below ``2**63`` drawn by
        ``numpy.random.default_rng(random_state)`` (a Generator passed in is not advanced).
    max_extensions : int, default=3
        Grids that follow the optimum: when the best value of an axis of three or more numbers
        (strictly increasing or decreasing) is one of its ends, the axis gets one more value past
        that end and the search goes on from the best point; each end is extended at most this
        many times. The step is the grid's own: the ratio of the end value to its neighbour when
        both are positive (``scale`` 2, 4 gives 8; ``reg_prior`` 1e-5, 1e-6 gives 1e-7), their
        difference otherwise; an integer axis stays integer and a positive one positive, so an
        end with nothing past it (one neighbour) is neither extended nor warned about. 0 never
        extends (a chosen end is only warned about).
    calibrate : bool, default=True
        For a filter with a ``covariance_scale`` parameter (the kernel Bayes filter): set it so
        that the reported covariance is consistent on the validation blocks, i.e. multiply the
        template's value by the chosen setting's mean NEES there divided by ``dim_x`` (a
        consistent filter's mean NEES is ``dim_x``; see :ref:`smoothing`). The estimates do not
        change. When the chosen setting reported a covariance that is not positive definite,
        nothing is calibrated (a :class:`~kbfilter.NumericalWarning` says so).

    Returns
    -------
    filter : KernelBayesFilter, KernelMonteCarloFilter or another filter estimator
        A clone refitted on all the data with the chosen parameters; ``best_params_``,
        ``search_table_`` (one dict per evaluated point, with its mean validation ``mse``),
        ``param_grid_`` (the grid searched, extensions included), ``extended_params_`` (for
        each extended axis, the values added, in the order they were added; empty when none was),
        ``validation_nees_`` (the chosen setting's mean NEES on the validation blocks, before
        any calibration; None when it reported no positive definite covariance) and
        ``refit_time_`` (seconds the final fit took) are set on it, and saved with it.

    Raises
    ------
    ValueError
        Before any fit, for a grid value the filter refuses on its own (its ``check_params``, e.g.
        a negative ``scale``). When every setting fails; the message gives the first failure's
        cause, and names ``filter`` rather than ``param_grid`` when every one failed alike on a
        parameter outside the grid (a neighbourhood larger than the log left for the fits), or
        ``states``, ``observations`` or ``controls`` when that refusal names them. When
        only some fail (a value the data rule out, or a numerical failure), a
        :class:`~kbfilter.NumericalWarning` says how many, with the first cause.

    Warns
    -----
    UserWarning
        When a chosen value is still the smallest or largest of its (sorted, numeric) grid list
        once its extensions are used up: the best value may lie beyond the grid. Not when the
        score has levelled off there (the step to that end lowered the validation MSE by less
        than :data:`LEVELLED_OFF`, 0.1 %, of it: a regulariser near its limit).

    Examples
    --------
    >>> import kbfilter as kb
    >>> states, obs = kb.systems.Rotation().simulate(250, rng=0)
    >>> kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
    ...                      param_grid={"scale": (0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-3, 1e-1)})
    >>> sorted(kbf.best_params_)
    ['reg_prior', 'reg_update', 'scale']
    """
    _check_template(filter)
    check_choice(search, "search", ("coordinate", "grid"))
    check_n_jobs(n_jobs)
    grid = check_param_grid(filter, default_grid(filter, observations) if param_grid is None else param_grid)
    valid = filter.get_params()
    calibrate = check_bool(calibrate, "calibrate")
    progress = check_bool(progress, "progress")
    if calibrate and "covariance_scale" in grid:
        raise ValueError("param_grid: covariance_scale does not change the estimates, so the MSE cannot choose it; "
                         "calibrate=True sets it from the validation NEES (or pass calibrate=False)")
    n_folds = check_int(n_folds, "n_folds")
    max_extensions = check_int(max_extensions, "max_extensions", minimum=0)
    seeds = _repeat_seeds(filter, check_int(n_repeats, "n_repeats"))
    if len(seeds) > 1 and "random_state" in grid:
        raise ValueError("param_grid: random_state cannot be tuned when n_repeats draws the seeds; pass n_repeats=1")
    if validation_length is None:
        xs = check_sequences(states, observations)[0]
        validation_length = _on_last_sequence(default_validation_length, len(xs), len(xs[-1]), n_folds,
                                              "states (the last training sequence)")
        longest = max(len(x) for x in xs)
        if validation_length < default_validation_length(longest, n_folds):
            # a log cut at its gaps may end in a short piece, and a short block is a noisy score
            warn_user(f"tune_filter: the last training sequence has {len(xs[-1])} steps, so the held-out block is "
                      f"{validation_length} steps; put a longer sequence last (one has {longest}), or pass "
                      f"validation_length", UserWarning)
    # the farthest block first: a log too short for n_folds blocks is refused naming n_folds, not the
    # first block that did not fit
    splits = [validation_split(states, observations, validation_length, fold, controls)
              for fold in reversed(range(n_folds))][::-1]
    runs = [(split, seed) for split in splits for seed in seeds]
    # keyed by _key(point); evaluated holds the points themselves
    scores, failures, consistency, evaluated = {}, {}, {}, {}
    names = list(grid)
    # the caller's quiet_progress and TQDM_DISABLE hold here too, and a short search shows no bar
    bar = progress_bar(None, "tuning", unit="fit", shown=progress)

    def evaluate(points):
        todo = [p for k, p in {_key(p): p for p in points}.items() if k not in scores]
        # consecutive points go to one worker, which fits once for those a fitted filter can take
        # without a new fit (with_params: a sweep along such a parameter); one run of points a worker
        chunks = _chunks(todo, max(1, effective_n_jobs(n_jobs) // len(runs)))
        results = Parallel(n_jobs=n_jobs)(
            delayed(_validation_scores)(filter, [dict(zip(grid, p), **seed) for p in chunk], train, validation)
            for chunk in chunks for (train, validation), seed in runs)
        # results[c * len(runs) + r][j]: the j-th point of chunk c on run r
        per_point = [[results[c * len(runs) + r][j] for r in range(len(runs))]
                     for c, chunk in enumerate(chunks) for j in range(len(chunk))]
        for p, mine in zip(todo, per_point):
            key = _key(p)
            scores[key] = float(np.mean([mse for mse, _, _ in mine]))
            evaluated[key] = p
            consistency[key] = [c for _, _, c in mine]
            message = next((m for _, m, _ in mine if m is not None), None)
            if message is not None:
                failures[key] = message
        bar.update(len(todo) * len(runs))

    def coordinate_search(current):
        for _ in range(5):
            before = list(current)
            # the bar's total: what is done, plus at most every new point of this sweep
            bar.total = (len(scores) + 1 + sum(len(v) - 1 for v in grid.values())) * len(runs)
            for i, name in enumerate(names):
                candidates = [tuple(current[:i] + [v] + current[i + 1:]) for v in grid[name]]
                evaluate(candidates)
                current = list(min(candidates, key=lambda p: scores[_key(p)]))
            if _key(current) == _key(before):
                break

    added, counts = {}, Counter()
    current = [valid[n] if any(as_hashable(v) == as_hashable(valid[n]) for v in grid[n]) else grid[n][len(grid[n]) // 2]
               for n in names]
    while True:
        if search == "grid":
            bar.total = int(np.prod([len(v) for v in grid.values()])) * len(runs)
            evaluate(list(itertools.product(*grid.values())))
        else:
            coordinate_search(current)
        best = min(scores, key=lambda k: scores[k])
        if not np.isfinite(scores[best]) or not _extend_edges(grid, dict(zip(names, evaluated[best])), added, counts,
                                                               max_extensions):
            break
        current = list(evaluated[best])
    bar.close()
    if failures:
        first = next(iter(failures))
        cause = f"the first, {dict(zip(names, evaluated[first]))}, raised {failures[first]}"
        if not np.isfinite(scores[best]):
            alike = set(failures.values())
            # each failure is "Error: argument: what was expected"; the argument the refusal names
            message = next(iter(alike))
            named = message.split(": ", 2)[1] if message.count(": ") >= 2 else None
            if len(failures) == len(scores) and len(alike) == 1 and named not in names:
                # one refusal of something outside the grid: the grid cannot help; the template must change,
                # or the data when the refusal names them
                argument = named if named in ("states", "observations", "controls") else "filter"
                raise ValueError(f"{argument}: every setting of the grid failed alike, fitted on the training steps "
                                 f"before the validation block: {message}")
            raise ValueError(f"param_grid: every evaluated setting failed on the validation data; {cause}")
        warn_user(f"tune_filter: {len(failures)} of {len(scores)} settings failed and were skipped; {cause}",
                  NumericalWarning)
    best_params = dict(zip(names, evaluated[best]))
    _edge_warnings(grid, best_params, added, max_extensions,
                   lambda params: scores.get(_key(tuple(params[n] for n in names))))
    calibrated = {}
    if calibrate and "covariance_scale" in valid:
        calibrated["covariance_scale"] = _calibrated_scale(filter, consistency[best], states)
    start = time.perf_counter()
    tuned = clone(filter).set_params(**best_params, **calibrated)
    with quiet_progress(not progress):
        tuned = fitted_on_run(tuned, states, observations, controls)
    tuned.refit_time_ = time.perf_counter() - start
    tuned.best_params_ = best_params
    tuned.search_table_ = [dict(zip(names, evaluated[k]), mse=m) for k, m in scores.items()]
    tuned.param_grid_ = dict(grid)
    tuned.extended_params_ = {name: tuple(values) for name, values in added.items()}
    tuned.validation_nees_ = (float(np.mean(consistency[best])) if None not in consistency[best] else None)
    return tuned


# Bayesian kernel learning lives in kbfilter.bandwidth_learning; these names were re-exported here.
_MOVED = ("bayesian_bandwidth", "log_pseudolikelihood", "BandwidthFit", "posterior_embedding", "EmbeddingPosterior")


def __getattr__(name):
    if name in _MOVED:
        from . import bandwidth_learning

        warn_user(f"kbfilter.tuning.{name} is deprecated and will be removed; use "
                  f"kbfilter.bandwidth_learning.{name}", FutureWarning)
        return getattr(bandwidth_learning, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
