"""One validation layer for the public boundary.

Every public entry point converts and checks its inputs here, so that a bad argument is
reported once, with the argument's name and what was expected, before any numerics run.
"""

import math
import os
from collections.abc import Iterable
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def _as_float(X, name, what):
    if X is None:  # numpy would read it as NaN, and the message would be about a shape () or a NaN
        raise ValueError(f"{name}: expected {what}, got None")
    if sp.issparse(X):
        raise ValueError(f"{name}: sparse input is not supported; expected a dense array (call .toarray())")
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected {what} ({exc})") from exc
    if arr.dtype == object:
        if any(v is None for v in arr.flat):
            raise ValueError(f"{name}: expected {what}, got None among the values")
        # pandas' missing value (pd.NA, in its nullable columns) is a NaN: the checks that follow
        # then say where the first one is and how to mend the input, as for a NaN
        missing = [i for i, v in enumerate(arr.flat) if type(v).__name__ == "NAType"]
        if missing:
            arr = arr.copy()
            arr.flat[missing] = np.nan
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: Complex data not supported; expected real numbers")
    try:
        return arr.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected {what} ({exc})") from exc


class NonFiniteError(ValueError):
    """An input holds a NaN or an infinity (a ``ValueError``; a caller that knows what the input
    is may add how to mend it)."""


def non_finite_error(name, unit, index, values):
    """The ``ValueError`` for a NaN or an infinity first met in ``values``, the ``unit`` (row,
    sample, entry) ``index`` of ``name``: one message for a log in memory and one in dask arrays."""
    values = np.atleast_1d(values)
    return NonFiniteError(f"{name}: contains NaN or infinite values (the first at {unit} {index}: "
                          f"{float(values[~np.isfinite(values)][0])})")


def _refuse_non_finite(arr, name, unit):
    """Refuse an array holding a NaN or an infinity, naming the first ``unit`` (row, sample,
    entry) that does: in a log of a million rows, where to look is half the answer."""
    if np.all(np.isfinite(arr)):
        return
    first = int(np.argmin(np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)))
    raise non_finite_error(name, unit, first, arr[first])


def check_matrix(X, name, *, n_features=None, min_samples=1, allow_1d=True, finite=True):
    """Return ``X`` as a float64 array of shape (n_samples, n_features), finite when ``finite``.

    A 1-D array is read as ``n`` one-dimensional points when ``allow_1d`` is true.
    """
    arr = _as_float(X, name, "a numeric array")
    if arr.ndim == 1 and allow_1d:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_samples:
        raise ValueError(f"{name}: expected at least {min_samples} samples, got n_samples={arr.shape[0]}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name}: expected at least one feature, got 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name}: expected {n_features} columns (features per sample), got {arr.shape[1]}")
    if finite:
        _refuse_non_finite(arr, name, "row")
    # in rows, whatever the layout given (a DataFrame's values are in columns, a slice may be
    # strided): BLAS rounds a product by layout, and the same numbers must give the same results
    return np.ascontiguousarray(arr)


def check_array(X, name, what="a numeric array"):
    """Return ``X`` as a float64 ndarray of any shape; its shape and values are the caller's to check."""
    return _as_float(X, name, what)


def check_real_output(values, name, what, complex_ok=False):
    """What a user's callable returned, as a float64 array of its own shape (the caller checks the
    shape): refused, naming the callable, unless its values are real numbers (or, with
    ``complex_ok``, complex ones, as complex128). ``numpy`` would drop an imaginary part with only
    a warning, read numeric text as numbers, or fail on ragged rows without saying whose output it
    was."""
    kind = "real or complex" if complex_ok else "real"
    try:
        values = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected an array of {kind} {what} ({exc})") from exc
    if values.dtype.kind not in ("biufc" if complex_ok else "biuf"):
        raise ValueError(f"{name}: expected {kind} {what}, got an array of dtype {values.dtype}")
    return values.astype(np.complex128 if values.dtype.kind == "c" else np.float64, copy=False)


def check_transformer(value, name, others="None"):
    """``value`` when it is ``others`` (its caller's to test first) or a scikit-learn transformer:
    callable ``fit`` and ``transform``, and ``get_params``, without which scikit-learn's ``clone``
    (a map is cloned, never fitted in place) fails with a ``TypeError`` that does not say which
    argument; refused, naming ``name``, before any work otherwise."""
    if value is None:
        return value
    missing = [m for m in ("fit", "transform", "get_params") if not callable(getattr(value, m, None))]
    if missing:
        raise ValueError(f"{name}: expected {others} or a scikit-learn transformer (fit, transform and get_params, as "
                         f"sklearn.base.BaseEstimator gives them), got {type(value).__name__}"
                         + (f" (it has no {' and no '.join(missing)})" if len(missing) < 3 else ""))
    return value


def check_feature_rows(mapped, n, name="features"):
    """A feature map's output on ``n`` observations as a float array: one finite real row per
    observation (a map that drops rows, flattens or overflows is named, not met later as a
    kernel's error about its ``X`` or as NaN weights)."""
    mapped = check_real_output(mapped.toarray() if hasattr(mapped, "toarray") else mapped,
                               f"{name}: the feature map", "features")
    if mapped.ndim != 2 or mapped.shape[0] != n:
        raise ValueError(f"{name}: expected the feature map to give one row per observation, shape ({n}, "
                         f"n_features), got shape {mapped.shape}")
    if not np.all(np.isfinite(mapped)):
        raise ValueError(f"{name}: the feature map gave NaN or infinite values on the observations")
    return mapped


def check_square(A, name, what="matrix"):
    """Return ``A`` as a float64 array of shape (n, n); its values are the caller's to check."""
    A = _as_float(A, name, "a numeric array")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name}: expected a square {what}, got shape {A.shape}")
    return A


def check_state_samples(X, name, dim):
    """Samples of a ``dim``-dimensional state as an (n, dim) float64 array: an (n, dim) array, or
    one state of shape (dim,) as one sample (for ``dim == 1`` a 1-D array is ``n`` samples of the
    scalar state, as :func:`check_matrix` reads it)."""
    arr = _as_float(X, name, "a numeric array")
    if arr.ndim == 1 and dim > 1:
        if arr.shape[0] != dim:
            raise ValueError(f"{name}: expected samples of the state, an (n, {dim}) array, or one state of length "
                             f"{dim}; got shape {arr.shape}")
        arr = arr[None, :]
    return check_matrix(arr, name, n_features=dim)


def ndim_or_none(value):
    """``np.ndim(value)``, or None for a nesting numpy cannot make an array of (ragged lists): a
    shape test before the checks must not raise numpy's message, which names no argument."""
    try:
        return np.ndim(value)
    except ValueError:
        return None


def check_saved_matrix(X, name, **kwargs):
    """A fitted array read from a file: a float64 ndarray, as ``fit`` stores it (no conversion may
    hide another dtype), then checked as :func:`check_matrix` checks it (``kwargs``), and within the
    bound ``fit`` holds training values to (whatever fit derives from them stays inside it too)."""
    if not (isinstance(X, np.ndarray) and X.dtype == np.float64):
        raise ValueError(f"{name}: expected a float64 array")
    return check_within_magnitude(check_matrix(X, name, **kwargs), name)


def check_saved_vector(v, name, *, length=None):
    """A fitted vector read from a file: a float64 1-D ndarray (of ``length`` when given), finite
    and within the training bound (see :func:`check_saved_matrix`)."""
    if not (isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 1):
        raise ValueError(f"{name}: expected a float64 vector")
    return check_within_magnitude(check_vector(v, name, length=length), name)


def check_saved_values(values, name):
    """Fitted values of any shape read from a file: a float64 ndarray, finite and within the
    training bound (see :func:`check_saved_matrix`)."""
    if not (isinstance(values, np.ndarray) and values.dtype == np.float64):
        raise ValueError(f"{name}: expected a float64 array")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return check_within_magnitude(values, name)


def check_samples(X, name, *, sample_shape=None, min_samples=1, finite=True):
    """Return samples of any shape (n, ...) flattened to (n, d), with the shape of one sample.

    Vectors (n, d) stay as they are, a 1-D array is ``n`` scalars, images (n, h, w[, c]) are
    flattened; ``sample_shape`` (e.g. the training images' shape) is checked when given. Finite
    when ``finite``.
    """
    arr = _as_float(X, name, "a numeric array")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim < 2 or arr.shape[0] < min_samples:
        raise ValueError(f"{name}: expected at least {min_samples} samples in an array (n_samples, ...), "
                         f"got shape {arr.shape}")
    if sample_shape is not None and arr.shape[1:] != tuple(sample_shape):
        raise ValueError(f"{name}: expected samples of shape {tuple(sample_shape)}, got {arr.shape[1:]}")
    if finite:
        _refuse_non_finite(arr, name, "sample")
    return arr.reshape(arr.shape[0], -1), arr.shape[1:]


def check_vector(v, name, *, length=None):
    """Return ``v`` as a finite float64 1-D array, optionally of a given length."""
    arr = _as_float(v, name, "a numeric 1-D array")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name}: expected length {length}, got {arr.shape[0]}")
    _refuse_non_finite(arr, name, "entry")
    return arr


def check_indices(values, name, upper=None, *, length=None, distinct=False, increasing=False):
    """``values`` as a 1-D integer array of indices in ``[0, upper)`` (``length`` of them, all
    different with ``distinct``, in strictly increasing order with ``increasing``; no upper bound
    when ``upper`` is None): a negative index would count from the end, silently."""
    idx = np.asarray(values)
    if idx.ndim != 1 or (length is not None and idx.shape[0] != length) or (idx.size and idx.dtype.kind not in "iu"):
        count = "" if length is None else f"{length} "
        raise ValueError(f"{name}: expected {count}integer indices (a 1-D array), got an array of shape {idx.shape} "
                         f"and dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or (upper is not None and idx.max() >= upper)):
        bounds = "non-negative indices" if upper is None else f"indices in [0, {upper})"
        raise ValueError(f"{name}: expected {bounds}, got values from {idx.min()} to {idx.max()}")
    if increasing and np.any(np.diff(idx) <= 0):
        raise ValueError(f"{name}: expected indices in increasing order, each once")
    if distinct and np.unique(idx).size != idx.size:
        raise ValueError(f"{name}: expected distinct indices")
    return idx


def check_step_control(u, dim_u, name="u"):
    """One step's control as a finite float64 array of shape ``(dim_u,)``; a number is taken for a
    one-dimensional control, as ``fit`` takes a run of them as a 1-D array (shape (T,))."""
    arr = _as_float(u, name, "a numeric 1-D array")
    if arr.ndim == 0 and dim_u == 1:
        arr = arr.reshape(1)
    if arr.shape != (dim_u,):
        raise ValueError(f"{name}: expected a control of shape ({dim_u},), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def check_same_length(name_a, a, name_b, b):
    if len(a) != len(b):
        raise ValueError(
            f"{name_a} and {name_b}: expected the same number of samples, got {len(a)} and {len(b)}"
        )


#: how far from symmetric positive semi-definite a covariance may be, relative to its largest entry
COVARIANCE_RTOL = 1e-8


def check_symmetric(A, name, what):
    """Refuse a square ``A`` (a covariance, a Gram matrix: ``what``) further from symmetric than
    ``COVARIANCE_RTOL`` of its largest entry; return that tolerance, for
    :func:`check_semidefinite`."""
    tol = COVARIANCE_RTOL * max(1.0, float(np.max(np.abs(A))))
    asymmetry = float(np.max(np.abs(A - A.T)))
    if asymmetry > tol:
        raise ValueError(f"{name}: expected a symmetric {what}; it differs from its transpose by {asymmetry:.3g}")
    return tol


def check_semidefinite(smallest, tol, name, what):
    """Refuse a symmetric matrix (``what``) whose ``smallest`` eigenvalue is below ``-tol`` (from
    :func:`check_symmetric`); the caller computes the eigenvalue, as it needs them or not."""
    if smallest < -tol:
        raise ValueError(f"{name}: expected a positive semi-definite {what}; its smallest eigenvalue is "
                         f"{smallest:.3g}")


def check_covariance(value, name, dim, *, definite=False):
    """A covariance given at the boundary: square, symmetric and positive semi-definite within
    ``COVARIANCE_RTOL`` of its largest entry (returned symmetrised), else a ``ValueError``;
    ``definite=True`` asks for a positive definite one (its Cholesky factor exists)."""
    A = _as_float(value, name, "a numeric array")
    if A.shape != (dim, dim):
        # filterpy reads a number as that variance times the identity; here it is said, not guessed
        hint = f" (a variance v on every coordinate is v * np.eye({dim}))" if A.ndim == 0 else ""
        raise ValueError(f"{name}: expected a covariance of shape ({dim}, {dim}), got shape {A.shape}{hint}")
    _refuse_non_finite(A, name, "row")
    tol = check_symmetric(A, name, "covariance matrix")
    A = 0.5 * (A + A.T)
    if definite:
        try:
            np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            raise ValueError(f"{name}: expected a positive definite covariance") from None
        return A
    check_semidefinite(float(np.linalg.eigvalsh(A)[0]), tol, name, "covariance matrix")
    return A


def check_positive(value, name, *, allow_zero=False, maximum=None):
    """Return ``value`` as a float, rejecting non-numbers, NaN, non-positive values and values
    above ``maximum`` (if given)."""
    expected = "a non-negative" if allow_zero else "a positive"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name}: expected {expected} number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}: expected {expected} finite number, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: expected {expected} number at most {maximum:g}, got {value!r}")
    return value


def check_real(value, name, *, maximum=None):
    """Return ``value`` as a float, rejecting non-numbers, NaN, infinities and (if given)
    values larger than ``maximum`` in size."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if maximum is not None and abs(value) > maximum:
        raise ValueError(f"{name}: expected a number at most {maximum:g} in size, got {value!r}")
    return value


def check_values(values, name, what="values"):
    """Return ``values`` as a tuple: a non-empty list (not a string, which is iterable, but "0.5"
    would be tried as "0", ".", "5") of distinct candidates (a repeat is a typo for another value,
    and would be tried twice); ``what`` says what its entries are, for the message."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name}: expected a list of {what}, got {values!r}")
    values = tuple(values)
    if not values:
        raise ValueError(f"{name}: expected a list of {what}, got an empty one")
    seen = set()
    for value in values:
        key = as_hashable(value)
        if key in seen:
            raise ValueError(f"{name}: expected distinct {what}, got {value!r} twice")
        seen.add(key)
    return values


def as_hashable(value):
    """A hashable stand-in for a candidate value, equal for values that are the same candidate:
    numbers and strings as they are, lists and arrays by their contents (``inputs=[2, 3]`` is a
    list), other unhashable objects (and estimators, hashed by identity) only to themselves."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(as_hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return value


def check_positive_values(values, name):
    """Return ``values`` as a tuple of floats: a non-empty list of positive finite numbers."""
    return tuple(check_positive(v, name) for v in check_values(values, name, "positive numbers"))


def check_model_scale(value, name):
    """A positive constant of a model (a noise level, a speed, a step, an extent): it is squared
    into covariances or sets the size of the states, so it is bounded as training values are, and
    below by the inverse of that bound, as a covariance is inverted into a precision."""
    value = check_positive(value, name, maximum=MAX_TRAINING_MAGNITUDE)
    if value < 1 / MAX_TRAINING_MAGNITUDE:
        raise ValueError(f"{name}: expected a positive number at least {1 / MAX_TRAINING_MAGNITUDE:g} (squared into a "
                         f"covariance and inverted, a smaller one overflows the likelihoods), got {value!r}")
    return value


def check_fraction(value, name, *, below_one=False, what=""):
    """Return ``value`` as a float in (0, 1] (in (0, 1) with ``below_one``: a probability for which
    certainty means nothing), rejecting anything else with a message naming ``name``; ``what``
    ends the range's description (e.g. " or None")."""
    value = check_positive(value, name)
    if value > 1 or (below_one and value == 1):
        expected = "a probability in (0, 1)" if below_one else "a fraction in (0, 1]"
        raise ValueError(f"{name}: expected {expected}{what}, got {value!r}")
    return value


def check_int(value, name, *, minimum=1, maximum=None):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: expected an integer <= {maximum}, got {value}")
    return value


def check_bool(value, name):
    """``value`` as a bool: True or False (numpy's included); anything else, even a truthy string
    such as ``"no"``, is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_choice(value, name, choices):
    if value not in choices:
        raise ValueError(f"{name}: expected one of {sorted(choices)}, got {value!r}")
    return value


def check_path(path, name="path"):
    """``path`` (a str or path-like file name) as a ``pathlib.Path``. An int would be taken by
    ``open`` as a file descriptor (0 is standard input, which the read would then close), and a
    file object cannot be written beside and moved over as a save is; both are refused, as is an
    empty name."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name}: expected a file name (a str or path-like), got {type(path).__name__}")
    if not os.fspath(path):
        raise ValueError(f"{name}: expected a file name, got an empty one")
    return Path(path)


def check_rng(rng, name="random_state"):
    """Normalise ``rng`` (None, int, SeedSequence or Generator) to a Generator: every random
    choice in kbfilter draws from one, so the same seed gives the same numbers. Anything else is a
    ``ValueError`` naming ``name``."""
    seed_like = isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0
    if not (rng is None or seed_like or isinstance(rng, (np.random.Generator, np.random.SeedSequence,
                                                              np.random.BitGenerator))):
        raise ValueError(f"{name}: expected None, a non-negative int, a SeedSequence or a numpy Generator, got {rng!r}")
    return np.random.default_rng(rng)


def check_n_jobs(n_jobs):
    """Check joblib's ``n_jobs`` before any work: None, a positive number of workers, or negative
    (``-1``: all cores); 0 is refused with a ``ValueError``."""
    if n_jobs is not None and (check_int(n_jobs, "n_jobs", minimum=-2**31) == 0):
        raise ValueError("n_jobs: expected a positive number of workers, or -1 for all cores, got 0")
    return n_jobs


def as_steps(values, name="zs"):
    """A run of observations or controls as a list, one item a step.

    One array-like (a numpy array, a pandas DataFrame, a dask array) is a run of its rows: a
    DataFrame iterates over its column labels, so it is converted first. Anything else (a list, a
    generator) is taken item by item, so that ``None`` can mark a missing observation. A string
    or a single number is no run (a string would be one step a character).
    """
    if isinstance(values, (str, bytes)) or not (isinstance(values, Iterable) or hasattr(values, "__array__")):
        raise ValueError(f"{name}: expected a run, one item a step (a list or an array of rows), got "
                         f"{type(values).__name__}")
    if isinstance(values, (list, tuple)) or not hasattr(values, "__array__"):
        return list(values)
    arr = np.asarray(values)
    if arr.ndim == 0:
        raise ValueError(f"{name}: expected a run, one item a step (a list or an array of rows), got a single value")
    return list(arr)


#: how a run marks a missing measurement, for the error on a NaN one (a run read from a table
#: arrives as an array, where None cannot stand)
MISSING_IN_RUN = ("a missing measurement is None: for a run held as an array, pass "
                  "[None if np.isnan(z).any() else z for z in zs]")


def check_observation(z, sample_shape, name="z", missing="pass None for a missing measurement"):
    """Return one observation as a finite float64 1-D array (flattened).

    ``z`` may have the training observations' shape ``sample_shape`` (e.g. an image) or be
    already flattened. A missing measurement is ``None`` and is not this function's business;
    ``missing`` is what the error on a NaN one says to do instead.
    """
    z = _as_float(z, name, "a numeric array")
    shape = tuple(sample_shape)
    size = math.prod(shape)  # (numpy's prod costs more than the rest of this check on a small vector)
    if z.ndim == 0 and size == 1:  # a scalar observation, as fit took them (shape (T,))
        z = z.reshape(1)
    if z.shape != shape and z.shape != (size,):
        expected = f"shape {shape} (or {size} values flattened)" if len(shape) > 1 else f"length {size}"
        raise ValueError(f"{name}: expected {expected}, got shape {z.shape}")
    if not np.isfinite(z).all():
        raise ValueError(f"{name}: contains NaN or infinite values; {missing}")
    return z.reshape(size)


#: training states and observations must lie within +-MAX_TRAINING_MAGNITUDE
MAX_TRAINING_MAGNITUDE = 1e100


def check_training_magnitude(largest, name):
    """Refuse training values beyond the bound, by name: they are squared and summed (covariances,
    kernel distances, column spreads), and past about 1e154 their squares overflow. ``largest`` is
    the largest absolute value (computed wherever the data are: here, or on dask workers)."""
    if largest > MAX_TRAINING_MAGNITUDE:
        raise ValueError(f"{name}: holds values up to {largest:.3g} in size; training values must lie within "
                         f"+-{MAX_TRAINING_MAGNITUDE:g} (their squares must not overflow): express them in other units")


def check_within_magnitude(arr, name):
    """``arr`` (a float array), after :func:`check_training_magnitude` of its largest entry."""
    # the largest and the smallest rather than the largest absolute value: no copy of the array
    # (a log of images is gigabytes), and a quarter of the time
    check_training_magnitude(max(float(arr.max()), -float(arr.min())) if arr.size else 0.0, name)
    return arr


def several_sequences(states):
    """Whether ``states`` is a list of state sequences rather than one sequence given as a list."""
    if not isinstance(states, (list, tuple)) or not states:
        return isinstance(states, (list, tuple))
    try:
        return all(isinstance(x, np.ndarray) or np.ndim(x) >= 2 for x in states)
    except ValueError:  # ragged nesting: sequences of different lengths
        return True


def _refuse_rows(seqs, name="states"):
    """Refuse a list read as several sequences that is the rows of one log: more one-dimensional
    arrays of one length than that length, as a loop appending each step's state makes. Several
    sequences of scalar states are few and long; given as columns (shape (T, 1)) they pass."""
    if len(seqs) < 2 or not all(isinstance(x, np.ndarray) and x.ndim == 1 for x in seqs):
        return
    lengths = {x.shape[0] for x in seqs}
    length = lengths.pop()
    if not lengths and len(seqs) > length:
        raise ValueError(f"{name}: a list of {len(seqs)} one-dimensional arrays of length {length} reads as "
                         f"{len(seqs)} sequences of {length} scalar states each, which looks like the rows of one "
                         f"log; for one sequence of {length}-dimensional states pass np.array({name}) (shape "
                         f"({len(seqs)}, {length})); for several sequences of scalar states give each as a column "
                         f"(shape (T, 1))")


def check_state_sequences(states):
    """Normalise ``states`` alone (trajectories with no observations) to a list of per-sequence
    arrays, by the rule :func:`check_sequences` follows: one array or list of numbers is one
    sequence, a list of arrays (or of nested lists) is several.

    Returns
    -------
    xs : list of ndarray
    """
    seqs = list(states) if several_sequences(states) else [states]
    _refuse_rows(seqs)
    if not seqs:
        raise ValueError("states: expected at least one sequence")
    xs = []
    for i, x in enumerate(seqs):
        name = f"states[{i}]" if len(seqs) > 1 else "states"
        n_features = xs[0].shape[1] if xs else None
        x = _steps_checked(x, name, len(seqs) > 1, n_features)
        xs.append(check_within_magnitude(x, name))
    return xs


def _steps_checked(states, name, several, n_features):
    """One state sequence of a training log (see :func:`check_matrix`): two steps at least, the
    fewest that make a transition. Of several, a shorter one is most often a piece of a log cut
    at its gaps, so the refusal says what to do with it."""
    n = len(states) if hasattr(states, "__len__") else None
    if n is not None and n < 2:
        hint = "; leave out a piece of a log shorter than that (a step between two gaps, say)" if several else ""
        raise ValueError(f"{name}: expected at least 2 samples (two steps make a transition), got n_samples={n}{hint}")
    return _log_checked(check_matrix, states, name, min_samples=2, n_features=n_features)


def _log_checked(check, values, *args, **kwargs):
    """``check(values, *args, **kwargs)`` on one sequence of a training log: a NaN or an infinity
    there is most often a gap in the recording, so the refusal says how to mend it."""
    try:
        return check(values, *args, **kwargs)
    except NonFiniteError as exc:
        # dropping the gap's rows would learn one step from the two around it
        raise NonFiniteError(f"{exc}; for a gap in the log, cut it there and pass the pieces as lists of "
                             f"sequences, as kbfilter.datasets.cut_at_gaps does (dropping the rows would join the "
                             f"steps on either side)") from None


def check_sequences(states, observations):
    """Normalise ``(states, observations)`` to two equally long lists of per-sequence arrays.

    One sequence is given as two arrays (T, dim_x), (T, ...); several as two lists of arrays. A
    list of numbers or of lists of numbers (``X.tolist()``) is one sequence, not a list of
    sequences: only a list whose items are arrays (or nested lists of two or more levels, for the
    states) is several. More 1-D arrays of one length than that length are the rows of one log
    appended one by one, and are refused with the fix (:func:`_refuse_rows`).
    Observations may be vectors or images; they are returned flattened to (T, dim_z), and the
    shape of one observation is returned too.

    Returns
    -------
    xs, zs : list of ndarray
    sample_shape : tuple of int
    """
    if not several_sequences(states):
        if isinstance(observations, (list, tuple)) and observations and isinstance(observations[0], np.ndarray) \
                and not isinstance(states, (list, tuple)):
            raise ValueError("states and observations: expected both arrays (one sequence) or both lists of arrays")
        states, observations = [states], [observations]
    elif not isinstance(observations, (list, tuple)):
        raise ValueError("states and observations: expected both arrays (one sequence) or both lists of arrays")
    else:
        _refuse_rows(states)
    if len(states) != len(observations) or not states:
        raise ValueError(f"states and observations: expected the same number of sequences (at least one), "
                         f"got {len(states)} and {len(observations)}")
    xs, zs, shape = [], [], None
    for i, (x, z) in enumerate(zip(states, observations)):
        suffix = f"[{i}]" if len(states) > 1 else ""
        x = _steps_checked(x, f"states{suffix}", len(states) > 1, xs[0].shape[1] if xs else None)
        z, shape = _log_checked(check_samples, z, f"observations{suffix}", min_samples=2, sample_shape=shape)
        check_same_length(f"states{suffix}", x, f"observations{suffix}", z)
        check_within_magnitude(x, f"states{suffix}")
        check_within_magnitude(z, f"observations{suffix}")
        xs.append(x)
        zs.append(z)
    return xs, zs, shape


def check_controls(controls, xs):
    """Normalise ``controls`` to one (T_i, dim_u) array per state sequence ``xs[i]``.

    Parameters
    ----------
    controls : array-like of shape (T, dim_u), or a list of such arrays
        One control per state, as the states are given (one array or a list of arrays).
    xs : list of ndarray
        The state sequences (from :func:`check_sequences`).

    Returns
    -------
    list of ndarray
        The controls, sequence by sequence.
    """
    if not isinstance(controls, (list, tuple)):
        controls = [controls]
    if len(controls) != len(xs):
        raise ValueError(f"controls: expected one control sequence per state sequence ({len(xs)}), "
                         f"got {len(controls)}")
    us = []
    for i, (u, x) in enumerate(zip(controls, xs)):
        name = f"controls[{i}]" if len(xs) > 1 else "controls"
        u = check_matrix(u, name, n_features=us[0].shape[1] if us else None)
        check_same_length(f"states[{i}]" if len(xs) > 1 else "states", x, name, u)
        us.append(u)
    return us


def machine_memory():
    """The machine's physical memory in bytes, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError, TypeError):
        return None


def check_memory(need, name, what, advice=None):
    """Refuse, before it is allocated, what would not fit in the machine's physical memory.

    Linux hands out memory it does not have and kills the process (or another one) when the pages
    are touched, so a ``MemoryError`` never comes; this is the check that does. Nothing is
    checked where the platform does not say how much memory it has.

    Parameters
    ----------
    need : float
        The bytes the work would hold at its peak.
    name : str
        The argument that sets the size, for the message.
    what : str
        What needs the memory, e.g. ``"1,000,000 random features of 2-dimensional points"``.
    advice : str, optional
        What to do instead, appended to the message.
    """
    have = machine_memory()
    if have is not None and need > have:
        raise ValueError(f"{name}: {what} would take about {need / 2**30:.3g} GB, more than this machine's memory "
                         f"({have / 2**30:.3g} GB)" + ("" if advice is None else f"; {advice}"))


def check_square_memory(n, arrays, name, what, advice=None):
    """:func:`check_memory` for work holding ``arrays`` ``n x n`` float64 arrays at its peak;
    ``what`` says what, on how many (the message adds the arrays)."""
    check_memory(8.0 * arrays * n * n, name, f"{what} (about {arrays} {n:,} x {n:,} arrays)", advice)
