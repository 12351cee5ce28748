"""A validation gate for learned observation models.

A learned observation model knows the observations it was trained on and little else. Given an
observation unlike every training observation (a pose the training run never took, a view it never
saw), kernel Bayes' rule and nearest-neighbour votes still answer, by extrapolating from the least
unlike training observations, and the normalised posterior weights carry that guess with the
same confidence as any other. A tracker should rather treat such an observation as telling it
nothing and let the motion model carry the belief, as a Kalman filter's validation gate drops a
measurement outside its innovation ellipsoid.

The gate measures "unlike" in the space the observation kernel sees: an observation is an outlier
when it is farther from every training observation than a chosen quantile of the training
observations' own distances to their nearest other training observation.
"""

from numbers import Real

import numpy as np
from sklearn.neighbors import NearestNeighbors

from .._validation import check_fraction, check_matrix, check_within_magnitude
from ..persistence import persistent

__all__ = ["OutlierGate"]

_REFERENCE_SIZE = 1000  # training observations whose nearest-neighbour distances set the radius


@persistent("observations", "radius")
class OutlierGate:
    """Admits an observation when some training observation lies within ``radius`` of it.

    Read-only once built; a filter holds it inside its shared, read-only model.

    Parameters
    ----------
    observations : array-like of shape (n, d)
        The training observations, in the space the observation kernel sees.
    radius : float
        The largest admitted distance to the nearest training observation.

    Examples
    --------
    >>> import numpy as np
    >>> gate = OutlierGate.from_quantile(np.arange(10.0)[:, None], quantile=1.0)
    >>> gate.radius, gate.admits(np.array([[4.5]])), gate.admits(np.array([[12.0]]))
    (1.0, True, False)
    """

    def __init__(self, observations, radius):
        self.observations = check_matrix(observations, "observations", min_samples=2)
        # infinite is a gate that admits everything; NaN or a negative radius would admit nothing
        self.radius = _distance(radius, "radius")
        self._index = NearestNeighbors(n_neighbors=1).fit(self.observations)

    def _after_load(self):
        # a saved file is untrusted: distances to the observations must not overflow
        check_within_magnitude(self.observations, "observations")

    @classmethod
    def from_quantile(cls, observations, quantile):
        """The gate whose radius is the ``quantile`` of the training observations' distances to their
        nearest other training observation.

        The distances are those of at most 1,000 training observations, evenly spaced through
        the data (no random draw), each to its nearest neighbour among all of them.

        Parameters
        ----------
        observations : array-like of shape (n, d), n >= 2
            The training observations, in the space the observation kernel sees.
        quantile : float in (0, 1]
            1 admits everything within the largest such distance.

        Returns
        -------
        OutlierGate
            The gate.
        """
        quantile = check_fraction(quantile, "quantile")
        gate = cls(observations, np.inf)
        X = gate.observations
        reference = np.unique(np.linspace(0, len(X) - 1, min(len(X), _REFERENCE_SIZE)).astype(int))
        # the nearest neighbour of a training observation among all of them is itself
        distances = gate._index.kneighbors(X[reference], n_neighbors=2)[0][:, 1]
        gate.radius = float(np.quantile(distances, quantile))
        return gate

    def distance(self, Z):
        """The distance from each row of ``Z`` to its nearest training observation.

        Parameters
        ----------
        Z : array-like of shape (q, d)
            Observations, mapped as the training observations were.

        Returns
        -------
        ndarray of shape (q,)
            The distances.
        """
        Z = check_matrix(Z, "Z", n_features=self.observations.shape[1])
        return self._index.kneighbors(Z)[0][:, 0]

    def admits(self, z):
        """Whether the observation ``z`` (one row) lies within ``radius`` of a training observation.

        Parameters
        ----------
        z : array-like of shape (1, d)
            One observation, mapped as the training observations were.

        Returns
        -------
        bool
            True when it does (the filter uses it), False for an outlier.
        """
        distance = self.distance(z)
        if distance.shape != (1,):
            raise ValueError(f"z: expected one observation, a row of shape (1, {self.observations.shape[1]}), got "
                             f"{distance.shape[0]} rows")
        return self.admits_distance(distance[0])

    def admits_distance(self, distance):
        """Whether an observation that far from its nearest training observation is admitted (for
        a caller that has measured the distance already, e.g. in its own neighbour search).

        Parameters
        ----------
        distance : float
            The distance to the nearest training observation.

        Returns
        -------
        bool
            True when it is within ``radius``.
        """
        return bool(_distance(distance, "distance") <= self.radius)


def _distance(value, name):
    if isinstance(value, bool) or not isinstance(value, Real) or not value >= 0:
        raise ValueError(f"{name}: expected a non-negative number (inf allowed), got {value!r}")
    return float(value)


def check_outlier_quantile(quantile):
    """A filter's ``outlier_quantile``, checked before any work: None (no gate) or a fraction in (0, 1].

    Parameters
    ----------
    quantile : float or None
        The value given.

    Returns
    -------
    float or None
        The value.
    """
    return None if quantile is None else check_fraction(quantile, "outlier_quantile")


def outlier_gate(observations, quantile):
    """The gate a filter with ``outlier_quantile=quantile`` uses: None when it is None.

    Parameters
    ----------
    observations : array-like of shape (n, d)
        The training observations, in the space the observation kernel sees.
    quantile : float or None
        The checked ``outlier_quantile``.

    Returns
    -------
    OutlierGate or None
        The gate (:meth:`OutlierGate.from_quantile`), or None.
    """
    return None if quantile is None else OutlierGate.from_quantile(observations, quantile)
