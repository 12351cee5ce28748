"""Linear operators over the training states: what a fitted filter applies at every step.

The transition matrix and the KuLSIF/KBR projection are ``T x T`` in the mathematics, but only
the exact method stores them as dense arrays. A localized transition is sparse, and a low-rank
kernel gives ``left @ right.T`` with ``left`` and ``right`` of shape (T, r):
O(T r) memory and O(T r) work a product. Each class here is one of these shapes, with the same
small surface (``@``, ``adjoint``, ``shape``, ``nbytes``, ``toarray``, ``placed``), so a filter built on any of
them runs the same loop.

Examples
--------
>>> import numpy as np
>>> U = np.array([[1.0], [2.0], [0.0]])
>>> op = LowRankOperator(U, U)
>>> op @ np.array([1.0, 1.0, 1.0])
array([3., 6., 0.])
>>> op.toarray().shape
(3, 3)
"""

import numpy as np
import scipy.sparse as sp

from ._validation import check_indices, check_saved_values
from .persistence import persistent

__all__ = ["Operator", "DenseOperator", "SparseOperator", "LowRankOperator"]


class Operator:
    """Common surface of the operators: ``op @ v`` for a vector or a matrix of columns."""

    shape = (0, 0)

    def __matmul__(self, v):
        raise NotImplementedError

    def adjoint(self, v):
        """The transpose applied to ``v``: ``op.T @ v`` without forming the transpose (a smoother's
        backward pass runs the transition this way).

        Parameters
        ----------
        v : ndarray of shape (shape[0],) or (shape[0], k)
            A vector or columns.

        Returns
        -------
        ndarray of shape (shape[1],) or (shape[1], k)
            The product.
        """
        raise NotImplementedError

    def toarray(self):
        """The operator as a dense array (for tests and small problems).

        Returns
        -------
        ndarray of shape ``shape``
            The matrix the operator applies.
        """
        return self @ np.eye(self.shape[1])

    @property
    def nbytes(self):
        """Memory held by the operator's arrays, in bytes."""
        raise NotImplementedError

    def placed(self, rows, n_rows):
        """The ``n_rows x n`` operator whose row ``rows[i]`` is row ``i`` of this one; other rows are 0.

        Parameters
        ----------
        rows : array of int, of length ``shape[0]``
            Where each row goes: distinct indices in ``[0, n_rows)``.
        n_rows : int
            The number of rows of the result.

        Returns
        -------
        Operator
            Of the same kind.

        Raises
        ------
        ValueError
            When ``rows`` has the wrong length, repeats an index or points outside the result.
        """
        raise NotImplementedError

    def _after_load(self):
        # a saved file is untrusted, and an operator may be loaded on its own: what it holds would
        # come out of every product
        for name, values in self._held().items():
            check_saved_values(values, name)

    def _held(self):
        """The arrays of values the operator holds, by name."""
        raise NotImplementedError

    def _placement(self, rows, n_rows):
        """``rows`` checked as :meth:`placed` states: distinct indices in ``[0, n_rows)``, one a row."""
        return check_indices(rows, "rows", n_rows, length=self.shape[0], distinct=True)


def _two_dimensional(matrix):
    if matrix.ndim != 2:
        raise ValueError(f"matrix: expected a 2-D array, got shape {matrix.shape}")
    return matrix


@persistent("matrix")
class DenseOperator(Operator):
    """A dense matrix.

    Parameters
    ----------
    matrix : ndarray of shape (m, n)
        The matrix.
    """

    def __init__(self, matrix):
        self.matrix = _two_dimensional(np.asarray(matrix, dtype=np.float64))
        self.shape = self.matrix.shape

    def _held(self):
        return {"matrix": self.matrix}

    def __matmul__(self, v):
        return self.matrix @ v

    def adjoint(self, v):
        return self.matrix.T @ v

    def toarray(self):
        return self.matrix.copy()

    @property
    def nbytes(self):
        """Memory held by the operator's arrays, in bytes."""
        return self.matrix.nbytes

    def placed(self, rows, n_rows):
        out = np.zeros((n_rows, self.shape[1]))
        out[self._placement(rows, n_rows)] = self.matrix
        return DenseOperator(out)


@persistent("matrix")
class SparseOperator(Operator):
    """A sparse matrix, kept in CSR form (row-major products are the fast ones).

    Parameters
    ----------
    matrix : scipy.sparse matrix of shape (m, n)
        The matrix (converted to CSR).
    """

    def __init__(self, matrix):
        if not sp.issparse(matrix):  # scipy would read a 1-D array as one row
            matrix = _two_dimensional(np.asarray(matrix, dtype=np.float64))
        self.matrix = sp.csr_matrix(matrix, dtype=np.float64)
        self.shape = self.matrix.shape

    def _held(self):
        return {"matrix": self.matrix.data}

    def __matmul__(self, v):
        return self.matrix @ v

    def adjoint(self, v):
        return self.matrix.T @ v

    def toarray(self):
        return self.matrix.toarray()

    @property
    def nbytes(self):
        """Memory held by the operator's arrays, in bytes."""
        m = self.matrix
        return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes

    def transposed(self):
        """The transpose, as a sparse operator of its own (its rows are this one's columns).

        Returns
        -------
        SparseOperator
            Of shape ``shape[::-1]``.
        """
        return SparseOperator(self.matrix.T)

    def placed(self, rows, n_rows):
        rows = self._placement(rows, n_rows)
        select = sp.csr_matrix((np.ones(rows.size), (rows, np.arange(rows.size))), shape=(n_rows, rows.size))
        return SparseOperator(select @ self.matrix)


@persistent("left", "right")
class LowRankOperator(Operator):
    """``left @ right.T`` with ``left`` (m, r) and ``right`` (n, r): O((m + n) r) memory and work a
    product, never an ``m x n`` array.

    Regularised solves are folded into the factors when the operator is built (e.g.
    ``U (U^T U + c I)^{-1} U^T`` is ``left = U``, ``right = U (U^T U + c I)^{-1}``), so a product
    is two matrix-vector products.

    Parameters
    ----------
    left : ndarray of shape (m, r)
        The left factor.
    right : ndarray of shape (n, r)
        The right factor.
    """

    def __init__(self, left, right):
        self.left = np.asarray(left, dtype=np.float64)
        self.right = np.asarray(right, dtype=np.float64)
        if self.left.ndim != 2 or self.right.ndim != 2 or self.left.shape[1] != self.right.shape[1]:
            raise ValueError(f"left, right: expected two 2-D arrays with the same number of columns, got shapes "
                             f"{self.left.shape} and {self.right.shape}")
        self.shape = (self.left.shape[0], self.right.shape[0])

    def _held(self):
        return {"left": self.left, "right": self.right}

    def __matmul__(self, v):
        return self.left @ (self.right.T @ v)

    def adjoint(self, v):
        return self.right @ (self.left.T @ v)

    @property
    def rank(self):
        """``r``, the number of columns of the factors."""
        return self.left.shape[1]

    @property
    def nbytes(self):
        """Memory held by the operator's arrays, in bytes."""
        return self.left.nbytes + self.right.nbytes

    def placed(self, rows, n_rows):
        left = np.zeros((n_rows, self.rank))
        left[self._placement(rows, n_rows)] = self.left
        return LowRankOperator(left, self.right)
