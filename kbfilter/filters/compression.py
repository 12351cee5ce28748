"""Which training transitions a compressed kernel Bayes filter keeps.

A filter learned from ``T`` logged steps holds ``T x T`` operators and pays ``O(T^2)`` a step.
Kernel herding (Chen, Welling and Smola 2010; as Kanagawa et al. (2016) use it to compress
kernel means) picks ``m`` of the logged transitions whose equally weighted embedding stays close
to the embedding of all of them, so a filter fitted on the ``m`` picks loses little.

Each transition is the triple ``(x_t, x_{t+1}, z_{t+1})``: where the state came from, where it
went, and what was seen there. The filter learns its transition from the first two and its
observation model from the last two, so the triple is what must be represented.
"""

import numpy as np

from .._validation import check_choice, check_int, check_matrix, check_same_length
from ..embedding import HERD_GRAM_ENTRIES, herd
from ..kernels import Kernel

__all__ = ["kept_transitions", "HERD_REFERENCE"]

#: the joint embedding of more than this many transitions is estimated on a seeded random
#: subset of this size, which bounds herding's cost at ``O(T * HERD_REFERENCE)`` kernel values
HERD_REFERENCE = 4000


def _joint_gram(blocks, kernels, rows, cols):
    """The product kernel over the triple, between transitions ``rows`` and ``cols``."""
    gram = np.ones((len(rows), len(cols)))
    for data, kernel in zip(blocks, kernels):
        gram *= kernel(data[rows], data[cols])
    return gram


def kept_transitions(previous, following, observed, m, method, kernels, rng):
    """Choose ``m`` of ``n`` logged transitions ``(x_t, x_{t+1}, z_{t+1})``.

    Parameters
    ----------
    previous, following : ndarray of shape (n, dim_x)
        ``x_t`` and ``x_{t+1}`` of each transition.
    observed : ndarray of shape (n, dim_z)
        ``z_{t+1}``.
    m : int
        How many to keep, at most ``n``.
    method : {"herding", "random"}
        ``"herding"``: greedy kernel herding without repeats of the transitions' joint embedding
        under the product kernel ``k_x(x_t, .) k_x(x_{t+1}, .) k_z(z_{t+1}, .)``; ``"random"``: a
        uniformly drawn subset.
    kernels : tuple of two fitted Kernels
        ``(k_x, k_z)``: the filter's own state and observation kernels, so herding represents
        the embedding at the resolution the filter works at.
    rng : numpy.random.Generator
        Draws the random subset, or the reference transitions of the joint embedding when there
        are more than :data:`HERD_REFERENCE`.

    Returns
    -------
    ndarray of int, shape (m,)
        Indices of the kept transitions, sorted.
    """
    check_choice(method, "compression", ("herding", "random"))
    previous = check_matrix(previous, "previous", allow_1d=False)
    n = previous.shape[0]
    following = check_matrix(following, "following", n_features=previous.shape[1], allow_1d=False)
    observed = check_matrix(observed, "observed", allow_1d=False)
    check_same_length("previous", previous, "following", following)
    check_same_length("previous", previous, "observed", observed)
    if not (isinstance(kernels, (tuple, list)) and len(kernels) == 2 and all(isinstance(k, Kernel) for k in kernels)):
        raise ValueError(f"kernels: expected a pair of fitted kbfilter Kernels (k_x, k_z), got {kernels!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng: expected a numpy Generator, got {rng!r}")
    m = check_int(m, "compress", minimum=2, maximum=n)
    if method == "random":
        return np.sort(rng.choice(n, m, replace=False))
    blocks = (previous, following, observed)
    kernel_x, kernel_z = kernels
    kernels = (kernel_x, kernel_x, kernel_z)
    everything = np.arange(n)
    reference = everything if n <= HERD_REFERENCE else np.sort(rng.choice(n, HERD_REFERENCE, replace=False))
    step = max(1, HERD_GRAM_ENTRIES // len(reference))
    target = np.concatenate([_joint_gram(blocks, kernels, everything[i : i + step], reference).mean(axis=1)
                             for i in range(0, n, step)])
    picked = herd(target, lambda j: _joint_gram(blocks, kernels, everything, [j])[:, 0], m, distinct=True)
    return np.sort(picked)
