"""Choosing CKME hyperparameters by closed-form leave-one-out (algorithms §3, Grünewälder et al. (2012) §3.2)."""

import numpy as np
from scipy.linalg import eigh
from sklearn.base import clone

from .._validation import check_matrix, check_positive, check_positive_values, check_same_length, check_semidefinite, \
    check_square, check_symmetric
from ..kernels import GaussianKernel
from .conditional import ConditionalEmbedding
from ..threads import limited_blas

__all__ = ["loo_loss", "select_conditional_embedding"]


def _loo_from_eig(U, lam, M, n, reg):
    # I - H = U diag(c / (lam + c)) U^T with c = n reg; M = U^T G_out U
    c = n * reg
    d = c / (lam + c)
    # the loss is a ratio of two quadratics in d: scaled so its largest entry is 1, a tiny reg (d ~ reg) does
    # not underflow both to 0 and give 0 / 0
    d /= d.max()
    Ud = U * d
    numer = np.einsum("jk,jk->j", Ud @ M, Ud)
    one_minus_h = np.einsum("jk,jk->j", U, Ud)
    return float(np.mean(numer / one_minus_h**2))


def loo_loss(G_in, G_out, reg):
    """Closed-form leave-one-out CKME loss (algorithms §3).

    With ``H = G_in (G_in + n reg I)^{-1}``, returns
    ``mean_j [(I - H) G_out (I - H)^T]_jj / (1 - H_jj)^2``: the mean over ``j`` of
    ``||k_b(., b_j) - mu_{-j}(a_j)||^2``, where ``mu_{-j}`` is fitted without pair ``j`` with the
    same ridge ``n reg`` (that is, ``reg * n / (n - 1)`` in the ``(n-1)``-point fit).

    Parameters
    ----------
    G_in : array-like of shape (n, n)
        The Gram matrix of the inputs: symmetric and positive semi-definite to ``1e-8`` times its
        largest entry (a ``ValueError`` otherwise).
    G_out : array-like of shape (n, n)
        The Gram matrix of the outputs.
    reg : float
        The regularisation ``eps`` of :class:`~kbfilter.ConditionalEmbedding`.

    Returns
    -------
    float
        The mean leave-one-out loss.

    Examples
    --------
    >>> import numpy as np
    >>> G = np.eye(3)
    >>> round(loo_loss(G, G, 1.0 / 3), 6)  # H = I/2: residual 1/2 each, divided by (1/2)^2
    1.0
    """
    G_in = check_square(check_matrix(G_in, "G_in", allow_1d=False), "G_in", "Gram matrix")
    G_out = check_matrix(G_out, "G_out", allow_1d=False)
    if G_out.shape != G_in.shape:
        raise ValueError(f"G_out: expected shape {G_in.shape} (G_in's: one row per pair), got {G_out.shape}")
    reg = check_positive(reg, "reg")
    # a Gram matrix is symmetric positive semi-definite to rounding; anything further off (a cross-Gram
    # matrix of two samples, an indefinite similarity) would be symmetrised and clipped into another loss
    tol = check_symmetric(G_in, "G_in", "Gram matrix")
    lam, U = eigh(0.5 * (G_in + G_in.T))
    check_semidefinite(float(lam[0]), tol, "G_in", "Gram matrix")
    lam = np.maximum(lam, 0.0)
    return _loo_from_eig(U, lam, U.T @ G_out @ U, G_in.shape[0], reg)


@limited_blas
def select_conditional_embedding(
    A,
    B,
    scales=(0.1, 0.2, 0.5, 1.0, 2.0, 4.0),
    regs=(1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
    kernel_in=None,
    kernel_out=None,
):
    """Grid search over (input bandwidth scale, reg) by closed-form LOO; returns the fitted best.

    One eigendecomposition of ``G_a`` per scale serves every ``reg`` (algorithms §3). The output
    kernel stays fixed, since the loss is measured in its RKHS.

    Parameters
    ----------
    A : array-like of shape (n, d_in)
        Inputs, at least three.
    B : array-like of shape (n, d_out)
        Their outputs.
    scales : sequence of float
        Multipliers of the input kernel's bandwidth to try.
    regs : sequence of float
        Regularisations ``eps`` to try.
    kernel_in : Kernel with a ``scale`` parameter, optional
        The input kernel; Gaussian with the median heuristic by default.
    kernel_out : Kernel, optional
        The output kernel (fitted on ``B``); Gaussian with the median heuristic by default.

    Returns
    -------
    cme : ConditionalEmbedding
        ``method="exact"``, fitted on all pairs with the chosen parameters.
    table : list of dict
        One row per grid point: ``scale``, ``reg``, ``loo``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> A = rng.normal(size=(100, 1)); B = A + 0.1 * rng.normal(size=(100, 1))
    >>> cme, table = select_conditional_embedding(A, B, scales=(0.5, 1.0), regs=(1e-3, 1e-1))
    >>> len(table)
    4
    """
    A = check_matrix(A, "A", min_samples=3)
    B = check_matrix(B, "B", min_samples=3)
    check_same_length("A", A, "B", B)
    scales, regs = check_positive_values(scales, "scales"), check_positive_values(regs, "regs")
    kernel_in = GaussianKernel("median") if kernel_in is None else kernel_in
    kernel_out = clone(GaussianKernel("median") if kernel_out is None else kernel_out).fit(B)
    G_out = kernel_out(B)
    n = A.shape[0]
    table = []
    for scale in scales:
        k_in = clone(kernel_in).set_params(scale=scale).fit(A)
        lam, U = eigh(k_in(A))
        lam = np.maximum(lam, 0.0)
        M = U.T @ G_out @ U
        for reg in regs:
            table.append({"scale": float(scale), "reg": float(reg),
                          "loo": _loo_from_eig(U, lam, M, n, reg)})
    best = min(table, key=lambda row: row["loo"])
    cme = ConditionalEmbedding(
        kernel_in=clone(kernel_in).set_params(scale=best["scale"]),
        kernel_out=kernel_out,
        reg=best["reg"],
        method="exact",
    ).fit(A, B)
    return cme, table
