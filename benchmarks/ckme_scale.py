"""How the CKME methods scale: fit time, 1,000 queries, peak memory, accuracy (the localized CKME paper §3-4).

Model: the localized CKME paper §5.1, (a, b) in R^2 x R^2 jointly Gaussian with a random covariance (one fixed
seed, so every n sees the same distribution). Each (method, n) runs in its own child process so
its peak resident memory (``ru_maxrss``) is its own.

Hyperparameters are chosen on a separate validation set of 300 pairs by the held-out CKME loss
(algorithms §3), never by hand: ``knn`` over (n_neighbors, reg), ``exact`` over reg. The other
methods reuse knn's reg and take ``rank`` = 200 (random subsample, Nyström, random Fourier features).

Accuracy: ``mean err`` is the RMSE of the predicted conditional mean against the true one,
``RKHS err`` the mean RKHS distance to the true conditional embedding (closed form, algorithms
§1). The latter needs ``w^T G w``, O(n^2) per query for dense weights, so it is printed for dense
methods only while n <= 20,000.

Usage:  python benchmarks/ckme_scale.py [--sizes 10000 100000 1000000] [--methods ...] [--quick]
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from kbfilter import ConditionalEmbedding, GaussianKernel
from kbfilter.closed_forms import conditional_rkhs_errors, random_joint_gaussian
from kbfilter.rules.conditional import weighted_sq_norms

N_VALIDATION = 300
N_QUERIES = 1000
KNN_GRID = {"n_neighbors": (100, 200, 400, 800, 1600), "reg": (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)}
EXACT_REGS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
RANK = 200
DENSE_RKHS_MAX_N = 20_000


def make_data(n, seed):
    model_rng = np.random.default_rng(seed)
    V, (gain, offset, cond_cov) = random_joint_gaussian(2, 2, model_rng)
    rng = np.random.default_rng([seed, n])

    def draw(size):
        AB = rng.multivariate_normal(np.zeros(4), V, size=size)
        return AB[:, :2], AB[:, 2:]

    train, val, test = draw(n), draw(N_VALIDATION), draw(N_QUERIES)
    # one output kernel for every n, so RKHS errors are comparable across n
    kernel_out = GaussianKernel("median").fit(draw(1000)[1])
    return train, val, test, (gain, offset, cond_cov), kernel_out


def tune(method, A, B, val, kernel_out):
    grid = (
        [{"n_neighbors": m, "reg": r} for m in KNN_GRID["n_neighbors"] for r in KNN_GRID["reg"]]
        if method == "knn" else [{"reg": r} for r in EXACT_REGS]
    )
    scored = []
    for params in grid:
        if params.get("n_neighbors", 0) > len(A):
            continue
        cme = ConditionalEmbedding(GaussianKernel("median"), kernel_out, method=method, **params).fit(A, B)
        scored.append((cme.held_out_loss(*val), params))
    return min(scored, key=lambda s: s[0])[1]


def child(method, n, seed):
    (A, B), val, (Q, _), (gain, offset, cond_cov), kernel_out = make_data(n, seed)
    start = time.perf_counter()
    if method in ("knn", "exact"):
        params = tune(method, A, B, val, kernel_out)
    else:
        knn_reg = tune("knn", A, B, val, kernel_out)["reg"]
        params = {"reg": knn_reg, "rank": RANK}
    tune_seconds = time.perf_counter() - start

    cme = ConditionalEmbedding(GaussianKernel("median"), kernel_out, method=method, random_state=seed, **params)
    start = time.perf_counter()
    cme.fit(A, B)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mean = cme.predict_mean(Q)
    query_seconds = time.perf_counter() - start

    truth = Q @ gain.T + offset
    row = {
        "method": method, "n": n, "params": params, "tune_s": tune_seconds, "fit_s": fit_seconds,
        "query_s": query_seconds, "mean_err": float(np.sqrt(np.mean(np.sum((mean - truth) ** 2, axis=1)))),
        "rkhs_err": None,
    }
    if method in ("knn", "random") or n <= DENSE_RKHS_MAX_N:
        W = cme.weights(Q)
        sq = weighted_sq_norms(W, B, kernel_out)
        row["rkhs_err"] = float(np.mean(
            conditional_rkhs_errors(W, B, Q, gain, offset, cond_cov, kernel_out.bandwidth_, sq)))
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5, 10**6])
    parser.add_argument("--methods", nargs="+", default=["exact", "knn", "nystrom", "rff", "random", "nw"])
    parser.add_argument("--exact-max", type=int, default=10**4, help="largest n for the exact method")
    parser.add_argument("--quick", action="store_true", help="sizes 2000 and 20000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.seed)
        return
    sizes = [2000, 20000] if args.quick else args.sizes
    rows = []
    header = (f"{'method':8} {'n':>8} {'tune s':>7} {'fit s':>7} {'1k q s':>7} {'total s':>8} "
              f"{'peak MB':>8} {'mean err':>9} {'RKHS err':>9}  params")
    print(header)
    for n in sizes:
        for method in args.methods:
            if method == "exact" and n > args.exact_max:
                continue
            proc = subprocess.run(
                [sys.executable, __file__, "--child", method, str(n), "--seed", str(args.seed)],
                capture_output=True, text=True,
            )
            if proc.returncode != 0:
                print(f"{method:8} {n:>8}  failed: {proc.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(r)
            rkhs = "n/a" if r["rkhs_err"] is None else f"{r['rkhs_err']:.4f}"
            print(f"{method:8} {n:>8} {r['tune_s']:7.2f} {r['fit_s']:7.2f} {r['query_s']:7.2f} "
                  f"{r['fit_s'] + r['query_s']:8.2f} {r['peak_mb']:8.0f} {r['mean_err']:9.4f} {rkhs:>9}  "
                  f"{r['params']}", flush=True)
    exact = {r["n"]: r for r in rows if r["method"] == "exact"}
    if exact:
        print("\nspeed-up of fit + 1,000 queries against exact at the same n:")
        for r in rows:
            if r["n"] in exact and r["method"] != "exact":
                e = exact[r["n"]]
                ratio = (e["fit_s"] + e["query_s"]) / (r["fit_s"] + r["query_s"])
                print(f"  {r['method']:8} n={r['n']:<8} x{ratio:.1f}")
        ref = exact[max(exact)]
        for r in rows:
            if r["method"] == "knn" and r["n"] == max(sizes) and r["rkhs_err"] is not None and ref["rkhs_err"]:
                print(f"\nknn at n={r['n']}: RKHS error {r['rkhs_err']:.4f} vs exact at n={ref['n']}: "
                      f"{ref['rkhs_err']:.4f} (ratio {r['rkhs_err'] / ref['rkhs_err']:.2f}); "
                      f"fit + 1,000 queries {r['fit_s'] + r['query_s']:.2f} s, peak {r['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
