"""Learned motion on recorded tracks against the models a tracking engineer writes.

The recorded positions of real ships (AIS, the Solent) or aircraft (ADS-B, OpenSky) are the ground
truth; the sensor is simulated over them: position fixes with Gaussian errors of ``--noise``
metres, or (``--sensor radar``) a range-bearing radar at the projection's origin (the recording's
reference point) with errors of ``--range-noise`` metres and ``--bearing-noise`` radians; missing
for stretches of ``--gap`` steps (each step after the first starts one with probability
``--gap-rate``). Each split holds out 30 % of the vehicles (never parts of one vehicle's track); on
the others we fit

- ``cv``: the constant-velocity Kalman filter, its acceleration noise chosen on the training tracks
  (root mean square velocity change a step, over the step), its first velocity belief the training
  tracks' root mean square velocity;
- ``ct``: the coordinated-turn extended Kalman filter, the same acceleration noise and a turn-rate
  noise chosen on the training tracks (:meth:`~kbfilter.systems.CoordinatedTurn.fitted`);
- ``imm``: an interacting multiple model of the straight and the turning coordinated-turn models
  (switching probability 0.05 a step);
- ``learned``: :class:`~kbfilter.LearnedMotionFilter` with the step learned from the velocity
  (``inputs=(2, 3)``: it holds anywhere) and the same sensor model;
- ``learned-where``: the same, with the position among the inputs too (the motion may depend on
  where the vehicle is: channels, harbours, airways);
- ``kbf``: the kernel Bayes filter (Nystrom kernels, kNN transition, default hyperparameters),
  whose belief stays on the training states.

Per test track it scores the position RMSE over all steps and over the steps inside dropouts, and
the mean NEES of the reported position covariance; per split, the mean over tracks; over splits,
the paired Wilcoxon test of ``learned`` against ``cv`` and against the best hand-written model of
each split (the lowest mean RMSE among ``cv``, ``ct`` and ``imm``).

Usage:  python scenarios/real_tracks.py [--data solent|opensky] [--sensor fixes|radar] [--splits 10]
        [--noise 10] [--gap 10] [--jobs 2] [--out results/real_tracks]
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
from kbfilter.filters import ExtendedKalman, InteractingMultipleModel
from kbfilter.systems import ConstantVelocity, CoordinatedTurn, PositionFixes, RangeBearing, dropouts

METHODS = ("cv", "ct", "imm", "learned", "learned-where", "kbf")
HAND_WRITTEN = ("cv", "ct", "imm")


def _rmse(estimate, truth, rows):
    if not np.any(rows):
        return np.nan
    return float(np.sqrt(np.mean(np.sum((estimate[rows, :2] - truth[rows, :2]) ** 2, axis=1))))


def one_split(tracks, split, args):
    """Scores of each method in ``args.methods`` on every test track of one split."""
    train, test = tracks.split(test_size=0.3, random_state=split)
    sensor = (PositionFixes(args.noise) if args.sensor == "fixes"
              else RangeBearing((0.0, 0.0), args.range_noise, args.bearing_noise))
    speed = float(np.sqrt(np.mean(np.concatenate([t[:, 2:] for t in train.tracks]) ** 2)))
    cv = ConstantVelocity.fitted(train.tracks, tracks.step, sensor=sensor, speed=speed)
    ct = CoordinatedTurn.fitted(train.tracks, tracks.step, sensor=sensor, speed=speed)
    straight = CoordinatedTurn(ct.step, ct.accel, ct.turn_noise, sensor, speed, ct.turn, turning=False)
    fixes = [sensor.observe(t, rng=np.random.default_rng([split, 0])) for t in train.tracks]
    hand = {"cv": lambda: ExtendedKalman(cv), "ct": lambda: ExtendedKalman(ct),
            "imm": lambda: InteractingMultipleModel([straight, ct], switch=0.05)}
    filters = {"cv": lambda: cv, "ct": lambda: ct, "imm": lambda: (straight, ct),
               "learned": lambda: kb.LearnedMotionFilter(cv, inputs=(2, 3), roughening=args.roughening,
                                                         random_state=split).fit(train.tracks, fixes),
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
                filt = hand[name]() if name in hand else fitted[name].reset()
                start = time.perf_counter()
                means, covs, _, _ = filt.batch_filter(zs)
                row[name] = {"rmse": _rmse(means, track, np.ones(len(track), bool)),
                             "rmse_dropouts": _rmse(means, track, missing),
                             "ms_per_step": 1e3 * (time.perf_counter() - start) / len(track),
                             # the position's: every model has it, whatever else its state holds
                             "nees": kb.stats.mean_nees(track[:, :2], means[:, :2], covs[:, :2, :2])}
            rows.append(row)
    return {"split": split, "n_train": len(train), "n_test": len(test), "accel": cv.accel, "speed": speed,
            "fit_s": {name: fitted[name + "_fit_s"] for name in args.methods}, "tracks": rows}


def summary(results, methods):
    """Per split: each method's mean RMSE over test tracks (all steps, inside dropouts) and mean
    NEES; the best hand-written model of each split; tracks the learned filter wins and loses."""
    table = {}
    for key in ("rmse", "rmse_dropouts", "nees"):
        table[key] = {m: [float(np.nanmean([np.nan if r[m][key] is None else r[m][key] for r in s["tracks"]]))
                          for s in results] for m in methods}
    hand = [m for m in HAND_WRITTEN if m in methods]
    for key in ("rmse", "rmse_dropouts"):
        table[key]["best-hand"] = [min(table[key][m][i] for m in hand) for i in range(len(results))]
    table["best_hand_model"] = [min(hand, key=lambda m: table["rmse"][m][i]) for i in range(len(results))]
    # per track, against the split's best hand-written model
    best = [np.array([r[b]["rmse"] for r in s["tracks"]]) for s, b in zip(results, table["best_hand_model"])]
    learned = [np.array([r["learned"]["rmse"] for r in s["tracks"]]) for s in results]
    table["learned_lost_tracks"] = int(sum(np.sum(l > 2 * b) for l, b in zip(learned, best)))
    table["learned_wins_tracks"] = int(sum(np.sum(l < b) for l, b in zip(learned, best)))
    table["test_tracks"] = int(sum(len(s["tracks"]) for s in results))
    table["ms_per_step"] = {m: float(np.mean([r[m]["ms_per_step"] for s in results for r in s["tracks"]]))
                            for m in methods}
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("solent", "opensky"), default="solent")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--sensor", choices=("fixes", "radar"), default="fixes")
    parser.add_argument("--noise", type=float, default=10.0, help="fix error, metres (default 10)")
    parser.add_argument("--range-noise", type=float, default=20.0, help="radar range error, metres (default 20)")
    parser.add_argument("--bearing-noise", type=float, default=0.002, help="radar bearing error, rad (0.002)")
    parser.add_argument("--gap", type=int, default=10, help="steps in each dropout (default 10)")
    parser.add_argument("--gap-rate", type=float, default=0.02, help="chance a dropout starts at a step (0.02)")
    parser.add_argument("--roughening", type=float, default=0.2,
                        help="the learned-motion filter's roughening constant (default 0.2; 0: none)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="results/real_tracks")
    args = parser.parse_args(argv)
    if "cv" not in args.methods or "learned" not in args.methods:
        parser.error("--methods: the comparison needs cv and learned")
    tracks = load_solent() if args.data == "solent" else load_opensky()
    seen = (f"fixes {args.noise} m" if args.sensor == "fixes" else
            f"radar at the origin, {args.range_noise} m and {args.bearing_noise} rad")
    print(f"{args.data}: {len(tracks)} tracks of {len(set(tracks.vehicles))} vehicles, step {tracks.step} s; "
          f"{seen}, dropouts of {args.gap} steps; {tracks.attribution}", flush=True)
    results = Parallel(n_jobs=args.jobs)(delayed(one_split)(tracks, s, args) for s in range(args.splits))
    table = summary(results, args.methods)
    shown = [*args.methods, "best-hand"]
    for key, label in (("rmse", "position RMSE, m"), ("rmse_dropouts", "position RMSE inside dropouts, m")):
        print(label)
        for m in shown:
            values = np.array(table[key][m])
            line = f"  {m:<14} mean {values.mean():9.1f}  median {np.median(values):9.1f}"
            for reference in ("cv", "best-hand"):
                if m not in ("cv", "best-hand") and (reference == "cv" or m not in HAND_WRITTEN):
                    wins = int(np.sum(values < np.array(table[key][reference])))
                    p = wilcoxon(values, table[key][reference]).pvalue if len(values) > 1 else np.nan
                    line += f"  | better than {reference} in {wins}/{len(values)} splits, p = {p:.3g}"
            print(line)
    print("mean NEES of the position (2 for a consistent filter): "
          + ", ".join(f"{m} {np.nanmean(table['nees'][m]):.2f}" for m in args.methods))
    print(f"best hand-written model by split: {table['best_hand_model']}")
    print(f"learned motion better than the split's best hand-written model on {table['learned_wins_tracks']} and "
          f"lost (RMSE > 2 x its) on {table['learned_lost_tracks']} of {table['test_tracks']} test tracks; ms a step: "
          + ", ".join(f"{m} {v:.2f}" for m, v in table["ms_per_step"].items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"{args.data}-{args.sensor}.json"
    (out / name).write_text(json.dumps({"args": vars(args), "summary": table, "splits": results}, indent=1,
                                       default=float))
    print(f"written {out / name}")


if __name__ == "__main__":
    main()
