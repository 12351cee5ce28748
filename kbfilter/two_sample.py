"""The kernel two-sample test: is ``X`` drawn from the same law as ``Y``? (Gretton et al. 2012.)

The statistic is the squared maximum mean discrepancy between the two samples' kernel means,
``MMD^2 = ||mean_i k(., x_i) - mean_j k(., y_j)||^2``; its null distribution is the one it has when
the pooled points are split at random into groups of the same sizes (a permutation test, exact
in level for any sample size).
"""

from typing import NamedTuple

import numpy as np

from ._validation import check_int, check_matrix, check_memory, check_rng
from .kernels import fitted_kernel
from .progress import progress_bar
from .threads import limited_blas

__all__ = ["mmd_test", "MMDTestResult"]

# permutations handled at once: bounds the (pooled points x batch) block of signed weights
_BATCH_ENTRIES = 2**22


class MMDTestResult(NamedTuple):
    """What :func:`mmd_test` returns.

    Attributes
    ----------
    statistic : float
        The squared MMD between the two samples (the biased, V-statistic form).
    pvalue : float
        ``(1 + #{permuted statistics >= statistic}) / (1 + n_permutations)``.
    """

    statistic: float
    pvalue: float


@limited_blas
def mmd_test(X, Y, kernel=None, n_permutations=1000, random_state=None):
    """The MMD two-sample test with a permutation null.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The first sample (a 1-D array is ``n`` one-dimensional points).
    Y : array-like of shape (m, d)
        The second sample.
    kernel : Kernel, optional
        The kernel, fitted on the pooled sample; Gaussian with the median heuristic by default.
    n_permutations : int, default=1000
        Random splits of the pooled sample that make the null distribution (counted on a progress
        bar when they take long; :func:`~kbfilter.progress.quiet_progress` keeps it quiet).
    random_state : int, Generator or None, default=None
        Seeds the permutations.

    Returns
    -------
    MMDTestResult
        ``statistic`` (the squared MMD) and ``pvalue``.

    Examples
    --------
    >>> import numpy as np
    >>> from kbfilter import mmd_test
    >>> rng = np.random.default_rng(0)
    >>> same = mmd_test(rng.normal(size=(60, 2)), rng.normal(size=(60, 2)), random_state=0)
    >>> shifted = mmd_test(rng.normal(size=(60, 2)), rng.normal(1.0, size=(60, 2)), random_state=0)
    >>> bool(same.pvalue > 0.05), bool(shifted.pvalue < 0.01)
    (True, True)
    """
    X = check_matrix(X, "X", min_samples=2)
    Y = check_matrix(Y, "Y", min_samples=2, n_features=X.shape[1])
    n_permutations = check_int(n_permutations, "n_permutations")
    rng = check_rng(random_state)
    total = X.shape[0] + Y.shape[0]
    # the pooled Gram matrix and its squared distances (measured: 2.0 total^2 floats at the peak)
    check_memory(16.0 * total * total, "X, Y", f"the Gram matrix of {total:,} pooled points",
                 "test on a random subsample of each")
    pooled = np.vstack([X, Y])
    G = fitted_kernel(kernel, "kernel", pooled)(pooled)
    n = X.shape[0]
    # the statistic is s^T G s for the signed weights s = (1/n on the first group, -1/m on the second)
    signs = np.concatenate([np.full(n, 1.0 / n), np.full(total - n, -1.0 / (total - n))])
    statistic = float(signs @ G @ signs)
    batch = max(1, _BATCH_ENTRIES // total)
    exceed = 0
    with progress_bar(n_permutations, "MMD test", unit="permutation") as bar:
        for start in range(0, n_permutations, batch):
            count = min(batch, n_permutations - start)
            S = np.column_stack([signs[rng.permutation(total)] for _ in range(count)])
            permuted = np.einsum("ij,ij->j", S, G @ S)
            # a permuted statistic equal to the observed one up to rounding counts as reaching it
            exceed += int(np.sum(permuted >= statistic - 1e-12 * abs(statistic)))
            bar.update(count)
    return MMDTestResult(statistic, (1 + exceed) / (1 + n_permutations))
