"""Kernel sum rule (algorithms §4; Fukumizu (2014) "Kernel Sum Rule")."""

import numpy as np
import scipy.sparse as sp

from ..embedding import KernelMean
from ._checks import check_conditional, check_prior

__all__ = ["kernel_sum_rule", "sum_rule_weights"]


def sum_rule_weights(prior, conditional):
    """``beta = W(u) alpha``: weights over the conditional's training outputs (algorithms §4).

    ``W(u)`` is the conditional's weight matrix at the prior's points ``u`` (sparse for ``knn``).
    """
    check_conditional(conditional)
    prior = check_prior(prior, conditional.A_.shape[1], "prior")
    W = conditional.weights(prior.points)
    beta = W @ prior.weights
    return np.asarray(beta).ravel(), W


def kernel_sum_rule(prior, conditional):
    """Embedding of ``Q(b) = integral P(b | a) dPi(a)`` from a prior embedding on ``a``.

    Parameters
    ----------
    prior : KernelMean
        ``sum_j alpha_j k_a(., u_j)``, on the conditional's input space.
    conditional : ConditionalEmbedding
        Fitted on pairs ``(a_i, b_i)``; any method (the ``knn`` weights stay sparse).

    Returns
    -------
    KernelMean
        ``sum_i beta_i k_b(., b_i)`` with ``beta = W(u) alpha``, on the training outputs that
        receive a weight (all of them for dense methods).

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> rng = np.random.default_rng(0)
    >>> A = rng.normal(size=(500, 1)); B = 2 * A + 0.1 * rng.normal(size=(500, 1))
    >>> cme = kb.ConditionalEmbedding(reg=1e-4).fit(A, B)
    >>> prior = kb.KernelMean(rng.normal(1.0, 0.3, size=(200, 1)))
    >>> np.round(kb.kernel_sum_rule(prior, cme).mean(), 1)
    array([2.])
    """
    beta, W = sum_rule_weights(prior, conditional)
    points = conditional.B_
    if sp.issparse(W):
        support = np.flatnonzero(np.diff(sp.csr_matrix(W).indptr))
        points, beta = points[support], beta[support]
    return KernelMean(points, beta, conditional.kernel_out_)
