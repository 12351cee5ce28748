"""A kernel Bayes filter on a tenth of its training log: herding against a random subset.

Each run simulates the oscillation (Fukumizu (2014), Xu et al. (2022)) for ``T`` training
steps and 200 test steps, and fits three filters: the full one on all ``T`` steps, and two that
keep ``m`` of the logged transitions, chosen by kernel herding of their joint embedding
(``KernelBayesFilter(compress=m)``) or uniformly at random (``compression="random"``, seeded by
the run). Each filter is tuned on its own, on the last 200 training steps (the compressed
filters pick their ``m`` transitions from the remaining ones), then refitted on the whole log.
We report the test MSE, the milliseconds a filtering step takes, and how often herding beats the
random subset (with a Wilcoxon signed-rank test).

Usage:  python scenarios/herding_compression.py [--runs 10] [--train-length 2000] [--keep 200] [--jobs 2]
"""

import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon
from tqdm import tqdm

import kbfilter as kb
from kbfilter.cli import integer_at_least, study_parser, workers, write_study

FILTERS = {"full": {}, "herding": {"compression": "herding"}, "random": {"compression": "random"}}


def one_run(seed, train_length, keep, test_length=200):
    system = kb.systems.Oscillation()
    rng = np.random.default_rng(seed)
    states, obs = system.simulate(train_length, rng=rng)
    test_states, test_obs = system.simulate(test_length, rng=rng)
    row = {"seed": seed}
    for name, params in FILTERS.items():
        template = kb.KernelBayesFilter(**params, random_state=seed)
        if name != "full":
            template.set_params(compress=keep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # grid-edge notices of the tuner
            kbf = kb.tune_filter(template, states, obs, progress=False)
        start = time.perf_counter()
        means, *_ = kbf.batch_filter(test_obs)
        row[f"{name}_ms"] = 1e3 * (time.perf_counter() - start) / test_length
        row[f"{name}_mse"] = float(np.mean(np.sum((means - test_states) ** 2, axis=1)))
        row[f"{name}_params"] = {k: kbf.get_params()[k] for k in ("scale", "reg_prior", "reg_update")}
    return row


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument("--runs", type=integer_at_least(1), default=10)
    parser.add_argument("--train-length", type=integer_at_least(1), default=2000)
    parser.add_argument("--keep", type=integer_at_least(1), default=200, help="transitions the compressed filters keep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=workers, default=1)
    parser.add_argument("--out", default="results/herding_compression")
    args = parser.parse_args(argv)
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(args.runs)]
    rows = Parallel(n_jobs=args.jobs)(delayed(one_run)(s, args.train_length, args.keep)
                                      for s in tqdm(seeds, desc="runs"))
    full = np.array([r["full_mse"] for r in rows])
    lines = [f"oscillation, {args.runs} runs, T = {args.train_length}, m = {args.keep}", "",
             "| filter | MSE mean ± sd | median | vs full | ms / step |", "|---|---|---|---|---|"]
    for name in FILTERS:
        mse = np.array([r[f"{name}_mse"] for r in rows])
        spread = f"{mse.std(ddof=1):.4f}" if args.runs > 1 else "n/a"
        lines.append(f"| {name} | {mse.mean():.4f} ± {spread} | {np.median(mse):.4f} | "
                     f"{mse.mean() / full.mean():.3f} | {np.mean([r[f'{name}_ms'] for r in rows]):.2f} |")
    herding = np.array([r["herding_mse"] for r in rows])
    random = np.array([r["random_mse"] for r in rows])
    wins = int(np.sum(herding < random))
    # a signed-rank test needs two runs at least
    p = f"{wilcoxon(herding, random).pvalue:.3g}" if args.runs > 1 else "n/a with one run"
    lines += ["", f"herding below random in {wins}/{args.runs} runs (Wilcoxon p = {p})"]
    write_study(args.out, rows, lines)


if __name__ == "__main__":
    main()
