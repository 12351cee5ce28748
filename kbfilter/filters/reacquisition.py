"""Telling a lost track from a surprising observation, and what a lost track restarts from.

A particle filter whose particles are all far from the vehicle cannot find it again by weighing
them: every weight is about zero, and the estimate stays where the particles are. Trackers notice
this with a gate (Bar-Shalom, Li and Kirubarajan 2001): an observation ``z`` is explained by a state
``x`` when the squared Mahalanobis distance of ``z`` from the sensor's mean ``h(x)`` under its
noise covariance ``R`` is at most a quantile of the chi-squared law with ``dim z`` degrees of
freedom, and a track none of whose states explains ``z`` is lost. It restarts from what its
recent observations say together, as a tracker initiates a track from several scans.

:class:`ChiSquareGate` is the gate, fitted once from the sensor; :class:`RecentObservations` the
observations a restart is computed from. Both are read-only: a step makes a new window, so a
copy of a filter (one a track) never shares a window with another.
"""

import numpy as np
from scipy.stats import chi2

from .._validation import check_array, check_covariance, check_fraction, check_int, check_positive, check_square
from ..persistence import persistent

__all__ = ["ChiSquareGate", "RecentObservations"]


@persistent("threshold", "precision")
class ChiSquareGate:
    """The gate of a sensor with Gaussian noise: ``z`` is inside the gate of a state ``x`` when
    ``(z - h(x))^T R^{-1} (z - h(x)) <= threshold``.

    Read-only once built.

    Parameters
    ----------
    threshold : float
        The largest squared Mahalanobis distance admitted, positive and finite.
    precision : array-like of shape (d, d)
        ``R^{-1}``, the inverse of the sensor's noise covariance: symmetric positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> gate = ChiSquareGate.of_noise(np.eye(2), probability=0.99)
    >>> round(gate.threshold, 2), gate.admits_any(np.array([[3.0, 0.0], [0.5, 0.5]]))
    (9.21, True)
    """

    def __init__(self, threshold, precision):
        # a NaN threshold would switch the gate off without a word, a negative one lose every track,
        # and an indefinite precision put any observation inside it
        self.threshold = check_positive(threshold, "threshold")
        precision = check_square(precision, "precision")
        self.precision = check_covariance(precision, "precision", precision.shape[0], definite=True)

    @classmethod
    def of_noise(cls, noise_cov, probability, name="noise_cov"):
        """The gate that admits an observation of noise covariance ``noise_cov`` from its state
        with ``probability``.

        Parameters
        ----------
        noise_cov : array-like of shape (d, d)
            The sensor's noise covariance ``R``, positive definite.
        probability : float in (0, 1)
            The chi-squared quantile's probability.
        name : str, default="noise_cov"
            What an error calls ``noise_cov``.

        Returns
        -------
        ChiSquareGate
            The gate.
        """
        probability = check_fraction(probability, "probability", below_one=True)
        R = check_square(noise_cov, name, "covariance")
        R = check_covariance(R, name, R.shape[0], definite=True)
        with np.errstate(over="ignore"):
            precision = np.linalg.inv(R)
        if not np.all(np.isfinite(precision)):
            raise ValueError(f"{name}: its inverse overflows (a noise covariance as small as "
                             f"{np.linalg.eigvalsh(R)[0]:.3g} along some direction); express the observations in other "
                             f"units")
        return cls(float(chi2.ppf(probability, R.shape[0])), 0.5 * (precision + precision.T))

    @property
    def dim(self):
        """The observation's dimension ``d``: int."""
        return self.precision.shape[0]

    def admits_any(self, residuals):
        """Whether some residual is inside the gate.

        Parameters
        ----------
        residuals : ndarray of shape (n, d)
            ``z - h(x)`` for each state ``x`` a track holds.

        Returns
        -------
        bool
            True when some row's squared Mahalanobis distance is at most ``threshold``.
        """
        distances = np.einsum("nd,de,ne->n", residuals, self.precision, residuals)
        return bool(np.min(distances) <= self.threshold)


@persistent("window", "observations", "ages")
class RecentObservations:
    """The observations of the last ``window`` steps, oldest first, with their ages in steps, and
    the one before them however old (two observations tell a velocity).

    Read-only: :meth:`with_observation` and :meth:`aged` return a new window.

    Parameters
    ----------
    window : int
        How many steps back an observation is kept.
    observations : array-like of shape (m, ...), optional
        The observations, oldest first; ``1 <= m <= window + 1``. None (with ``ages``) is an empty
        window.
    ages : array-like of int, shape (m,), optional
        How many steps ago each was made: non-increasing, the last non-negative.

    Examples
    --------
    >>> import numpy as np
    >>> recent = RecentObservations(window=1)
    >>> for z in ([0.0], [1.0], [2.0]):
    ...     recent = recent.aged().with_observation(np.array(z))
    >>> recent.observations.ravel().tolist(), recent.ages.tolist()
    ([1.0, 2.0], [1, 0])
    >>> recent.aged(5).with_observation(np.array([9.0])).ages.tolist()   # the one before, however old
    [5, 0]
    """

    def __init__(self, window, observations=None, ages=None):
        self.window = check_int(window, "window")
        if observations is None and ages is None:
            self.observations = self.ages = None
            return
        if observations is None or ages is None:
            raise ValueError("observations, ages: expected both or neither")
        Z = check_array(observations, "observations")
        if not (isinstance(ages, np.ndarray) and ages.dtype.kind in "iu"):
            raise ValueError("ages: expected an array of integers")
        ok = (Z.ndim >= 2 and ages.ndim == 1 and 1 <= len(ages) == len(Z) <= self.window + 1
              and bool(np.all(np.isfinite(Z))))
        if ok:
            ok = bool(ages[-1] >= 0 and np.all(np.diff(ages) <= 0))
        if not ok:
            raise ValueError(f"observations, ages: expected 1 to {self.window + 1} finite observations, oldest first, "
                             f"with their ages in steps, one each")
        self.observations, self.ages = Z, ages.astype(np.int64)

    def aged(self, steps=1):
        """The window ``steps`` steps later.

        Parameters
        ----------
        steps : int, default=1
            Steps passed.

        Returns
        -------
        RecentObservations
            Every age ``steps`` higher.
        """
        if self.ages is None:
            return self
        return RecentObservations(self.window, self.observations, self.ages + check_int(steps, "steps"))

    def with_observation(self, z):
        """The window with ``z`` made now (age 0), and what has grown older than ``window`` steps
        left out, except the last observation before ``z``.

        Parameters
        ----------
        z : ndarray
            The observation, of the shape of those held.

        Returns
        -------
        RecentObservations
            The new window.
        """
        if self.ages is None:
            return RecentObservations(self.window, z[None], np.zeros(1, dtype=np.int64))
        Z = np.concatenate([self.observations, z[None]])
        ages = np.append(self.ages, 0)
        keep = ages <= self.window
        keep[-2:] = True
        # at most one a step, unless updates come without predictions between them
        last = -(self.window + 1)
        return RecentObservations(self.window, Z[keep][last:], ages[keep][last:])
