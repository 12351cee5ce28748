"""Short logs: the held-out block ``tune_filter`` takes by default against a fixed 200 steps.

On a log of fewer than 400 steps ``tune_filter`` holds out half of it by default (and at most 200
steps); before, it held out 200 steps whatever the log, so a 300-step log was tuned on fits of 100
steps and a log of 203 steps or fewer was refused. For each system, training length and seed this
tunes the kernel Bayes filter both ways on the same log, refits on all of it, and filters the
same 200-step test run. It prints the mean test MSE of each way, their ratio, and on how many
seeds the default did better.

Usage:  python benchmarks/short_logs.py [--lengths 250 300 350] [--seeds 5] [--jobs 2]
"""

import argparse
import warnings

import numpy as np
from joblib import Parallel, delayed

import kbfilter as kb

SYSTEMS = {"rotation": kb.systems.Rotation, "oscillation": kb.systems.Oscillation}


def one_seed(system, length, seed):
    rng = np.random.default_rng([seed, length])
    states, obs = SYSTEMS[system]().simulate(length, rng=rng)
    truth, zs = SYSTEMS[system]().simulate(200, rng=rng)
    row = {}
    for name, given in (("default", {}), ("fixed 200", {"validation_length": 200})):
        if length < 203 and given:
            row[name] = float("nan")  # refused: the block does not fit
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, progress=False, **given)
        means = kbf.batch_filter(zs)[0]
        row[name] = float(np.mean(np.sum((means - truth) ** 2, axis=1)))
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[250, 300, 350])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    tasks = [(system, length, seed) for system in SYSTEMS for length in args.lengths for seed in range(args.seeds)]
    rows = Parallel(n_jobs=args.jobs)(delayed(one_seed)(*task) for task in tasks)
    print(f"{'system':12s} {'T':>5s} {'default MSE':>12s} {'fixed 200':>10s} {'ratio':>7s} {'default better':>15s}")
    for system in SYSTEMS:
        for length in args.lengths:
            sel = [r for (s, t, _), r in zip(tasks, rows) if s == system and t == length]
            new, old = (np.array([r[k] for r in sel]) for k in ("default", "fixed 200"))
            print(f"{system:12s} {length:5d} {new.mean():12.4f} {old.mean():10.4f} {new.mean() / old.mean():7.3f} "
                  f"{int(np.sum(new < old)):>10d} of {len(sel)}")


if __name__ == "__main__":
    main()
