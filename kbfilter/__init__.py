"""kbfilter: nonparametric state-space filtering with kernel Bayes' rule.

The documentation (``docs/``, built with Sphinx) has the user guide, the API reference and the
algorithms in the library's notation; docstrings cite its sections as "algorithms §N".
"""

from . import features, filters, progress, stats, systems
from .embedding import KernelMean
from .filters import KernelBayesFilter, KernelMonteCarloFilter, LearnedMotionFilter, kernel_smoother
from .kernel_approximation import NystromKernel, RandomFourierKernel
from .kernels import GaussianKernel, LaplaceKernel, LinearKernel, median_distance
from .linalg import NumericalWarning
from .threads import blas_threads, set_blas_threads
from .tuning import tune_filter
from .two_sample import mmd_test
from .rules import (
    ConditionalEmbedding,
    JointKernelMean,
    KernelBayesRule,
    kernel_chain_rule,
    kernel_sum_rule,
    kulsif_weights,
    loo_loss,
    select_conditional_embedding,
)

__version__ = "0.1.0"

# Loaded on first use: the benchmark brings joblib's workers and tqdm, the plots matplotlib, the
# datasets the recorded tracks' reader, and a filter needs none of them.
_LAZY_SUBMODULES = ("bench", "plots", "datasets")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "features",
    "filters",
    "progress",
    "stats",
    "systems",
    "KernelBayesFilter",
    "kernel_smoother",
    "KernelMonteCarloFilter",
    "LearnedMotionFilter",
    "tune_filter",
    "mmd_test",
    "GaussianKernel",
    "LaplaceKernel",
    "LinearKernel",
    "NystromKernel",
    "RandomFourierKernel",
    "median_distance",
    "KernelMean",
    "NumericalWarning",
    "blas_threads",
    "set_blas_threads",
    "ConditionalEmbedding",
    "loo_loss",
    "select_conditional_embedding",
    "kernel_sum_rule",
    "kernel_chain_rule",
    "JointKernelMean",
    "kulsif_weights",
    "KernelBayesRule",
]
