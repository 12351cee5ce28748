"""Kernel chain rule (algorithms §4; Fukumizu (2014) "Kernel Chain Rule")."""

from .._validation import check_choice, check_matrix, check_same_length, check_vector
from ..embedding import KernelMean, weighted_sum
from .sum_rule import sum_rule_weights

__all__ = ["JointKernelMean", "kernel_chain_rule"]


class JointKernelMean:
    """A joint embedding ``sum_i beta_i k_b(., b_i) (x) k_a(., a_i)`` on training pairs.

    Parameters
    ----------
    points_out : ndarray of shape (n, d_out)
        The outputs ``b_i``.
    points_in : ndarray of shape (n, d_in)
        The inputs ``a_i``.
    weights : ndarray of shape (n,)
        The weights ``beta_i``.
    kernel_out, kernel_in : Kernel
        Fitted kernels on outputs and inputs.
    """

    def __init__(self, points_out, points_in, weights, kernel_out, kernel_in):
        self.points_out = check_matrix(points_out, "points_out")
        self.points_in = check_matrix(points_in, "points_in")
        check_same_length("points_out", self.points_out, "points_in", self.points_in)
        self.weights = check_vector(weights, "weights", length=len(self.points_out))
        self.kernel_out = kernel_out
        self.kernel_in = kernel_in

    def marginal(self, which):
        """One marginal of the joint embedding.

        Parameters
        ----------
        which : {"out", "in"}
            ``"out"``: the embedding of ``b`` (the sum rule); ``"in"``: the embedding of ``a``.

        Returns
        -------
        KernelMean
            The marginal embedding, on the training outputs or inputs.
        """
        check_choice(which, "which", ("out", "in"))
        if which == "out":
            return KernelMean(self.points_out, self.weights, self.kernel_out)
        return KernelMean(self.points_in, self.weights, self.kernel_in)

    def expect(self, f):
        """The joint embedding's estimate of an expectation, ``sum_i beta_i f(b_i, a_i)``.

        Parameters
        ----------
        f : callable
            Maps the (n, d_out) outputs and (n, d_in) inputs to an array with n rows.

        Returns
        -------
        ndarray
            The weighted sum of ``f``'s rows.
        """
        return weighted_sum(self.weights, f, self.points_out, self.points_in)


def kernel_chain_rule(prior, conditional):
    """Joint embedding of ``(b, a)`` with ``a ~ Pi`` and ``b | a ~ P(b | a)`` (algorithms §4).

    Same coefficients as :func:`~kbfilter.kernel_sum_rule`, placed on the training pairs.

    Parameters
    ----------
    prior : KernelMean
        The embedding of ``Pi`` on the input space.
    conditional : ConditionalEmbedding
        The fitted embedding of ``P(b | a)``.

    Returns
    -------
    JointKernelMean
        The joint embedding on the conditional's training pairs.

    Examples
    --------
    >>> import numpy as np
    >>> import kbfilter as kb
    >>> rng = np.random.default_rng(0)
    >>> A = rng.normal(size=(500, 1)); B = 2 * A + 0.1 * rng.normal(size=(500, 1))
    >>> cme = kb.ConditionalEmbedding(reg=1e-4).fit(A, B)
    >>> joint = kb.kernel_chain_rule(kb.KernelMean(rng.normal(1.0, 0.3, size=(200, 1))), cme)
    >>> round(float(joint.expect(lambda b, a: b[:, 0] * a[:, 0])), 1)  # E[2 a^2] = 2 (1 + 0.09)
    2.2
    """
    beta, _ = sum_rule_weights(prior, conditional)
    return JointKernelMean(conditional.B_, conditional.A_, beta, conditional.kernel_out_, conditional.kernel_in_)
