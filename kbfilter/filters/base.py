"""What every filter object shares: filterpy's attribute names and ``batch_filter``."""

import numpy as np

from ..threads import limited_blas


class SequentialFilter:
    """Mixin: ``batch_filter`` as a ``predict(); update(z)`` loop, filterpy's return convention.

    Subclasses provide ``predict()``, ``update(z)`` and the attributes ``x_prior``, ``P_prior``,
    ``x_post``, ``P_post``; they may override :meth:`_start_batch` to handle the first step
    differently (e.g. starting from the first observation).
    """

    def _start_batch(self, zs):
        return 0, []

    @limited_blas
    def batch_filter(self, zs):
        """Filter a whole sequence of observations.

        Parameters
        ----------
        zs : iterable of array-like or None
            The observations in time order; a ``None`` entry is a missing measurement.

        Returns
        -------
        means, covs : ndarray of shape (T, dim_x), (T, dim_x, dim_x)
            Posterior estimates ``x_post``, ``P_post`` at each step.
        means_p, covs_p : same shapes
            Predicted estimates ``x_prior``, ``P_prior`` at each step.
        """
        zs = list(zs)
        start, first = self._start_batch(zs)
        rows = list(first)
        for z in zs[start:]:
            self.predict()
            self.update(z)
            rows.append((self.x_post.copy(), self.P_post.copy(), self.x_prior.copy(), self.P_prior.copy()))
        if not rows:
            raise ValueError("zs: expected at least one observation")
        means, covs, means_p, covs_p = (np.array(col) for col in zip(*rows))
        return means, covs, means_p, covs_p
