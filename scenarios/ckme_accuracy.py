"""Ground-truth accuracy of every CKME method (the localized CKME paper §5.1; algorithms §1, §3).

(a, b) in R^2 x R^2 is jointly Gaussian with a random covariance V = M^T M. For each trial and
training size n, every method estimates the conditional embedding of b given test inputs a;
we report the RKHS-norm error against the closed-form conditional embedding, and the RMSE of
the mean and mode estimates against a draw of b from the true conditional (which therefore
never reaches 0), together with the time to fit and answer the queries.

Usage:  python scenarios/ckme_accuracy.py [--quick] [--trials 30] [--out results/ckme_accuracy]
"""

import csv
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

from kbfilter import ConditionalEmbedding, GaussianKernel
from kbfilter.cli import integer_at_least, study_parser, workers
from kbfilter.closed_forms import conditional_rkhs_errors, random_joint_gaussian
from kbfilter.rules.conditional import weighted_sq_norms

METHODS = ("exact", "knn", "nw", "random", "nystrom", "icf", "rff")


def one_trial(seed, n_values, n_queries):
    rng = np.random.default_rng(seed)
    V, (gain, offset, cond_cov) = random_joint_gaussian(2, 2, rng)
    rows = []
    for n in n_values:
        AB = rng.multivariate_normal(np.zeros(4), V, size=n)
        A, B = AB[:, :2], AB[:, 2:]
        Q = rng.multivariate_normal(np.zeros(2), V[:2, :2], size=n_queries)
        Y = Q @ gain.T + offset + rng.multivariate_normal(np.zeros(2), cond_cov, size=n_queries)
        m = int(min(n, np.ceil(n ** (2 / 3))))  # the localized CKME paper §5.4: neighbourhood n^(2/3)
        kernel_out = GaussianKernel("median").fit(B)
        s_out = kernel_out.bandwidth_
        for method in METHODS:
            cme = ConditionalEmbedding(GaussianKernel("median"), kernel_out, reg=1e-3 / np.sqrt(n),
                                       method=method, n_neighbors=m, rank=m, random_state=rng.integers(2**31))
            start = time.perf_counter()
            cme.fit(A, B)
            W = cme.weights(Q)
            mean = cme.predict_mean(Q)
            elapsed = time.perf_counter() - start
            mode = cme.predict_mode(Q)
            err = conditional_rkhs_errors(W, B, Q, gain, offset, cond_cov, s_out, weighted_sq_norms(W, B, kernel_out))
            rows.append({
                "trial": seed, "n": n, "method": method, "rkhs_error": float(err.mean()),
                "mse_mean": float(np.mean(np.sum((mean - Y) ** 2, axis=1))),
                "mse_mode": float(np.mean(np.sum((mode - Y) ** 2, axis=1))),
                "seconds": elapsed,
            })
    return rows


def summarise(rows):
    table = []
    for n in sorted({r["n"] for r in rows}):
        for method in METHODS:
            sel = [r for r in rows if r["n"] == n and r["method"] == method]
            table.append({
                "n": n, "method": method, "trials": len(sel),
                "rkhs_error": np.mean([r["rkhs_error"] for r in sel]),
                "rmse_mean": np.sqrt(np.mean([r["mse_mean"] for r in sel])),
                "rmse_mode": np.sqrt(np.mean([r["mse_mode"] for r in sel])),
                "seconds": np.mean([r["seconds"] for r in sel]),
            })
    return table


def plot(table, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for method in METHODS:
        sel = [r for r in table if r["method"] == method]
        n = [r["n"] for r in sel]
        for ax, key in zip(axes[:3], ("rkhs_error", "rmse_mean", "rmse_mode")):
            ax.plot(n, [r[key] for r in sel], marker="o", label=method)
        axes[3].plot([r["seconds"] for r in sel], [r["rkhs_error"] for r in sel], marker="o", label=method)
    for ax, title in zip(axes, ("RKHS-norm error vs n", "RMSE of mean vs n", "RMSE of mode vs n", "RKHS error vs time")):
        ax.set_title(title)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[:3]:
        ax.set_xlabel("training size n")
    axes[3].set_xlabel("seconds (fit + queries)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="n up to 1000, 3 trials unless --trials says (about a minute)")
    parser.add_argument("--trials", type=integer_at_least(1), default=None, help="trials (default 30, 3 with --quick)")
    parser.add_argument("--queries", type=integer_at_least(1), default=20, help="test inputs per trial")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=workers, default=1)
    parser.add_argument("--out", default="results/ckme_accuracy")
    args = parser.parse_args(argv)
    n_values = (100, 300, 1000) if args.quick else (100, 200, 500, 1000, 2000, 4000)
    trials = args.trials if args.trials is not None else 3 if args.quick else 30
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(trials)]
    results = Parallel(n_jobs=args.jobs)(
        delayed(one_trial)(s, n_values, args.queries) for s in tqdm(seeds, desc="trials")
    )
    table = summarise([r for rows in results for r in rows])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    lines = ["| n | method | RKHS error | RMSE mean | RMSE mode | seconds |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['n']} | {r['method']} | {r['rkhs_error']:.4f} | {r['rmse_mean']:.4f} | "
              f"{r['rmse_mode']:.4f} | {r['seconds']:.4f} |" for r in table]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    plot(table, out / "ckme_accuracy.png")
    print("\n".join(lines))
    print(f"\nwrote {out / 'table.csv'}, {out / 'table.md'}, {out / 'ckme_accuracy.png'}")


if __name__ == "__main__":
    main()
