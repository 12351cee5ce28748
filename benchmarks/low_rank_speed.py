"""The exact-to-tolerance low-rank paths against the dense computations they replace.

Prints, in one run, time and largest relative difference for
- the kNN CKME local solves (pivoted Cholesky + Woodbury vs batched dense Cholesky), 1,000 queries;
- the kernel Bayes' rule update per filtering step, iw and original (Woodbury on G_z ~ L L^T vs
  the dense solve on the support / the dense squared operator), on the oscillation system.

Usage:  python benchmarks/low_rank_speed.py
"""

import time
import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve

import kbfilter as kb
from kbfilter.linalg import NumericalWarning
from kbfilter.rules.conditional import _local_solve


def knn_local():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(1_000_000, 2))
    Q = rng.normal(size=(1000, 2))
    print("kNN CKME local solves, 1,000 queries (Gaussian kernel, median bandwidth, reg 1e-4)")
    for m in (200, 800, 1600):
        cme = kb.ConditionalEmbedding(reg=1e-4, method="knn", n_neighbors=m).fit(A, A)
        idx = cme.neighbors_.kneighbors(Q, return_distance=False)
        local = A[idx]
        kq = cme.kernel_in_.paired(local, Q[:, None, :])
        start = time.perf_counter()
        fast = _local_solve(cme.kernel_in_, local, kq, m * 1e-4)
        t_fast = time.perf_counter() - start
        start = time.perf_counter()
        dense = np.empty_like(fast)
        for rows in np.array_split(np.arange(1000), max(1, 1000 * m * m // 2**22)):
            G = cme.kernel_in_.gram_batched(local[rows])
            G[:, np.arange(m), np.arange(m)] += m * 1e-4
            dense[rows] = cho_solve(cho_factor(G, lower=True), kq[rows][..., None])[..., 0]
        t_dense = time.perf_counter() - start
        diff = np.max(np.abs(fast - dense)) / np.max(np.abs(dense))
        print(f"  m={m:5d}: low-rank {t_fast:7.3f} s, dense {t_dense:7.3f} s, x{t_dense / t_fast:5.1f}, "
              f"max rel diff {diff:.1e}")


def kbr_update():
    print("kernel Bayes' rule update per step (oscillation, scale 1, 50 steps)")
    system = kb.systems.Oscillation()
    for T in (500, 1000, 2000):
        states, obs = system.simulate(T, rng=1)
        for rule, reg_update in (("iw", 1e-3), ("original", 1e-2)):
            kbf = kb.KernelBayesFilter(rule=rule, reg_prior=1e-3, reg_update=reg_update).fit(states, obs)
            rule_ = kbf.rule_
            if rule_.obs_factor_ is None:
                print(f"  T={T} {rule}: G_z not of low rank at this bandwidth; dense path only")
                continue
            zs = system.simulate(50, rng=2)[1]
            mu = kbf.projection_matrix_ @ kbf.weights
            obs_vectors = [rule_.observation_vectors(z[None]) for z in zs]
            timings, results = {}, {}
            factor, residual = rule_.obs_factor_, rule_.obs_residual_
            for name, f, res in (("low-rank", factor, residual), ("dense", None, np.inf)):
                rule_.obs_factor_, rule_.obs_residual_ = f, res
                start = time.perf_counter()
                results[name] = np.hstack([rule_.weights_from_projection(mu, o)[0] for o in obs_vectors])
                timings[name] = (time.perf_counter() - start) / len(zs)
            rule_.obs_factor_, rule_.obs_residual_ = factor, residual
            diff = np.max(np.abs(results["low-rank"] - results["dense"])) / np.max(np.abs(results["dense"]))
            print(f"  T={T:5d} {rule:8s} rank {factor.shape[1]:4d}: low-rank {1e3 * timings['low-rank']:7.2f} ms, "
                  f"dense {1e3 * timings['dense']:8.2f} ms, x{timings['dense'] / timings['low-rank']:5.1f}, "
                  f"max rel diff {diff:.1e}")


if __name__ == "__main__":
    warnings.simplefilter("ignore", NumericalWarning)
    knn_local()
    kbr_update()
