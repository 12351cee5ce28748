"""The exact-to-tolerance low-rank paths against the dense computations they replace.

Prints, in one run, time and largest relative difference for
- the kNN CKME local solves, ``ConditionalEmbedding(method="knn", solver="auto")`` (pivoted
  Cholesky + Woodbury where a neighbourhood's Gram is of low rank) against ``solver="dense"``
  (batched Cholesky), 1,000 queries;
- the kernel Bayes' rule update, ``KernelBayesRule(solver="auto")`` (Woodbury on G_z ~ L L^T,
  within its stated error bound) against ``solver="dense"``, iw and original, on the oscillation
  system, per update from the uniform prior.

Usage:  python benchmarks/low_rank_speed.py [--part {knn,kbr,both}]
"""

import argparse
import time
import warnings

import numpy as np

import kbfilter as kb
from kbfilter.linalg import NumericalWarning


def _timed(f):
    start = time.perf_counter()
    out = f()
    return out, time.perf_counter() - start


def knn_local():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(1_000_000, 2))
    Q = rng.normal(size=(1000, 2))
    print("kNN CKME local solves, 1,000 queries (Gaussian kernel, median bandwidth, reg 1e-4)")
    for m in (200, 800, 1600):
        results, timings = {}, {}
        for solver in ("auto", "dense"):
            cme = kb.ConditionalEmbedding(reg=1e-4, method="knn", n_neighbors=m, solver=solver).fit(A, A)
            (_, results[solver]), timings[solver] = _timed(lambda: cme.local_weights(Q))
        diff = np.max(np.abs(results["auto"] - results["dense"])) / np.max(np.abs(results["dense"]))
        print(f"  m={m:5d}: low-rank {timings['auto']:7.3f} s, dense {timings['dense']:7.3f} s, "
              f"x{timings['dense'] / timings['auto']:5.1f}, max rel diff {diff:.1e}")


def kbr_update():
    print("kernel Bayes' rule update per step (oscillation, scale 1, 50 observations, uniform prior)")
    system = kb.systems.Oscillation()
    for T in (500, 1000, 2000):
        states, obs = system.simulate(T, rng=1)
        zs = system.simulate(50, rng=2)[1]
        for rule, reg_update in (("iw", 1e-3), ("original", 1e-2)):
            rules = {solver: kb.KernelBayesRule(rule, reg_prior=1e-3, reg_update=reg_update, solver=solver)
                     .fit(states, obs) for solver in ("auto", "dense")}
            if rules["auto"].solver_ != "low_rank":
                print(f"  T={T} {rule}: G_z not of low rank at this bandwidth; dense path only")
                continue
            timings, results = {}, {}
            for solver, kbr in rules.items():
                mu = kbr.projection(kbr.prior_values(None))
                vectors = [kbr.observation_vectors(z) for z in zs]
                W, seconds = _timed(lambda: np.hstack([kbr.weights_from_projection(mu, v, check_input=False)[0]
                                                       for v in vectors]))
                results[solver], timings[solver] = W, seconds / len(zs)
            diff = np.max(np.abs(results["auto"] - results["dense"])) / np.max(np.abs(results["dense"]))
            print(f"  T={T:5d} {rule:8s} rank {rules['auto'].obs_factor_.shape[1]:4d}: low-rank "
                  f"{1e3 * timings['auto']:7.2f} ms, dense {1e3 * timings['dense']:8.2f} ms, "
                  f"x{timings['dense'] / timings['auto']:5.1f}, max rel diff {diff:.1e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("knn", "kbr", "both"), default="both",
                        help="the kNN CKME solves, the kernel Bayes' rule update, or both (default)")
    part = parser.parse_args().part
    warnings.simplefilter("ignore", NumericalWarning)
    if part in ("knn", "both"):
        knn_local()
    if part in ("kbr", "both"):
        kbr_update()
