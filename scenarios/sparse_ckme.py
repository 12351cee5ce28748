"""Sparse conditional embeddings against incomplete Cholesky at the same number of parameters.

Grünewälder et al. (2012) §5.1: the conditional embedding ``mu(a) = sum_ij M_ij k(a_i, a) l(b_j, .)``
learned from ``n = 200`` pairs is approximated with few non-zero coefficients ``M_ij`` in two
ways: the lasso-like problem solved by FISTA (``ConditionalEmbedding(method="sparse", gamma=...)``,
which sees inputs and outputs), and an incomplete (pivoted) Cholesky factorisation of the input
Gram matrix of rank ``r`` (which sees the inputs only, and whose embedding uses ``r n``
coefficients: ``M = K_PP^{-1} K_P. (K~ + n eps I)^{-1}`` on the pivots ``P``).

The dense embedding is the one a user would fit: its input bandwidth (a multiple of the median
distance) and its regulariser are chosen on a validation set. For each sparsity level we report
the RKHS distance to the dense embedding, ``||mu_M - mu_W|| / ||mu_W||`` in the product space,
and the held-out CKME loss relative to the dense embedding's, on two transitions:

- pendulum: the under-actuated swing-up pendulum's transition, inputs ``(sin theta, cos theta,
  omega, u)`` and outputs ``(sin theta', cos theta', omega')``, states and torques drawn uniformly
  (``theta`` in [-pi, pi], ``omega`` in [-7, 7], ``u`` in [-5, 5]);
- oscillation: ``(x_t, x_{t+1})`` from the oscillation filtering study.

The comparison at equal non-zeros interpolates each trial's incomplete-Cholesky curve (in log
non-zeros) at the sparse embedding's non-zeros.

Usage:  python scenarios/sparse_ckme.py [--trials 5] [--jobs 2] [--out results/sparse_ckme]
"""

import json
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from tqdm import tqdm

import kbfilter as kb
from kbfilter.cli import integer_at_least, study_parser, workers
from kbfilter.linalg import pivoted_cholesky
from kbfilter.rules.conditional import weighted_sq_norms

GAMMAS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
RANKS = (1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 120, 200)
N_TRAIN, N_TEST = 200, 1000
SCALES = (1.0, 0.5, 0.25)
REGS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
MAX_ITER = 20000


def pendulum_pairs(n, rng, dt=0.05, substeps=10, friction=0.05):
    """Transitions of a pendulum (unit mass and length; ``theta = 0`` upright) from uniform states and torques."""
    theta = rng.uniform(-np.pi, np.pi, n)
    omega = rng.uniform(-7.0, 7.0, n)
    u = rng.uniform(-5.0, 5.0, n)
    th, om = theta.copy(), omega.copy()
    h = dt / substeps
    for _ in range(substeps):  # torque 5 < m g l = 9.81: no direct swing-up
        om = om + h * (9.81 * np.sin(th) - friction * om + u)
        th = th + h * om
    scale_in = np.array([1.0, 1.0, 1 / 7.0, 1 / 5.0])  # comparable ranges for one median bandwidth
    A = np.column_stack([np.sin(theta), np.cos(theta), omega, u]) * scale_in
    B = np.column_stack([np.sin(th), np.cos(th), np.clip(om, -7.0, 7.0) / 7.0])
    return A, B


def oscillation_pairs(n, rng):
    states, _ = kb.systems.Oscillation().simulate(n + 1, rng=rng)
    return states[:-1], states[1:]


SYSTEMS = {"pendulum": pendulum_pairs, "oscillation": oscillation_pairs}


def held_out_losses(M, A, B, Q, Y, k_in, k_out):
    """Mean held-out loss ``||l(., y) - mu_M(q)||^2`` of the coefficients ``M``."""
    W = M.T @ k_in(A, Q)
    cross = np.einsum("iq,iq->q", W, k_out(B, Y))
    return float(np.mean(k_out.diag(Y) - 2 * cross + weighted_sq_norms(W, B, k_out)))


def rkhs_distance(M, dense, K, L):
    D = M - dense
    return np.sqrt(np.sum((K @ D) * (D @ L)) / np.sum((K @ dense) * (dense @ L)))


def icf_coefficients(K, rank, reg):
    """The rank-``r`` incomplete-Cholesky embedding's coefficients, non-zero on the pivots' rows."""
    n = K.shape[0]
    factor, pivots = pivoted_cholesky(np.diag(K).copy(), lambda i: K[:, i], rank)
    r = factor.shape[1]
    inner = factor.T @ factor + n * reg * np.eye(r)
    # K_PP^{-1} K_P. (L L^T + n eps I)^{-1} = L_P^{-T} (L^T L + n eps I)^{-1} L^T
    coef = np.zeros((n, n))
    coef[pivots] = np.linalg.solve(factor[pivots].T, np.linalg.solve(inner, factor.T))
    return coef


def one_trial(seed, system):
    rng = np.random.default_rng(seed)
    make = SYSTEMS[system]
    A, B = make(N_TRAIN, rng)
    Q, Y = make(N_TEST, rng)
    V, VY = make(N_TEST, rng)
    # the embedding one would use: the input bandwidth and regulariser chosen on a validation set
    candidates = [kb.ConditionalEmbedding(kernel_in=kb.GaussianKernel("median", scale=scale), reg=reg).fit(A, B)
                  for scale in SCALES for reg in REGS]
    dense_cme = min(candidates, key=lambda cme: cme.held_out_loss(V, VY))
    reg = dense_cme.reg
    k_in, k_out = dense_cme.kernel_in_, dense_cme.kernel_out_
    K, L = k_in(A), k_out(B)
    n = N_TRAIN
    dense = np.linalg.solve(K + n * reg * np.eye(n), np.eye(n))
    base = held_out_losses(dense, A, B, Q, Y, k_in, k_out)
    rows = []
    for gamma in GAMMAS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # counted in diagnostics_ below
            cme = kb.ConditionalEmbedding(kernel_in=dense_cme.kernel_in, reg=reg, method="sparse", gamma=gamma,
                                          max_iter=MAX_ITER).fit(A, B)
        M = cme.coef_.toarray()
        rows.append({"method": "fista", "level": gamma, "nnz": int(cme.coef_.nnz),
                     "distance": rkhs_distance(M, dense, K, L),
                     "test_error": held_out_losses(M, A, B, Q, Y, k_in, k_out) / base,
                     "converged": not cme.diagnostics_["max_iter"]})
    for rank in RANKS:
        M = icf_coefficients(K, rank, reg)
        rows.append({"method": "icf", "level": rank, "nnz": int(np.count_nonzero(M)),
                     "distance": rkhs_distance(M, dense, K, L),
                     "test_error": held_out_losses(M, A, B, Q, Y, k_in, k_out) / base})
    # incomplete Cholesky's curve at the sparse embedding's non-zeros (log-linear interpolation)
    icf = sorted((r["nnz"], r["test_error"], r["distance"]) for r in rows if r["method"] == "icf" and r["nnz"] > 0)
    icf_nnz = np.log([c[0] for c in icf])
    for r in rows:
        if r["method"] == "fista" and r["nnz"] > 0:
            r["icf_test_error"] = float(np.interp(np.log(r["nnz"]), icf_nnz, [c[1] for c in icf]))
            r["icf_distance"] = float(np.interp(np.log(r["nnz"]), icf_nnz, [c[2] for c in icf]))
    # the densest level at which FISTA is still below incomplete Cholesky
    below = [r["nnz"] for r in rows if r["method"] == "fista" and r.get("icf_test_error", 0) > r["test_error"]]
    return {"seed": seed, "system": system, "reg": reg, "scale": dense_cme.kernel_in.scale, "rows": rows,
            "crossover": max(below, default=0) / N_TRAIN**2}


def summarise(trials, system):
    lines = [f"### {system} (n = {N_TRAIN}, {len([t for t in trials if t['system'] == system])} trials)", "",
             "| gamma | non-zeros (fraction) | FISTA distance | ICF distance | FISTA test error / dense | "
             "ICF test error / dense | FISTA better |", "|---|---|---|---|---|---|---|"]
    wins = total = 0
    for gamma in GAMMAS:
        sel = [r for t in trials if t["system"] == system for r in t["rows"]
               if r["method"] == "fista" and r["level"] == gamma and "icf_test_error" in r]
        if not sel:
            continue
        better = sum(r["test_error"] < r["icf_test_error"] for r in sel)
        wins, total = wins + better, total + len(sel)
        mean = lambda key: np.mean([r[key] for r in sel])  # noqa: E731
        lines.append(f"| {gamma:g} | {mean('nnz') / N_TRAIN**2:.4f} | {mean('distance'):.4f} | "
                     f"{mean('icf_distance'):.4f} | {mean('test_error'):.4f} | {mean('icf_test_error'):.4f} | "
                     f"{better}/{len(sel)} |")
    chosen = [(t["scale"], t["reg"]) for t in trials if t["system"] == system]
    crossover = [t["crossover"] for t in trials if t["system"] == system]
    lines += ["", f"FISTA's test error below incomplete Cholesky's at equal non-zeros: {wins}/{total} points; "
              f"densest such level {np.mean(crossover):.3f} of the n^2 coefficients on average "
              f"(range {min(crossover):.3f}-{max(crossover):.3f}); validated (scale, reg): {chosen}"]
    return lines


def plot(trials, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for row, system in zip(axes, SYSTEMS):
        for method, style in (("fista", "o-"), ("icf", "s--")):
            for i, t in enumerate(t for t in trials if t["system"] == system):
                pts = sorted((r["nnz"] / N_TRAIN**2, r["distance"], r["test_error"])
                             for r in t["rows"] if r["method"] == method and r["nnz"] > 0)
                x = [p[0] for p in pts]
                label = {"fista": "sparse (FISTA)", "icf": "incomplete Cholesky"}[method] if i == 0 else None
                color = "C0" if method == "fista" else "C1"
                row[0].plot(x, [p[1] for p in pts], style, color=color, alpha=0.6, label=label)
                row[1].plot(x, [p[2] for p in pts], style, color=color, alpha=0.6, label=label)
        row[0].set_title(f"{system}: distance to the dense embedding")
        row[1].set_title(f"{system}: test error relative to dense")
        for ax in row:
            ax.set_xscale("log")
            ax.set_xlabel("non-zero coefficients / n^2")
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_yscale("log")
        row[1].set_yscale("log")
        row[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument("--trials", type=integer_at_least(1), default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=workers, default=1)
    parser.add_argument("--out", default="results/sparse_ckme")
    args = parser.parse_args(argv)
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(args.trials)]
    jobs = [(s, system) for system in SYSTEMS for s in seeds]
    trials = Parallel(n_jobs=args.jobs)(delayed(one_trial)(s, system) for s, system in tqdm(jobs, desc="trials"))
    lines = []
    for system in SYSTEMS:
        lines += summarise(trials, system) + [""]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trials.json").write_text(json.dumps(trials, indent=1, default=float))
    (out / "table.md").write_text("\n".join(lines))
    plot(trials, out / "sparse_ckme.png")
    print("\n".join(lines))
    print(f"wrote {out / 'trials.json'}, {out / 'table.md'}, {out / 'sparse_ckme.png'}")


if __name__ == "__main__":
    main()
