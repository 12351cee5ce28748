"""The filter contract: what every filter object provides, and what they share (filterpy's attribute
names, ``batch_filter``, the fallback counts)."""

import copy
import inspect
from collections import Counter

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._validation import MISSING_IN_RUN, as_steps, check_int, check_matrix, check_memory, check_observation, \
    check_real_output, check_sequences, check_step_control, check_vector
from .._warnings import ignored, warn_user
from ..linalg import NumericalWarning
from ..threads import limited_blas


def check_motion(motion, name="motion"):
    """Check a motion model: a system (``sample_transition``) or a callable ``f(X, u, rng)``.

    Parameters
    ----------
    motion : System or callable
        The sampler.
    name : str, default="motion"
        The argument's name, for the error message.

    Returns
    -------
    System or callable
        ``motion`` itself.
    """
    if not (callable(getattr(motion, "sample_transition", None)) or callable(motion)):
        raise ValueError(f"{name}: expected a system with sample_transition(X, rng[, u]) or a callable "
                         f"motion(X, u, rng) returning the next states, got {type(motion).__name__}")
    return motion


def motion_of(filt, warn=False):
    """A particle filter's motion model: its ``motion``, or what it was given under the deprecated
    name ``transition`` (which means the learned transition of the kernel Bayes filter).

    Parameters
    ----------
    filt : estimator with ``motion`` and ``transition`` parameters
        The filter.
    warn : bool, default=False
        Warn (a ``FutureWarning``) when the deprecated name was used; a filter does it at fit.

    Returns
    -------
    System or callable or None
        The motion model (None when the filter was given none).
    """
    if filt.transition is None:
        return filt.motion
    if filt.motion is not None:
        raise ValueError("motion: given twice, as motion and as the deprecated transition; pass motion only")
    if not (callable(getattr(filt.transition, "sample_transition", None)) or callable(filt.transition)):
        # named as given: transition="knn" reads as the kernel Bayes filter's learned transition
        raise ValueError(f"transition: the deprecated name of motion, which takes a motion model (a system with "
                         f"sample_transition or a callable), got {filt.transition!r:.60}; a learned transition "
                         f"('exact', 'knn') is KernelBayesFilter's")
    if warn:
        warn_user(f"{type(filt).__name__}(transition=...) is deprecated and will be removed; pass the motion model "
                  f"as motion=... (or first)", FutureWarning)
    return filt.transition


def transition_events(counts):
    """Fallbacks a transition's fit took, as a filter's ``diagnostics`` names them.

    Parameters
    ----------
    counts : mapping of str to int
        The fallbacks by kind (a conditional embedding's ``diagnostics_``).

    Returns
    -------
    collections.Counter
        The same counts, each kind named ``transition_<kind>``.
    """
    return Counter({f"transition_{kind}": count for kind, count in counts.items()})


def system_control(system, u):
    """The control ``u`` for one step of ``system``, checked before any work.

    A system without controls (no ``dim_u``) refuses one; a controlled system needs one, finite and
    of shape ``(dim_u,)`` (a number for a one-dimensional control), as ``batch_filter`` needs one a
    step: a model written without a check of its own would fail on None with whatever its
    arithmetic raised.

    Parameters
    ----------
    system : System
        The system the control drives.
    u : array-like or None
        The control.

    Returns
    -------
    ndarray of shape (dim_u,) or None
        The control as a float array, or None for a system without controls.
    """
    dim_u = getattr(system, "dim_u", None)
    if dim_u is None:
        if u is not None:
            raise ValueError(f"u: {type(system).__name__} takes no control input; expected None")
        return None
    if u is None:
        raise ValueError(f"u: {type(system).__name__}'s motion needs a control of shape ({dim_u},) at every step; "
                         f"got None")
    return check_step_control(u, dim_u)


def check_model_states(model, X, name, observe=False):
    """Training states must have the columns of the states ``model`` works on: its ``dim_x``
    when it declares one (a system), and, with ``observe``, the columns its ``observe_mean`` reads
    (a sensor), found by observing the first state.

    Parameters
    ----------
    model : System, sensor, callable or None
        The model given to the filter (a callable motion, or None, declares nothing).
    X : ndarray of shape (n, d)
        The checked training states.
    name : str
        The model's argument name, for the error message.
    observe : bool, default=False
        Also observe the first state with the model's ``observe_mean``, when it has one.
    """
    dim_x = getattr(model, "dim_x", None)
    if isinstance(dim_x, (int, np.integer)) and not isinstance(dim_x, bool) and X.shape[1] != dim_x:
        raise ValueError(f"states: expected {dim_x} columns, the states of the {name} ({type(model).__name__}, "
                         f"dim_x={dim_x}), got {X.shape[1]}")
    observe_mean = getattr(model, "observe_mean", None) if observe else None
    if callable(observe_mean):
        try:
            observe_mean(X[:1])
        except (ValueError, IndexError) as error:
            raise ValueError(f"states: the {name} ({type(model).__name__}) cannot observe states of {X.shape[1]} "
                             f"columns: {error}") from None


def motion_control_dimension(motion):
    """The dimension of the control ``motion`` takes (0: none), as :func:`sample_next` calls it, or
    None for a callable, whose controls only it knows.

    Parameters
    ----------
    motion : System or callable
        A motion model :func:`check_motion` accepts.

    Returns
    -------
    int or None
        The system's ``dim_u``, 0 for a system without controls, None for a callable.
    """
    if not callable(getattr(motion, "sample_transition", None)):
        return None
    return getattr(motion, "dim_u", None) or 0


def sample_next(motion, X, u, rng, name="motion"):
    """Draw the next state of each row of ``X`` from a sampler :func:`check_motion` accepts.

    A system without controls (no ``dim_u``) is called as ``sample_transition(X, rng)`` and
    refuses a control; a controlled system as ``sample_transition(X, rng, u=u)``; a callable as
    ``motion(X, u, rng)``. What comes back is checked to be finite and of ``X``'s shape.

    Parameters
    ----------
    motion : System or callable
        The sampler.
    X : ndarray of shape (n, dim_x)
        Current states.
    u : array-like or None
        The control.
    rng : numpy.random.Generator
        The random numbers.
    name : str, default="motion"
        What error messages call the sampler.

    Returns
    -------
    ndarray of shape (n, dim_x)
        The next states.
    """
    if callable(getattr(motion, "sample_transition", None)):
        u = system_control(motion, u)
        out = motion.sample_transition(X, rng) if u is None else motion.sample_transition(X, rng, u=u)
    else:
        out = motion(X, u, rng)
    out = check_real_output(out, name, "next states")
    if out.shape != X.shape or not np.all(np.isfinite(out)):
        raise ValueError(f"{name}: expected finite next states of shape {X.shape}, got "
                         f"{'non-finite values' if out.shape == X.shape else f'shape {out.shape}'}")
    return out


def probe_prediction(filt):
    """The prediction of a probe step (see :func:`probe_loaded`) of a filter with a motion model:
    ``reset()``, then one ``predict`` (a controlled motion standing still, with a zero control).

    Parameters
    ----------
    filt : LearnedFilter
        The copy being probed.
    """
    filt.reset()
    dim_u = getattr(motion_of(filt), "dim_u", None)
    filt.predict(None if dim_u is None else np.zeros(dim_u))


def check_loaded_estimates(filt, dim_x):
    """The estimates a loaded filter holds, which its next step starts from: ``x``, ``x_prior`` and
    ``x_post`` finite vectors of length ``dim_x``, ``P``, ``P_prior`` and ``P_post`` finite
    ``(dim_x, dim_x)`` matrices (a saved file is untrusted).

    Parameters
    ----------
    filt : LearnedFilter
        The loaded filter.
    dim_x : int
        The dimension of its states.
    """
    for name in ("x", "x_prior", "x_post"):
        check_vector(getattr(filt, name, None), name, length=dim_x)
    for name in ("P", "P_prior", "P_post"):
        if check_matrix(getattr(filt, name, None), name).shape != (dim_x, dim_x):
            raise ValueError(f"{name}: expected a ({dim_x}, {dim_x}) covariance")


def probe_loaded(filt, step):
    """Run one step of a filter just loaded from a file, on a copy, before anyone uses it.

    A saved file is untrusted: a value tampered deep in a model may pass every check of its own
    and fail only at the first step, with whatever error the arithmetic raises there. The probe
    makes that failure happen at load, as a ``ValueError``.

    Parameters
    ----------
    filt : LearnedFilter
        The loaded filter (not changed).
    step : callable
        ``step(copy)`` runs a step on a deep copy and returns the arrays it computed.

    Raises
    ------
    ValueError
        When the step raises anything, or computes something that is not finite.
    """
    try:
        with ignored(NumericalWarning):
            out = step(copy.deepcopy(filt))
    except ValueError:
        raise
    except Exception as exc:  # anything else a tampered model raises is the file's fault
        raise ValueError(f"the loaded filter does not run ({type(exc).__name__}: {exc})") from None
    if not all(np.all(np.isfinite(a)) for a in out):
        raise ValueError("the loaded filter does not run (its first step is not finite)")


#: an estimate farther than this fraction of the training states' range (per coordinate) outside their
#: bounding box is counted and warned about (``diagnostics["outside_training"]``): the normalised weights
#: of a learned filter may be negative, so its weighted mean can extrapolate past every training state
OUTSIDE_MARGIN = 0.1


class TrainingBox:
    """The training states' bounding box, widened by ``OUTSIDE_MARGIN`` of their range on each side.

    Parameters
    ----------
    states : ndarray of shape (n, dim_x)
        The training states.
    """

    def __init__(self, states):
        states = check_matrix(states, "states", allow_1d=False)
        low, high = states.min(axis=0), states.max(axis=0)
        # a column that never changes has no range: an estimate of it is that value up to the
        # rounding of normalised signed weights, which is not leaving the box
        margin = np.maximum(OUTSIDE_MARGIN * (high - low), 1e-9 * np.maximum(np.abs(low), np.abs(high)))
        self.low, self.high = low - margin, high + margin

    def outside(self, x):
        """Whether some coordinate of an estimate lies outside the box.

        Parameters
        ----------
        x : ndarray of shape (dim_x,)
            The estimate.

        Returns
        -------
        bool
            True when some coordinate is outside (or is NaN: inside no box).
        """
        x = self._points(x, 1)
        return not bool(np.all((x >= self.low) & (x <= self.high)))

    def count_outside(self, X):
        """How many rows of ``X`` have some coordinate outside the box.

        Parameters
        ----------
        X : ndarray of shape (n, dim_x)
            Points in the state space.

        Returns
        -------
        int
            The number of rows outside (a row with a NaN among them).
        """
        X = self._points(X, 2)
        return int(np.count_nonzero(~np.all((X >= self.low) & (X <= self.high), axis=1)))

    def _points(self, x, ndim):
        # a shape check alone (this runs every step): a point of another width would be broadcast
        x = np.asarray(x)
        if x.ndim != ndim or x.shape[-1] != self.low.shape[0]:
            expected = f"({self.low.shape[0]},)" if ndim == 1 else f"(n, {self.low.shape[0]})"
            raise ValueError(f"{'x' if ndim == 1 else 'X'}: expected shape {expected}, got {x.shape}")
        return x


#: a training state this many robust spreads from the median in some coordinate is reported as outlying
OUTLYING_SPREADS = 100.0


def outlying_states(X, reference=None):
    """How many rows of ``X`` lie more than ``OUTLYING_SPREADS`` robust spreads from the median of
    ``reference`` (default ``X``) in some coordinate.

    A coordinate's spread is 1.4826 times its median absolute deviation (the standard deviation for
    Gaussian data), or its standard deviation where that is 0; a constant coordinate is not judged.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The states to judge.
    reference : ndarray of shape (m, d), optional
        The states that define the median and the spread.

    Returns
    -------
    int
        The count.
    """
    X = check_matrix(X, "X", allow_1d=False)
    reference = X if reference is None else check_matrix(reference, "reference", n_features=X.shape[1],
                                                         allow_1d=False)
    centre = np.median(reference, axis=0)
    spread = 1.4826 * np.median(np.abs(reference - centre), axis=0)
    spread = np.where(spread > 0, spread, reference.std(axis=0))
    judged = spread > 0
    far = np.abs(X[:, judged] - centre[judged]) > OUTLYING_SPREADS * spread[judged]
    return int(np.count_nonzero(far.any(axis=1)))


def report_outlying_states(owner, X, reference=None):
    """Warn about outlying training states (:func:`outlying_states`) and count them.

    A filter whose estimate is a weighted mean of training states moves every estimate by the
    weight such a state gets, however small; a far state is most often a unit or logging error.

    Parameters
    ----------
    owner : str
        The filter's name, for the message.
    X : ndarray of shape (n, d)
        The training states to judge.
    reference : ndarray of shape (m, d), optional
        All the training states (default ``X``).

    Returns
    -------
    collections.Counter
        ``{"outlying training states": count}``, empty when there are none.
    """
    count = outlying_states(X, reference)
    if not count:
        return Counter()
    warn_user(f"{owner}: {count} training state(s) lie more than {OUTLYING_SPREADS:g} robust spreads "
              f"(1.4826 x the median absolute deviation) from the median state in some coordinate. Estimates "
              f"are weighted means of training states, so the weight such a state gets moves every "
              f"estimate: check them (a unit or logging error?) or leave them out", UserWarning)
    return Counter({"outlying training states": count})


class SharedModel:
    """A fitted model that is read-only once built, so copies of a filter share it.

    ``copy.copy`` and ``copy.deepcopy`` return the object itself: filterpy's ``Saver`` deep-copies
    a filter every step, and would otherwise copy every ``T x T`` matrix with it.
    """

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


class SharesFittedParts:
    """Mixin: a copy of the filter has a belief and a random generator of its own but shares the
    fitted parts named in ``_fitted_parts``, which are read-only once fitted.

    A tracker copies a filter for every track (and the Stone Soup adapter for every prediction of
    one), and ``forecast`` and the load probe copy it too: ``copy.deepcopy`` would otherwise copy
    the training log and its neighbour index each time.
    """

    _fitted_parts = ()

    def __deepcopy__(self, memo):
        for name in self._fitted_parts:
            part = self.__dict__.get(name)
            if part is not None:
                memo[id(part)] = part
        twin = object.__new__(type(self))
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return twin


class CountedFallbacks:
    """Mixin: the fallbacks a fitted filter takes, counted since fit and since the last reset.

    What fit counted comes from :meth:`_fit_diagnostics` (by default the fitted model's
    ``fit_diagnostics``, nothing for a filter without a model); ``_events`` starts afresh in ``reset``, and each kind is warned about
    once per reset.
    """

    def _after_load(self):
        self._events = Counter()

    def _record(self, kind, message=None):
        """Count one event of ``kind``; warn on its first with ``message`` (None: count silently)."""
        self._events[kind] += 1
        if message is not None and self._events[kind] == 1:
            warn_user(f"{type(self).__name__}: {message} (reported once until reset; see diagnostics)",
                      NumericalWarning)

    def _admitted(self, z, observation, seen=None):
        """The observation ``z`` mapped by ``observation`` (a learned observation model), or None
        when it is missing or the gate sets it aside (counted as ``"outlier"``); ``seen``, if
        given, is called with the mapped row before the gate decides."""
        if z is None:
            return None
        row = observation.space.map(z)
        if seen is not None:
            seen(row)
        if not observation.space.admits(row):
            self._record("outlier")
            return None
        return row

    def _record_all(self, info):
        """Count every kind in ``info`` (kind -> message), as :meth:`_record` does."""
        for kind, message in info.items():
            self._record(kind, message)

    @property
    def diagnostics(self):
        """Counts of every fallback taken at fit time and since the last reset (algorithms §5.4, §8),
        and of the observations an outlier gate set aside (``"outlier"``)."""
        check_is_fitted(self)
        return self._fit_diagnostics() + self._events

    def _fit_diagnostics(self):
        # a model that takes no fallback at fit records none
        return Counter(getattr(getattr(self, "model_", None), "fit_diagnostics", None) or ())


#: filterpy's estimate attributes, which exist once the filter has a belief
_ESTIMATES = frozenset({"x", "P", "x_prior", "P_prior", "x_post", "P_post"})


class _Estimate:
    """``x`` or ``P`` of a filter whose belief is not the Gaussian they describe (weights over
    training states, particles, a mixture of Gaussians): read-only. In filterpy assigning ``x``
    sets the belief; here the next step would silently start from the belief as it was, so the
    assignment is refused with the call that does set the belief."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}") from None

    def __set__(self, obj, value):
        call = obj._belief_call()
        how = f"{call} sets the belief" if call else "the belief is set by fit, reset() and the steps alone"
        raise AttributeError(f"{self.name}: {type(obj).__name__}'s estimate is computed from its belief, which "
                             f"assigning {self.name} would not change; {how}")

    def restore(self, obj, value):
        """Set the value: the filter's own steps, and loading a saved filter."""
        obj.__dict__[self.name] = value


class _NoiseElsewhere:
    """``Q`` or ``R`` of a filter that holds no such covariance: one that takes its noise from its
    system's model, or learns it. filterpy's filters take an assigned ``R``; here the assignment
    would be silently ignored, so it is refused, saying where the noise comes from."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}")

    def __set__(self, obj, value):
        raise AttributeError(f"{self.name}: {type(obj).__name__} takes its noise from {obj._noise_source}, which "
                             f"assigning {self.name} would not change")


class Filter:
    """The filter contract: a belief moved by ``predict`` and corrected by ``update``.

    Every filter in kbfilter provides

    - ``predict(u=None)``: the belief one step ahead (``u``: the control, for a controlled system);
    - ``update(z)``: the belief given the observation ``z`` (``None``: a missing measurement, and
      the posterior is the prediction);
    - ``batch_filter(zs, us=None)``: the loop over a sequence, filterpy's return convention;
    - ``forecast(k, us=None)``: the belief 1 to ``k`` steps ahead, on a copy (the belief is left
      as it was);
    - the estimate ``x``, ``P`` and its two halves ``x_prior``, ``P_prior`` (after ``predict``)
      and ``x_post``, ``P_post`` (after ``update``), filterpy's names; ``x`` is 1-D. ``x`` and
      ``P`` are read-only where the belief is not the Gaussian they describe (assigning them would
      not change it): ``initialize`` or ``reset(prior=...)`` sets the belief. Only the Kalman
      filters hold a ``Q`` and an ``R`` to assign. Read before the filter has a belief, they (and
      any fitted attribute) raise an ``AttributeError`` naming the call that gives it one: a
      ``NotFittedError`` before ``fit``, as scikit-learn's estimators do.

    A filter learned from data is a :class:`LearnedFilter`. Subclasses may override
    :meth:`_start_batch` to handle the first step differently (e.g. starting from the first
    observation).
    """

    def predict(self, u=None):  # pragma: no cover - the contract
        """Move the belief one step ahead; sets ``x_prior``, ``P_prior`` (and ``x``, ``P``).

        Parameters
        ----------
        u : array-like of shape (dim_u,), float or None, default=None
            The control, for a controlled system (a number for a one-dimensional control).
        """
        raise NotImplementedError

    def update(self, z):  # pragma: no cover - the contract
        """Correct the belief with the observation ``z``; sets ``x_post``, ``P_post`` (and ``x``, ``P``).

        Parameters
        ----------
        z : array-like or None
            The observation; None is a missing measurement (the posterior is the prediction).
        """
        raise NotImplementedError

    x = _Estimate()
    P = _Estimate()
    Q = _NoiseElsewhere()
    R = _NoiseElsewhere()
    _noise_source = "the model it learned from the training data"

    def __getattr__(self, name):
        # Python comes here when a lookup fails, and when a property's getter fails reading state the
        # filter has not got yet (the belief, the fitted model): that message would name the inner
        # attribute; say instead which call gives the filter what was asked for
        if not name.startswith("_") and (name in _ESTIMATES or hasattr(type(self), name)) and not isinstance(
                inspect.getattr_static(type(self), name, None), _NoiseElsewhere):
            self._check_ready(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _check_ready(self, name):
        """Raise an AttributeError saying which call gives the filter ``name`` when it has no
        belief yet (a filter learned from data: ``fit``); return when it has one. It runs inside
        attribute lookup, so it reads the instance's own dict alone (a property would come back)."""
        if callable(getattr(type(self), "fit", None)):
            try:
                check_is_fitted(self)
            except NotFittedError:
                raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet, so it has no {name}; "
                                     f"call fit first") from None

    def _belief_call(self):
        """The call that sets the belief from outside (``x``, ``P`` or the particles, assigned,
        are refused with it), or None when only ``fit``, ``reset()`` and the steps set it."""
        if callable(getattr(self, "initialize", None)):
            return "initialize(x0, P0)"
        if "prior" in inspect.signature(self.reset).parameters:
            return "reset(prior=...)"
        return None

    def _set_estimate(self, which, mean, cov):
        """Record ``mean``, ``cov`` as the ``"prior"`` or ``"post"`` estimate, and as ``x``, ``P``."""
        setattr(self, f"x_{which}", mean)
        setattr(self, f"P_{which}", cov)
        Filter.x.restore(self, mean)
        Filter.P.restore(self, cov)

    def _keep_prediction(self):
        """The posterior is the prediction (a missing or set-aside observation)."""
        self._set_estimate("post", self.x_prior.copy(), self.P_prior.copy())

    def _start_batch(self, zs):
        return 0, []

    def _observation_shape(self):
        """The shape of one observation, which :meth:`batch_filter` checks every observation
        against before the first step; None (not known yet, e.g. before fit) leaves it to ``update``."""
        return getattr(self, "obs_shape_", None)

    def _control_dimension(self):
        """The control's dimension, 0 for a filter that takes none, which :meth:`batch_filter`
        checks every control against before the first step; None (not known, e.g. before fit or
        for a motion given as a callable) leaves it to ``predict``."""
        return None

    def _checked_run(self, zs, us):
        """:func:`checked_run` with what this filter knows: the observations' shape and feature
        map (``features_`` of a fitted learned filter) and the control's dimension."""
        return checked_run(zs, us, self._observation_shape(), self._control_dimension(),
                           getattr(self, "features_", None))

    def _run(self, zs, us):
        """Filter ``zs`` (checked by :func:`checked_run`), yielding ``(x_post, P_post, x_prior,
        P_prior)`` after each step: the loop of :meth:`batch_filter` and of the smoothers."""
        start, first = self._start_batch(zs)
        yield from first
        for t in range(start, len(zs)):
            if us is None:
                self.predict()
            else:
                self.predict(us[t])
            self.update(zs[t])
            yield self.x_post.copy(), self.P_post.copy(), self.x_prior.copy(), self.P_prior.copy()

    @limited_blas
    def batch_filter(self, zs, us=None, saver=None):
        """Filter a whole sequence of observations.

        The run continues from the filter's current belief, as filterpy's ``batch_filter`` does:
        call :meth:`reset` first to filter a new, independent run from the start.

        Parameters
        ----------
        zs : iterable of array-like or None, or array-like
            The observations in time order; a ``None`` entry is a missing measurement. An array
            (or a pandas DataFrame) is a run of its rows.
        us : iterable of array-like, optional
            The controls, one per observation: ``us[t]`` is what ``predict(u)`` takes before
            ``update(zs[t])`` (the control that moved the system to the state of step ``t``).
        saver : filterpy.common.Saver, optional
            Records the filter after each step (``saver.save()``), as filterpy's ``batch_filter``
            does: one record a row of ``means``. A step without an innovation (a missing
            observation, or the first step of a filter that starts from the first observation)
            records None for ``y`` and ``S`` (and the EKF's and UKF's ``K``), which
            ``saver.to_array()`` cannot stack with the other steps' arrays: pass
            ``Saver(filt, ignore=("y", "S", "K"))`` there.

        Returns
        -------
        means, covs : ndarray of shape (T, dim_x), (T, dim_x, dim_x)
            Posterior estimates ``x_post``, ``P_post`` at each step.
        means_p, covs_p : same shapes
            Predicted estimates ``x_prior``, ``P_prior`` at each step.
        """
        if saver is not None and not callable(getattr(saver, "save", None)):
            raise ValueError(f"saver: expected a filterpy Saver (an object with save()), got {type(saver).__name__}")
        zs, us = self._checked_run(zs, us)
        rows = []
        for row in self._run(zs, us):
            rows.append(row)
            if saver is not None:
                saver.save()
        if not rows:
            raise ValueError("zs: expected at least one observation")
        means, covs, means_p, covs_p = (np.array(col) for col in zip(*rows))
        return means, covs, means_p, covs_p

    @limited_blas
    def forecast(self, k, us=None):
        """The belief 1 to ``k`` steps ahead with no observation: ``predict`` repeated on a copy,
        so the filter's own belief (and its random numbers) are left as they are.

        Parameters
        ----------
        k : int
            How many steps ahead (at least 1). The answer is claimed after the first step: a ``k``
            whose means and covariances cannot be held in memory raises ``ValueError`` then.
        us : sequence of array-like, optional
            The ``k`` controls, for a controlled system.

        Returns
        -------
        means : ndarray of shape (k, dim_x)
            ``means[i]`` is the predicted state ``i + 1`` steps ahead (``means[0]`` is what
            ``predict()`` would give).
        covs : ndarray of shape (k, dim_x, dim_x)
            Their covariances.
        """
        k = check_int(k, "k")
        us = checked_controls(us, k, self._control_dimension(), "step ahead")
        ahead = copy.deepcopy(self)
        means = covs = None
        for i in range(k):
            if us is None:
                ahead.predict()
            else:
                ahead.predict(us[i])
            mean = np.array(ahead.x_prior, dtype=np.float64).ravel()
            if means is None:
                # the whole answer is claimed after the first step, so a k too large for memory
                # is refused at once rather than after hours of steps
                means, covs = _forecast_arrays(k, mean.size)
            means[i], covs[i] = mean, ahead.P_prior
        return means, covs


def _forecast_arrays(k, dim):
    """Room for ``k`` forecast means and covariances of a ``dim``-dimensional state."""
    need = 8.0 * k * dim * (dim + 1)
    check_memory(need, "k", f"{k:,} steps ahead of a {dim}-dimensional state", "forecast fewer steps")
    try:  # where the platform does not say how much memory it has
        return np.empty((k, dim)), np.empty((k, dim, dim))
    except MemoryError:
        raise ValueError(f"k: {k:,} steps ahead of a {dim}-dimensional state need {need:.3g} "
                         "bytes for the means and covariances, more than this machine can hold; forecast "
                         "fewer steps") from None


#: what :func:`~kbfilter.tune_filter` records on the filter it returns, saved with the filter
TUNING_RECORD = ("best_params_", "search_table_", "param_grid_", "extended_params_", "validation_nees_", "refit_time_")


def tuning_record_holds(*kinds):
    """The ``holds`` of a saved tuning record: its grid and table may hold any object of ``kinds``,
    the kinds the filter's own parameters hold."""
    return {name: kinds for name in TUNING_RECORD[:4]}


def check_tuning_record(filt):
    """A loaded filter's tuning record, all of it or none, shaped as :func:`~kbfilter.tune_filter`
    writes it: a grid over the filter's own parameters, the chosen value of each, one row per
    evaluated setting with its validation MSE. A saved file is untrusted input."""
    present = [name for name in TUNING_RECORD if hasattr(filt, name)]
    if not present:
        return
    where = f"{type(filt).__name__}: the file's tuning record"
    if len(present) < len(TUNING_RECORD):
        raise ValueError(f"{where} holds {present} but not {[n for n in TUNING_RECORD if n not in present]}")
    params, grid = filt.get_params(deep=False), filt.param_grid_
    if not (isinstance(grid, dict) and grid and all(
            name in params and isinstance(values, (list, tuple)) and values for name, values in grid.items())):
        raise ValueError(f"{where}: param_grid_ is not a grid over the filter's parameters (a non-empty list of "
                         f"values for each)")
    best, extended = filt.best_params_, filt.extended_params_
    if not (isinstance(best, dict) and set(best) == set(grid)):
        raise ValueError(f"{where}: best_params_ is not one value for each parameter of param_grid_")
    columns = set(grid) | {"mse"}
    table = filt.search_table_
    if not (isinstance(table, list) and table and all(
            isinstance(row, dict) and set(row) == columns and isinstance(row["mse"], float) for row in table)):
        raise ValueError(f"{where}: search_table_ is not a list of evaluated settings, each with its mse")
    if not (isinstance(extended, dict) and all(name in grid and isinstance(v, tuple) for name, v in extended.items())):
        raise ValueError(f"{where}: extended_params_ is not a tuple of added values for parameters of param_grid_")
    for name, value, allow_none in (("validation_nees_", filt.validation_nees_, True),
                                    ("refit_time_", filt.refit_time_, False)):
        if not ((allow_none and value is None) or (isinstance(value, float) and value >= 0)):
            raise ValueError(f"{where}: {name} is {value!r}, expected a non-negative number")


def check_param_names(estimator, params):
    """Refuse names in ``params`` that are not parameters of ``estimator``."""
    unknown = sorted(set(params) - set(estimator.get_params(deep=False)))
    if unknown:
        raise ValueError(f"params: {unknown} are not parameters of {type(estimator).__name__}")


class LearnedFilter(CountedFallbacks, Filter, BaseEstimator):
    """The contract of a filter learned from example trajectories (a scikit-learn estimator).

    Besides the :class:`Filter` surface it provides

    - ``fit(states, observations, *, controls=None)``, returning the filter with a fresh belief
      (hyperparameters only in ``__init__``, learned state in attributes ending in ``_``); the
      controls go by keyword, because a controlled system's ``simulate`` returns ``(states,
      controls, observations)``, and ``fit(*system.simulate(T))`` read that way would learn the
      sensor from the controls;
    - ``reset()``: the belief :meth:`fit` starts from, the fallback counts since reset cleared;
    - ``diagnostics``: the fallbacks counted at fit and since the last reset;
    - :meth:`default_grid`: the hyperparameter grid :func:`~kbfilter.tune_filter` searches
      when given none;
    - :meth:`check_params`: the hyperparameters checked without data (what ``fit`` checks
      first), so that a grid's bad value is refused before any fit;
    - :meth:`with_params`: a fitted filter with hyperparameters its fit does not depend on set
      anew, without a new fit (``tune_filter`` sweeps such a parameter on one fit).

    A new filter is one subclass that composes the components of :mod:`kbfilter.filters`
    (the learned observation model, the particle belief); tuning and the benchmark need nothing
    else from it.
    """

    def fit(self, states, observations, *, controls=None):  # pragma: no cover - the contract
        """Learn from example trajectories.

        Parameters
        ----------
        states : array-like of shape (T, dim_x), or a list of such arrays
            The hidden states of the training trajectories.
        observations : array-like of shape (T, dim_z) or (T, rows, columns[, channels]), or a list
            The observation at each training state.
        controls : array-like of shape (T, dim_u), or a list, optional
            The controls, for filters that learn a controlled transition (others ignore them).

        Returns
        -------
        self
            The fitted filter, its belief reset.
        """
        raise NotImplementedError

    def reset(self):  # pragma: no cover - the contract
        """Restart the belief from where :meth:`fit` starts it, the fallback counts cleared.

        Returns
        -------
        self
            The filter.
        """
        raise NotImplementedError

    def _after_load(self):
        super()._after_load()
        check_tuning_record(self)

    def check_params(self):
        """Check the hyperparameters as :meth:`fit` does before it reads any data.

        :func:`~kbfilter.tune_filter` calls it on every value of a grid before it fits anything.
        What depends on the data (a ``rank`` above the number of training states, say) is
        checked by :meth:`fit`.

        Returns
        -------
        self
            The filter, unchanged.

        Raises
        ------
        ValueError
            Naming the first parameter that is not what the filter accepts.
        """
        return self

    def with_params(self, **params):
        """This fitted filter with ``params`` set, without a new fit, where the fit does not
        depend on them.

        :func:`~kbfilter.tune_filter` asks for it when two candidate settings differ only in
        such parameters, so that a sweep along one of them costs one fit. A filter returns a copy
        whose answers equal those of a fresh fit with ``params`` set, or None when ``params``
        need a new fit; this base class returns None.

        Parameters
        ----------
        **params
            Hyperparameters, as :meth:`set_params` takes them.

        Returns
        -------
        LearnedFilter or None
            A copy with a fresh belief (this filter is not changed), or None.

        Raises
        ------
        ValueError
            For a name that is not a parameter of the filter, or a value :meth:`check_params`
            refuses (a fit with it would fail, so None, "fit again with it", would be no answer).
        """
        check_param_names(self, params)
        clone(self).set_params(**params).check_params()
        return None

    def default_grid(self, observations):
        """The grid :func:`~kbfilter.tune_filter` searches when given none.

        Parameters
        ----------
        observations : array-like or list of array-like
            The training observations (the grid may depend on whether they are images).

        Returns
        -------
        dict
            Parameter name -> candidate values.

        Raises
        ------
        ValueError
            For a filter with no default grid (pass ``param_grid`` to :func:`~kbfilter.tune_filter`).
        """
        grid = self._grid_for(observation_shape(observations))
        if grid is None:
            raise ValueError(f"param_grid: {type(self).__name__} has no default grid; pass one")
        return grid

    def _grid_for(self, obs_shape):
        """The default grid for observations of shape ``obs_shape`` (None: no default)."""
        return None


#: observations a run's feature-map check maps at a time
MAPPED_BLOCK = 256


def checked_run(zs, us=None, obs_shape=None, dim_u=None, features=None):
    """The observations and controls of a run, as lists, checked before any step.

    Parameters
    ----------
    zs : iterable of array-like or None, or array-like
        The observations (at least one); an array or DataFrame is a run of its rows.
    us : iterable of array-like, or array-like, optional
        One control per observation.
    obs_shape : tuple of int, optional
        The shape of one observation; when given, every observation but the missing ones (None)
        is checked against it and for finite values, so that a bad one late in the run is
        refused before the first step has moved the belief.
    dim_u : int, optional
        The control's dimension, 0 for a filter that takes none; when given, the controls are
        checked the same way (a control at every step of the right length, or none at all).
    features : transformer, optional
        The fitted observation feature map (with ``obs_shape``): every observation is mapped
        through it before the first step, :data:`MAPPED_BLOCK` at a time, and one it maps to NaN
        or infinite values is refused by its index.

    Returns
    -------
    zs : list
        The observations.
    us : list or None
        The controls, one per observation.
    """
    zs = as_steps(zs)
    if not zs:
        raise ValueError("zs: expected at least one observation")
    if obs_shape is not None:
        given = [t for t, z in enumerate(zs) if z is not None]
        # a block at a time, so that a long run of images is never held twice (checked as float64)
        for start in range(0, len(given), MAPPED_BLOCK):
            steps = given[start:start + MAPPED_BLOCK]
            block = [check_observation(zs[t], obs_shape, f"zs[{t}]", MISSING_IN_RUN) for t in steps]
            if features is None:
                continue
            # a map fitted on finite training observations may still overflow on a new one (a log
            # below the training range): found before the first step has moved the belief
            mapped = np.asarray(features.transform(np.stack(block)), dtype=np.float64).reshape(len(block), -1)
            bad = np.flatnonzero(~np.all(np.isfinite(mapped), axis=1))
            if bad.size:
                raise ValueError(f"zs[{steps[bad[0]]}]: the feature map gave NaN or infinite values for this "
                                 f"observation")
    return zs, checked_controls(us, len(zs), dim_u)


def checked_controls(us, n, dim_u=None, per="observation"):
    """The controls of ``n`` steps, as a list, checked before any step.

    Parameters
    ----------
    us : iterable of array-like, or array-like, or None
        One control a step.
    n : int
        The steps.
    dim_u : int, optional
        The control's dimension, 0 for a filter that takes none (then every control must be
        None); None checks only their number.
    per : str, default="observation"
        What one step is, for the message.

    Returns
    -------
    list or None
        The controls.
    """
    if us is not None:
        us = as_steps(us, "us")
        if len(us) != n:
            raise ValueError(f"us: expected one control per {per} ({n}), got {len(us)}")
    if dim_u == 0:
        given = [t for t, u in enumerate(us or ()) if u is not None]
        if given:
            raise ValueError(f"us[{given[0]}]: this filter takes no control; expected None")
    elif dim_u is not None:
        if us is None:
            raise ValueError(f"us: this filter takes a control of shape ({dim_u},) at every step; got none")
        for t, u in enumerate(us):
            if u is None:
                raise ValueError(f"us[{t}]: expected a control of shape ({dim_u},), got None")
            check_step_control(u, dim_u, f"us[{t}]")
    return us


def observation_shape(observations):
    """The shape of one observation in ``observations`` (one sequence, or a list of sequences).

    Parameters
    ----------
    observations : array-like or list of array-like
        The training observations.

    Returns
    -------
    tuple of int
        ``()`` for scalars, ``(dim_z,)`` for vectors, the image shape for images.
    """
    first = observations[0] if isinstance(observations, (list, tuple)) else observations
    return tuple(np.shape(first)[1:])


def no_control(u):
    """Refuse a control given to a transition learned without controls.

    Parameters
    ----------
    u : array-like or None
        The control ``predict`` was given.

    Raises
    ------
    ValueError
        When ``u`` is not None.
    """
    if u is not None:
        raise ValueError("u: this filter was fitted without controls; expected None")


def stacked_predecessors(sequences):
    """The states that have a successor in their own sequence, as indices into the stacked sequences.

    Parameters
    ----------
    sequences : list of array-like
        The sequences, in the order they are stacked.

    Returns
    -------
    ndarray of int
        Every index but the last of each sequence (no transition is learned across a join).
    """
    if not isinstance(sequences, (list, tuple)) or not all(np.ndim(x) >= 1 for x in sequences):
        raise ValueError(f"sequences: expected a list of sequences (arrays of states), got {type(sequences).__name__}")
    ends = np.cumsum([len(x) for x in sequences])
    return np.setdiff1d(np.arange(ends[-1] if len(ends) else 0), ends - 1)


def training_pairs(states, observations):
    """The training pairs ``(x_i, z_i)`` of one sequence or a list of them, checked and stacked.

    Parameters
    ----------
    states : array-like of shape (T, dim_x), or a list of such arrays
        The training states.
    observations : array-like of shape (T, dim_z) or (T, rows, columns[, channels]), or a list
        The observation at each state.

    Returns
    -------
    X : ndarray of shape (n, dim_x)
        The states, stacked.
    Z : ndarray of shape (n, dim_z)
        The observations, flattened and stacked.
    obs_shape : tuple of int
        The shape of one observation.
    """
    xs, zs, obs_shape = check_sequences(states, observations)
    return np.vstack(xs), np.vstack(zs), obs_shape
