"""Command line: ``kbfilter bench SYSTEM ...`` (also ``python -m kbfilter``)."""

import argparse
import contextlib
import sys

from . import __version__


#: default runs of ``kbfilter bench`` where 6 would not finish in about 5 minutes on 2 cores
QUICK_RUNS = {"sprite": 4, "camera": 4}


class _Parser(argparse.ArgumentParser):
    # one line on bad arguments (argparse would print the whole usage first), exit code 2
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser():
    from .bench import METHODS, SYSTEMS

    parser = _Parser(prog="kbfilter", description="Nonparametric state-space filtering with kernel Bayes' rule.")
    parser.add_argument("--version", action="version", version=f"kbfilter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    bench = sub.add_parser("bench", help="compare kernel Bayes filters with EKF, UKF and a particle filter",
                           description="Simulate independent training and test runs, tune the kernel Bayes "
                                       "filters on validation data, run every method, print a table and "
                                       "write results.json, results.csv and figures.")
    bench.add_argument("system", choices=sorted(SYSTEMS))
    bench.add_argument("--runs", type=int, default=None,
                       help="independent runs (default 6, 4 for the image systems; paper: 30, images: 10)")
    bench.add_argument("--train-length", type=int, default=500, help="training steps (default 500; paper: 1000)")
    bench.add_argument("--test-length", type=int, default=200, help="test steps (default 200)")
    bench.add_argument("--validation-length", type=int, default=200,
                       help="training steps held out for tuning (default 200)")
    bench.add_argument("--methods", nargs="+", choices=METHODS, default=None, metavar="METHOD",
                       help=f"any of {', '.join(METHODS)} (default: the system's usual set)")
    bench.add_argument("--folds", type=int, default=1,
                       help="validation blocks of --validation-length steps from the end of training, "
                            "each held out in turn (default 1: the paper protocol)")
    bench.add_argument("--search", choices=("coordinate", "grid"), default="coordinate",
                       help="hyperparameter search (default coordinate)")
    bench.add_argument("--jobs", type=int, default=-1, help="parallel runs (default: all cores)")
    bench.add_argument("--backend", default=None, help="joblib backend, e.g. dask (default: joblib's)")
    bench.add_argument("--scheduler", default=None, help="Dask scheduler address for --backend dask")
    bench.add_argument("--out", default=None, help="output folder (default results/bench-SYSTEM)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _backend(args, parser):
    if args.backend is None:
        if args.scheduler:
            parser.error("--scheduler needs --backend dask")
        return contextlib.nullcontext()
    from joblib import parallel_config

    if args.backend == "dask":
        try:
            from dask.distributed import Client
        except ImportError:
            parser.error("--backend dask needs dask[distributed]: pip install 'kbfilter[cluster]'")
        client = Client(args.scheduler) if args.scheduler else Client(processes=False)
        stack = contextlib.ExitStack()
        stack.enter_context(client)
        stack.enter_context(parallel_config(backend="dask"))
        return stack
    return parallel_config(backend=args.backend)


def bench_command(args, parser):
    import matplotlib

    matplotlib.use("Agg")
    from .bench import run_and_report

    if args.runs is None:
        args.runs = QUICK_RUNS.get(args.system, 6)
    if args.runs < 1:
        parser.error(f"argument --runs: expected a positive integer, got {args.runs}")
    if args.folds < 1:
        parser.error(f"argument --folds: expected a positive integer, got {args.folds}")
    if args.train_length < args.folds * args.validation_length + 3:
        parser.error(f"argument --train-length: expected at least --folds x --validation-length + 3 = "
                     f"{args.folds * args.validation_length + 3}, got {args.train_length}")
    if args.test_length < 1:
        parser.error(f"argument --test-length: expected a positive integer, got {args.test_length}")
    print(f"kbfilter bench {args.system}: {args.runs} runs, training {args.train_length} steps "
          f"(last {args.validation_length} for tuning), test {args.test_length} steps", flush=True)
    with _backend(args, parser):
        run_and_report(args.system, args.out or f"results/bench-{args.system}", runs=args.runs,
                       train_length=args.train_length, test_length=args.test_length, methods=args.methods,
                       n_jobs=args.jobs, seed=args.seed, progress=not args.quiet,
                       validation_length=args.validation_length, search=args.search, n_folds=args.folds)
    return 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return bench_command(args, parser)
