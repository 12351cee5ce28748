"""Bayesian kernel learning against the median heuristic in an MMD two-sample test.

Flaxman et al. (2016) §5.1, after Gretton et al. (2012): P is a mixture of bivariate Gaussians
on a 3 x 3 grid (spacing 10) with identity covariances; Q has the same centres, with covariances
rotated by 45 degrees whose eigenvalues have ratio ``eps`` (and determinant 1). With 100 points a
component from each, the MMD test (a permutation null) tells them apart only if the kernel's
bandwidth is of the components' scale: the median pairwise distance is of the grid's. For each
``eps`` and trial we run the test with the median heuristic and with the bandwidth of Bayesian
kernel learning (``GaussianKernel(bandwidth="bkl")``, fitted on the pooled sample) and report
the type II error (the share of trials that fail to reject at level 0.05; at ``eps = 1`` the two
distributions are equal, and it is one minus the type I error). The figure adds the
pseudolikelihood profile against the bandwidth for one pooled sample, with the median marked.

Usage:  python scenarios/bkl_mixture.py [--trials 20] [--jobs 2] [--out results/bkl_mixture]
"""

import json
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

import kbfilter as kb
from kbfilter.bandwidth_learning import bayesian_bandwidth, log_pseudolikelihood
from kbfilter.cli import integer_at_least, study_parser, workers

RATIOS = (1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 15.0)
ALPHA = 0.05
CENTRES = 10.0 * np.array([[i, j] for i in range(3) for j in range(3)])


def mixture_pair(ratio, rng, per_component=100):
    """Samples of P (isotropic components) and Q (rotated components with eigenvalue ratio ``ratio``)."""
    centres = np.repeat(CENTRES, per_component, axis=0)
    P = centres + rng.standard_normal(centres.shape)
    turn = np.array([[1.0, -1.0], [1.0, 1.0]]) / np.sqrt(2.0)
    cov = turn @ np.diag([np.sqrt(ratio), 1.0 / np.sqrt(ratio)]) @ turn.T
    Q = centres + rng.multivariate_normal(np.zeros(2), cov, size=len(centres))
    return P, Q


def one_trial(seed, ratio, n_permutations):
    rng = np.random.default_rng(seed)
    P, Q = mixture_pair(ratio, rng)
    pooled = np.vstack([P, Q])
    row = {"seed": seed, "ratio": ratio}
    for name in ("median", "bkl"):
        kernel = kb.GaussianKernel(bandwidth=name, random_state=seed).fit(pooled)
        result = kb.mmd_test(P, Q, kernel=kb.GaussianKernel(bandwidth=kernel.bandwidth_),
                             n_permutations=n_permutations, random_state=seed)
        row[f"{name}_bandwidth"] = float(kernel.bandwidth_)
        row[f"{name}_pvalue"] = float(result.pvalue)
    return row


def plot(rows, profile, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, label in (("median", "median heuristic"), ("bkl", "Bayesian kernel learning")):
        error = [np.mean([r[f"{name}_pvalue"] >= ALPHA for r in rows if r["ratio"] == e]) for e in RATIOS]
        axes[0].plot(RATIOS, error, "o-", label=label)
    axes[0].set_xlabel("eigenvalue ratio eps")
    axes[0].set_ylabel(f"type II error (alpha = {ALPHA})")
    axes[0].set_title("MMD test, mixtures of 9 Gaussians")
    axes[0].legend()
    bandwidths, values, median, chosen = profile
    axes[1].semilogx(bandwidths, values, "-")
    axes[1].axvline(median, color="C1", ls="--", label=f"median {median:.2f}")
    axes[1].axvline(chosen, color="C2", ls=":", label=f"BKL {chosen:.2f}")
    axes[1].set_xlabel("bandwidth")
    axes[1].set_ylabel("log pseudolikelihood (noise maximised)")
    axes[1].set_title("pseudolikelihood profile, pooled sample, eps = 6")
    axes[1].legend()
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument("--trials", type=integer_at_least(1), default=20)
    parser.add_argument("--permutations", type=integer_at_least(1), default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=workers, default=1)
    parser.add_argument("--out", default="results/bkl_mixture")
    args = parser.parse_args(argv)
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(args.trials)]
    jobs = [(s, e) for e in RATIOS for s in seeds]
    rows = Parallel(n_jobs=args.jobs)(delayed(one_trial)(s, e, args.permutations) for s, e in tqdm(jobs, desc="trials"))

    P, Q = mixture_pair(6.0, np.random.default_rng(args.seed))
    pooled = np.vstack([P, Q])
    fit = bayesian_bandwidth(pooled, random_state=args.seed)
    held = np.isin(pooled, fit.inducing).all(axis=1)
    grid = np.geomspace(0.005 * fit.median, 4 * fit.median, 60)
    profile = (grid, [log_pseudolikelihood(pooled[~held], fit.inducing, s) for s in grid], fit.median, fit.bandwidth)

    lines = [f"mixtures of 9 Gaussians, 100 points a component, {args.trials} trials, "
             f"{args.permutations} permutations, alpha = {ALPHA}", "",
             "| eps | median bandwidth | BKL bandwidth | type II error, median | type II error, BKL |",
             "|---|---|---|---|---|"]
    for e in RATIOS:
        sel = [r for r in rows if r["ratio"] == e]
        mean = lambda key: np.mean([r[key] for r in sel])  # noqa: E731
        miss = lambda name: np.mean([r[f"{name}_pvalue"] >= ALPHA for r in sel])  # noqa: E731
        lines.append(f"| {e:g} | {mean('median_bandwidth'):.2f} | {mean('bkl_bandwidth'):.3f} | "
                     f"{miss('median'):.2f} | {miss('bkl'):.2f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trials.json").write_text(json.dumps(rows, indent=1))
    (out / "table.md").write_text("\n".join(lines) + "\n")
    plot(rows, profile, out / "bkl_mixture.png")
    print("\n".join(lines))
    print(f"\nwrote {out / 'trials.json'}, {out / 'table.md'}, {out / 'bkl_mixture.png'}")


if __name__ == "__main__":
    main()
