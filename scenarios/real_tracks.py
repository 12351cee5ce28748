"""Learned motion on recorded tracks against the constant-velocity model a tracking engineer writes.

The recorded positions of real ships (AIS, the Solent) or aircraft (ADS-B, OpenSky) are the ground
truth; the sensor is simulated over them: position fixes with Gaussian errors of ``--noise``
metres, missing for stretches of ``--gap`` steps (each step after the first starts one with
probability ``--gap-rate``). Each split holds out 30 % of the vehicles (never parts of one
vehicle's track); on the others we fit

- ``cv``: the constant-velocity Kalman filter, its acceleration noise chosen on the training tracks
  (root mean square velocity change a step, over the step), its first velocity belief the training
  tracks' root mean square velocity;
- ``learned``: :class:`~kbfilter.LearnedMotionFilter` with the step learned from the velocity
  (``inputs=(2, 3)``: it holds anywhere) and the same sensor model;
- ``learned-where``: the same, with the position among the inputs too (the motion may depend on
  where the vehicle is: channels, harbours, airways);
- ``kbf``: the kernel Bayes filter (Nystrom kernels, kNN transition, default hyperparameters),
  whose belief stays on the training states.

Per test track it scores the position RMSE over all steps and over the steps inside dropouts; per
split, the mean over tracks; over splits, the paired Wilcoxon test of ``learned`` against ``cv``.

Usage:  python scenarios/real_tracks.py [--data solent|opensky] [--splits 10] [--noise 10] [--gap 10]
        [--jobs 2] [--out results/real_tracks]
"""

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon

import kbfilter as kb
from kbfilter.datasets import load_opensky, load_solent
from kbfilter.systems import ConstantVelocity, PositionFixes, dropouts

METHODS = ("cv", "learned", "learned-where", "kbf")


def _rmse(estimate, truth, rows):
    if not np.any(rows):
        return np.nan
    return float(np.sqrt(np.mean(np.sum((estimate[rows, :2] - truth[rows, :2]) ** 2, axis=1))))


def one_split(tracks, split, args):
    """Scores of each method in ``args.methods`` on every test track of one split."""
    train, test = tracks.split(test_size=0.3, random_state=split)
    sensor = PositionFixes(args.noise)
    speed = float(np.sqrt(np.mean(np.concatenate([t[:, 2:] for t in train.tracks]) ** 2)))
    cv = ConstantVelocity.fitted(train.tracks, tracks.step, sensor=sensor, speed=speed)
    fixes = [sensor.observe(t, rng=np.random.default_rng([split, 0])) for t in train.tracks]
    filters = {"cv": lambda: cv,
               "learned": lambda: kb.LearnedMotionFilter(cv, inputs=(2, 3), random_state=split).fit(train.tracks,
                                                                                                    fixes),
               "learned-where": lambda: kb.LearnedMotionFilter(cv, random_state=split).fit(train.tracks, fixes),
               "kbf": lambda: kb.KernelBayesFilter(approximation="nystrom", transition="knn").fit(train.tracks, fixes)}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = {}
        for name in args.methods:
            start = time.perf_counter()
            fitted[name] = filters[name]()
            fitted[name + "_fit_s"] = time.perf_counter() - start
        for i, (track, vehicle) in enumerate(zip(test.tracks, test.vehicles)):
            rng = np.random.default_rng([split, 1, i])
            zs, missing = dropouts(sensor.observe(track, rng=rng), rng=rng, rate=args.gap_rate,
                                   length=(args.gap, args.gap))
            row = {"vehicle": vehicle, "steps": len(track), "missing": int(missing.sum())}
            for name in args.methods:
                # a fresh Kalman filter per track; the learned ones restart from their fit
                filt = kb.filters.ExtendedKalman(cv) if name == "cv" else fitted[name].reset()
                start = time.perf_counter()
                means = filt.batch_filter(zs)[0]
                row[name] = {"rmse": _rmse(means, track, np.ones(len(track), bool)),
                             "rmse_dropouts": _rmse(means, track, missing),
                             "ms_per_step": 1e3 * (time.perf_counter() - start) / len(track)}
            rows.append(row)
    return {"split": split, "n_train": len(train), "n_test": len(test), "accel": cv.accel, "speed": speed,
            "fit_s": {name: fitted[name + "_fit_s"] for name in args.methods}, "tracks": rows}


def summary(results, methods):
    """Per split: each method's mean RMSE over test tracks (all steps, inside dropouts)."""
    table = {}
    for key in ("rmse", "rmse_dropouts"):
        table[key] = {m: [float(np.nanmean([r[m][key] for r in s["tracks"]])) for s in results] for m in methods}
    best_hand = [np.array([r["cv"]["rmse"] for r in s["tracks"]]) for s in results]
    learned = [np.array([r["learned"]["rmse"] for r in s["tracks"]]) for s in results]
    table["learned_lost_tracks"] = int(sum(np.sum(l > 2 * b) for l, b in zip(learned, best_hand)))
    table["test_tracks"] = int(sum(len(s["tracks"]) for s in results))
    table["ms_per_step"] = {m: float(np.mean([r[m]["ms_per_step"] for s in results for r in s["tracks"]]))
                            for m in methods}
    table["learned_wins_tracks"] = int(sum(np.sum(l < b) for l, b in zip(learned, best_hand)))
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("solent", "opensky"), default="solent")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--noise", type=float, default=10.0, help="fix error, metres (default 10)")
    parser.add_argument("--gap", type=int, default=10, help="steps in each dropout (default 10)")
    parser.add_argument("--gap-rate", type=float, default=0.02, help="chance a dropout starts at a step (0.02)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="results/real_tracks")
    args = parser.parse_args(argv)
    if "cv" not in args.methods or "learned" not in args.methods:
        parser.error("--methods: the comparison needs cv and learned")
    tracks = load_solent() if args.data == "solent" else load_opensky()
    print(f"{args.data}: {len(tracks)} tracks of {len(set(tracks.vehicles))} vehicles, step {tracks.step} s; "
          f"fixes {args.noise} m, dropouts of {args.gap} steps; {tracks.attribution}", flush=True)
    results = Parallel(n_jobs=args.jobs)(delayed(one_split)(tracks, s, args) for s in range(args.splits))
    table = summary(results, args.methods)
    for key, label in (("rmse", "position RMSE, m"), ("rmse_dropouts", "position RMSE inside dropouts, m")):
        print(label)
        for m in args.methods:
            values = np.array(table[key][m])
            line = f"  {m:<14} mean {values.mean():9.1f}  median {np.median(values):9.1f}"
            if m != "cv":
                wins = int(np.sum(values < np.array(table[key]["cv"])))
                p = wilcoxon(values, table[key]["cv"]).pvalue if len(values) > 1 else np.nan
                line += f"  better than cv in {wins}/{len(values)} splits, Wilcoxon p = {p:.3g}"
            print(line)
    print(f"learned motion better than cv on {table['learned_wins_tracks']} and lost (RMSE > 2 x cv's) on "
          f"{table['learned_lost_tracks']} of {table['test_tracks']} test tracks; ms a step: " + ", ".join(f"{m} {v:.2f}" for m, v in table["ms_per_step"].items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.data}.json").write_text(json.dumps({"args": vars(args), "summary": table, "splits": results},
                                                      indent=1, default=float))
    print(f"written {out / (args.data + '.json')}")


if __name__ == "__main__":
    main()
