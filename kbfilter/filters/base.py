"""What every filter object shares: filterpy's attribute names and ``batch_filter``."""

from collections import Counter

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._warnings import warn_user
from ..embedding import weighted_covariance
from ..linalg import NumericalWarning
from ..threads import limited_blas


def check_transition(transition, name="transition"):
    """Check a transition sampler: a system (``sample_transition``) or a callable ``f(X, u, rng)``.

    Parameters
    ----------
    transition : System or callable
        The sampler.
    name : str, default="transition"
        The argument's name, for the error message.

    Returns
    -------
    System or callable
        ``transition`` itself.
    """
    if not (callable(getattr(transition, "sample_transition", None)) or callable(transition)):
        raise ValueError(f"{name}: expected a system with sample_transition(X, rng[, u]) or a callable "
                         f"transition(X, u, rng) returning the next states, got {type(transition).__name__}")
    return transition


def system_control(system, u):
    """The control ``u`` for one step of ``system``, checked before any work.

    A system without controls (no ``dim_u``) refuses one; for a controlled system a given control
    must have shape ``(dim_u,)``, and None is left to the system, which says what it needs.

    Parameters
    ----------
    system : System
        The system the control drives.
    u : array-like or None
        The control.

    Returns
    -------
    ndarray of shape (dim_u,) or None
        The control as a float array, or None.
    """
    dim_u = getattr(system, "dim_u", None)
    if dim_u is None:
        if u is not None:
            raise ValueError(f"u: {type(system).__name__} takes no control input; expected None")
        return None
    if u is None:
        return None
    u = np.asarray(u, dtype=np.float64)
    if u.shape != (dim_u,):
        raise ValueError(f"u: expected a control of shape ({dim_u},), got shape {u.shape}")
    return u


def sample_next(transition, X, u, rng, name="transition"):
    """Draw the next state of each row of ``X`` from a sampler :func:`check_transition` accepts.

    A system without controls (no ``dim_u``) is called as ``sample_transition(X, rng)`` and
    refuses a control; a controlled system as ``sample_transition(X, rng, u=u)``; a callable as
    ``transition(X, u, rng)``. What comes back is checked to be finite and of ``X``'s shape.

    Parameters
    ----------
    transition : System or callable
        The sampler.
    X : ndarray of shape (n, dim_x)
        Current states.
    u : array-like or None
        The control.
    rng : numpy.random.Generator
        The random numbers.
    name : str, default="transition"
        What error messages call the sampler.

    Returns
    -------
    ndarray of shape (n, dim_x)
        The next states.
    """
    if callable(getattr(transition, "sample_transition", None)):
        u = system_control(transition, u)
        out = transition.sample_transition(X, rng) if u is None else transition.sample_transition(X, rng, u=u)
    else:
        out = transition(X, u, rng)
    out = np.asarray(out, dtype=np.float64)
    if out.shape != X.shape or not np.all(np.isfinite(out)):
        raise ValueError(f"{name}: expected finite next states of shape {X.shape}, got "
                         f"{'non-finite values' if out.shape == X.shape else f'shape {out.shape}'}")
    return out


def resampling_due(weights, threshold):
    """Whether weighted particles are due for resampling (the rule every particle filter here uses).

    Parameters
    ----------
    weights : ndarray of shape (n,)
        Normalised weights.
    threshold : float in (0, 1]
        The fraction of ``n`` the effective sample size ``1 / sum_j w_j^2`` must not fall below;
        1 means after every update.

    Returns
    -------
    bool
        True when the particles should be resampled.
    """
    return threshold >= 1 or 1.0 / np.sum(weights**2) < threshold * len(weights)


def systematic_resample(weights, rng):
    """Systematic resampling: one uniform draw, ``n`` evenly spaced positions.

    (filterpy's ``systematic_resample`` draws from numpy's global state; this one takes ``rng``.)

    Parameters
    ----------
    weights : ndarray of shape (n,)
        Normalised weights.
    rng : numpy.random.Generator
        The random numbers.

    Returns
    -------
    ndarray of int, shape (n,)
        The indices of the particles kept, each as often as it is drawn.
    """
    n = len(weights)
    positions = (rng.uniform() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, positions)


class SharedModel:
    """A fitted model that is read-only once built, so copies of a filter share it.

    ``copy.copy`` and ``copy.deepcopy`` return the object itself: filterpy's ``Saver`` deep-copies
    a filter every step, and would otherwise copy every ``T x T`` matrix with it.
    """

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


class CountedFallbacks:
    """Mixin: the fallbacks a fitted filter takes, counted since fit and since the last reset.

    The filter keeps what fit counted in ``model_.fit_diagnostics`` (a filter without a model
    overrides ``_fit_diagnostics``) and starts ``_events`` afresh in ``reset``; each kind is
    warned about once per reset.
    """

    def _after_load(self):
        self._events = Counter()

    def _record(self, kind, message=None):
        """Count one event of ``kind``; warn on its first with ``message`` (None: count silently)."""
        self._events[kind] += 1
        if message is not None and self._events[kind] == 1:
            warn_user(f"{type(self).__name__}: {message} (reported once until reset; see diagnostics)",
                      NumericalWarning)

    def _admitted(self, z, gate, nearest=None):
        """The mapped observation ``z``, or None when ``gate`` sets it aside as an outlier (counted);
        ``nearest``, if known, is its distance to the nearest training observation."""
        if gate is not None and not (gate.admits(z) if nearest is None else gate.admits_distance(nearest)):
            self._record("outlier")
            return None
        return z

    @property
    def diagnostics(self):
        """Counts of every fallback taken at fit time and since the last reset (algorithms §5.4, §8),
        and of the observations an outlier gate set aside (``"outlier"``)."""
        check_is_fitted(self)
        return self._fit_diagnostics() + self._events

    def _fit_diagnostics(self):
        return self.model_.fit_diagnostics


class SequentialFilter:
    """Mixin: ``batch_filter`` as a ``predict(); update(z)`` loop, filterpy's return convention.

    Subclasses provide ``predict()``, ``update(z)`` and the attributes ``x_prior``, ``P_prior``,
    ``x_post``, ``P_post``; they may override :meth:`_start_batch` to handle the first step
    differently (e.g. starting from the first observation).
    """

    def _start_batch(self, zs):
        return 0, []

    @limited_blas
    def batch_filter(self, zs, us=None):
        """Filter a whole sequence of observations.

        Parameters
        ----------
        zs : iterable of array-like or None
            The observations in time order; a ``None`` entry is a missing measurement.
        us : iterable of array-like, optional
            The controls, one per observation: ``us[t]`` is what ``predict(u)`` takes before
            ``update(zs[t])`` (the control that moved the system to the state of step ``t``).

        Returns
        -------
        means, covs : ndarray of shape (T, dim_x), (T, dim_x, dim_x)
            Posterior estimates ``x_post``, ``P_post`` at each step.
        means_p, covs_p : same shapes
            Predicted estimates ``x_prior``, ``P_prior`` at each step.
        """
        zs = list(zs)
        if us is not None:
            us = list(us)
            if len(us) != len(zs):
                raise ValueError(f"us: expected one control per observation ({len(zs)}), got {len(us)}")
        start, first = self._start_batch(zs)
        rows = list(first)
        for t in range(start, len(zs)):
            if us is None:
                self.predict()
            else:
                self.predict(us[t])
            self.update(zs[t])
            rows.append((self.x_post.copy(), self.P_post.copy(), self.x_prior.copy(), self.P_prior.copy()))
        if not rows:
            raise ValueError("zs: expected at least one observation")
        means, covs, means_p, covs_p = (np.array(col) for col in zip(*rows))
        return means, covs, means_p, covs_p


class WeightedParticles:
    """Mixin for particle filters: the estimate of the particles ``particles`` with ``weights``.

    :meth:`_estimate` sets ``x`` to the weighted mean and ``P`` to the weighted covariance, and
    records them as ``x_prior``/``P_prior`` or ``x_post``/``P_post``.
    """

    @property
    def particle_weights(self):
        """The particles' weights, ``weights`` (the name the Kernel Monte Carlo filter, whose
        ``weights`` are on training states, gives them too)."""
        return self.weights

    def _estimate(self, which):
        mean, cov = self.weights @ self.particles, weighted_covariance(self.particles, self.weights)
        setattr(self, f"x_{which}", mean)
        setattr(self, f"P_{which}", cov)
        self.x, self.P = mean, cov
