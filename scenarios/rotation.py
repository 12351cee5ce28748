"""The rotation filtering study of seed 003 §6.2 (seed 001 "Numerical examples").

Paper protocol: 30 runs, training length 500 and 1000 (the last 200 steps held out for tuning the
kernel Bayes filters), test length 200; KBF-IW and KBF-original against EKF, UKF and a particle
filter with 1,000 particles that know the true model. Writes one folder per training length.

Usage:  python scenarios/rotation.py [--runs 30] [--train-lengths 500 1000] [--jobs -1] [--out results/rotation]
"""

import argparse

import matplotlib

from kbfilter.bench import run_and_report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--train-lengths", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--jobs", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/rotation")
    args = parser.parse_args(argv)
    matplotlib.use("Agg")
    for T in args.train_lengths:
        print(f"\n== rotation, training length {T}, {args.runs} runs ==", flush=True)
        run_and_report("rotation", f"{args.out}/train{T}", runs=args.runs, train_length=T, n_jobs=args.jobs,
                       seed=args.seed)


if __name__ == "__main__":
    main()
