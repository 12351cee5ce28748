"""Robot localization from a camera: known motion, learned image likelihood.

The study of Fukumizu (2014) and Kanagawa et al. (2016), on the procedural room of
``kbfilter.systems.RobotInRoom``: a robot explores, recording its poses, odometry and camera
images; then, on a new run, it must say where it is from the images and the odometry alone.

Methods (each tuned on the last 200 training steps unless it has no hyperparameters):

- ``nai``: the pose of the most similar training image (no motion model);
- ``nn-pf``: a particle filter with the motion model and a likelihood voted by the nearest
  training images (Vlassis et al. 2002);
- ``kbf``: the kernel Bayes filter with a transition learned given the odometry;
- ``kmc-iw`` / ``kmc-original``: the Kernel Monte Carlo filter (motion model sampled, image
  likelihood learned, kernel herding);
- ``oracle``: a particle filter with the true renderer's pixel likelihood (a reference).

Reported per method: the position MSE and the mean absolute heading error (wrapped), mean and
standard deviation over runs, the paired Wilcoxon p-value of ``kmc-iw`` against each, and the
time per step. Writes ``results.json`` (with provenance) and ``room.png`` (the room from above:
true path, estimates, and the KMC particles at a few steps).

Usage:  python scenarios/localization.py [--runs 10] [--train-lengths 200 1000 5000]
        [--features blur raw] [--methods ...] [--particles 1000] [--out results/localization]
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon
from tqdm.auto import tqdm

import kbfilter as kb
from kbfilter.bench.report import provenance
from kbfilter.filters import NearestImage, NearestNeighbourParticleFilter, ParticleFilter
from kbfilter.linalg import NumericalWarning
from kbfilter.systems.robot import heading, wrapped_angle

KERNEL_GRID = {"scale": (0.05, 0.1, 0.2, 0.5, 1.0), "scale_z": (0.1, 0.2, 0.5, 1.0),
               "reg_prior": (1e-4, 1e-3, 1e-2, 1e-1), "reg_update": (1e-4, 1e-3, 1e-2, 1e-1)}
NN_GRID = {"n_neighbors": (3, 10, 30), "scale": (0.02, 0.05, 0.1, 0.2)}
METHODS = ("nai", "nn-pf", "kbf", "kmc-iw", "kmc-original", "oracle")
REFERENCE = "kmc-iw"


def build(name, robot, features, particles, seed):
    """The method's unfitted filter and its tuning grid (None: fitted with its defaults)."""
    feats = None if features == "raw" else "auto"
    if name == "nai":
        return NearestImage(features=feats), None
    if name == "nn-pf":
        return NearestNeighbourParticleFilter(robot, n_particles=particles, features=feats, random_state=seed), NN_GRID
    if name == "kbf":
        return kb.KernelBayesFilter(features=feats), KERNEL_GRID
    if name.startswith("kmc"):
        return kb.KernelMonteCarloFilter(robot, n_particles=particles, rule=name.split("-")[1], features=feats,
                                         random_state=seed), KERNEL_GRID
    return ParticleFilter(robot, n_particles=particles, rng=seed), None


def errors(means, states):
    """Position MSE and mean absolute heading error (radians)."""
    position = float(np.mean(np.sum((means[:, :2] - states[:, :2]) ** 2, axis=1)))
    return position, float(np.mean(np.abs(wrapped_angle(heading(means) - heading(states)))))


def run(robot, seed, train_length, test_length, methods, features, particles, keep=False):
    rng = np.random.default_rng(seed)
    poses, controls, images = robot.simulate(train_length, rng)
    test_poses, test_controls, test_images = robot.simulate(test_length, rng)
    row = {"position_mse": {}, "heading_mae": {}, "ms_per_step": {}, "params": {}}
    estimates = {}
    for name in methods:
        template, grid = build(name, robot, features, particles, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (NumericalWarning, UserWarning))
            if name == "oracle":
                filt = template
            elif grid is None:
                filt = template.fit(poses, images, controls)
            else:
                filt = kb.tune_filter(template, poses, images, param_grid=grid, controls=controls, n_jobs=1,
                                      progress=False, validation_length=min(200, train_length // 4))
                row["params"][name] = filt.best_params_
            start = time.perf_counter()
            if keep and name == REFERENCE:  # step by step, to keep its particles at a few steps for the figure
                means, snapshots = [], []
                for t, (z, u) in enumerate(zip(test_images, test_controls)):
                    filt.predict(u)
                    filt.update(z)
                    means.append(filt.x_post.copy())
                    if t in (0, 5, 20):
                        snapshots.append(filt.particles.copy())
                means = np.array(means)
                estimates["particles"] = snapshots
            else:
                means = filt.batch_filter(test_images, us=test_controls)[0]
        row["ms_per_step"][name] = 1000 * (time.perf_counter() - start) / test_length
        row["position_mse"][name], row["heading_mae"][name] = errors(means, test_poses)
        if keep:
            estimates[name] = means
    if keep:
        row["trajectory"] = {"states": test_poses, "estimates": estimates}
    return row


def summary_table(rows, methods):
    lines = [f"{'method':<14}{'position MSE':>22}{'heading (deg)':>16}{'p vs ' + REFERENCE:>14}{'ms/step':>9}"]
    ref = np.array([r["position_mse"][REFERENCE] for r in rows]) if REFERENCE in methods else None
    out = {}
    for name in methods:
        pos = np.array([r["position_mse"][name] for r in rows])
        head = np.degrees([r["heading_mae"][name] for r in rows])
        p = float("nan")
        if ref is not None and name != REFERENCE and len(rows) >= 5 and np.any(pos != ref):
            p = float(wilcoxon(ref, pos).pvalue)
        ms = float(np.mean([r["ms_per_step"][name] for r in rows]))
        out[name] = {"position_mse_mean": float(pos.mean()), "position_mse_std": float(pos.std()),
                     "heading_mae_deg_mean": float(head.mean()), "wilcoxon_p_vs_reference": p, "ms_per_step": ms,
                     "reference_wins": int(np.sum(ref < pos)) if ref is not None else None}
        lines.append(f"{name:<14}{pos.mean():>13.4f} ± {pos.std():.4f}{head.mean():>16.1f}{p:>14.3g}{ms:>9.1f}")
    return "\n".join(lines), out


def room_figure(robot, trajectory, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6))
    robot.top_down(ax)
    states = trajectory["states"]
    ax.plot(states[:, 0], states[:, 1], color="black", lw=2, label="true path")
    for name, means in trajectory["estimates"].items():
        if name != "particles":
            ax.plot(means[:, 0], means[:, 1], lw=1, alpha=0.8, label=name)
    for k, particles in enumerate(trajectory["estimates"].get("particles", [])):
        ax.scatter(particles[:, 0], particles[:, 1], s=2, alpha=0.3, label=f"{REFERENCE} particles" if k == 0 else None)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse(argv):
    parser = argparse.ArgumentParser(description="Robot localization: KMC against NAI, NN-PF, KBF and an oracle.")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--train-lengths", type=int, nargs="+", default=[200, 1000, 5000])
    parser.add_argument("--test-length", type=int, default=200)
    parser.add_argument("--features", nargs="+", default=["blur", "raw"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--particles", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/localization")
    parser.add_argument("--force", action="store_true", help="write into an --out that already holds results")
    args = parser.parse_args(argv)
    for name in ("runs", "test_length", "particles"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(args, name)}")
    if args.seed < 0:
        parser.error(f"--seed: expected a non-negative integer, got {args.seed}")
    if any(t < 20 for t in args.train_lengths):
        parser.error(f"--train-lengths: expected at least 20 steps each, got {args.train_lengths}")
    for value in args.features:
        if value not in ("blur", "raw"):
            parser.error(f"--features: expected 'blur' or 'raw', got {value!r}")
    for value in args.methods:
        if value not in METHODS:
            parser.error(f"--methods: expected some of {', '.join(METHODS)}, got {value!r}")
    out = Path(args.out)
    if (out / "results.json").exists() and not args.force:
        parser.error(f"--out: {out} already holds results; pass --force to overwrite or choose another folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".write-test").touch()
        (out / ".write-test").unlink()
    except OSError as exc:
        parser.error(f"--out: cannot write to {out} ({exc.strerror})")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    robot = kb.systems.RobotInRoom()
    out = Path(args.out)
    command = ["scenarios/localization.py"] + list(sys.argv[1:] if argv is None else argv)
    results = {"provenance": provenance(robot, command=command), "settings": vars(args), "tables": {}}
    seeds = np.random.SeedSequence(args.seed).spawn(args.runs)
    for features in args.features:
        for T in args.train_lengths:
            rows = [run(robot, s, T, args.test_length, args.methods, features, args.particles, keep=(i == 0))
                    for i, s in enumerate(tqdm(seeds, desc=f"{features}, T={T}"))]
            text, table = summary_table(rows, args.methods)
            print(f"\n{features} images, {T} training poses, {args.runs} runs\n{text}", flush=True)
            results["tables"][f"{features}-{T}"] = {"summary": table, "params": [r["params"] for r in rows]}
            if features == args.features[0] and T == args.train_lengths[len(args.train_lengths) // 2]:
                room_figure(robot, rows[0]["trajectory"], out / "room.png")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    print(f"\nwrote {out / 'results.json'} and {out / 'room.png'}")


if __name__ == "__main__":
    main()
