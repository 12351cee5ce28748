"""Command line: ``kbfilter bench SYSTEM ...`` (also ``python -m kbfilter``), ``kbfilter bench
RECORDING ...`` (the benchmark on recorded tracks), and the scenario scripts, which are the same
commands with the studies' defaults.

Every argument is checked before any work starts: a bad one gives one line on standard error
and exit code 2. A study that ran to its end with some method's failures recorded exits with
:data:`EXIT_FAILED_RUNS` (1).
"""

import argparse
import ast
import contextlib
import re
import signal
import sys
import warnings
from collections import Counter
from pathlib import Path

from . import __version__

# the library's argument names, as the command line spells them
_FLAGS = {"runs": "--runs", "train_length": "--train-length", "test_length": "--test-length",
          "validation_length": "--validation-length", "n_folds": "--folds", "methods": "--methods",
          "n_jobs": "--jobs", "seed": "--seed", "out": "--out", "filter_seeds": "--filter-seeds",
          "reference": "--reference", "system_params": "--system-param", "grid_axes": "--grid",
          "first_run": "--first-run"}


class _Parser(argparse.ArgumentParser):
    # one line on bad arguments (argparse would print the whole usage first), exit code 2
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def integer_at_least(minimum):
    """An argparse ``type``: an integer of at least ``minimum`` (a study script's count of runs,
    trials or permutations), refused with one line before any work."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def workers(text):
    """An argparse ``type``: joblib's ``n_jobs``, a positive number of workers or a negative one
    (-1: all cores), as :func:`~kbfilter._validation.check_n_jobs` takes it."""
    from ._validation import check_n_jobs

    try:
        return check_n_jobs(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of workers, or -1 for all cores, "
                                         f"got {text!r}") from None


def study_parser(doc):
    """The command line of a study script under ``scenarios/``: its docstring's first line as the
    description, and one line on standard error (exit code 2) for a bad argument."""
    return _Parser(description=doc.splitlines()[0])


def write_study(out, rows, lines):
    """A study script's results: ``rows`` (one a run) as ``runs.json`` and the table ``lines`` as
    ``table.md`` in the folder ``out``, made if need be; the table is printed, and where it went."""
    import json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.json").write_text(json.dumps(rows, indent=1))
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwrote {out / 'runs.json'}, {out / 'table.md'}")


def _as_flags(message):
    """A library ``ValueError`` message with its argument names spelled as command-line flags."""
    return re.sub(r"\b(" + "|".join(_FLAGS) + r")\b", lambda m: _FLAGS[m.group(1)], message)


def _system_param(text):
    """``NAME=VALUE`` as a pair; the value read as a Python literal (``true``/``false`` too), else kept as text."""
    name, sep, value = (part.strip() for part in text.partition("="))
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def _grid_axis(text):
    """``NAME=v1,v2,...`` as ``(name, values)``, the values numbers."""
    name, sep, values = (part.strip() for part in text.partition("="))
    if not sep or not name or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=v1,v2,..., got {text!r}")
    numbers = []
    for value in values.split(","):
        try:
            numbers.append(int(value) if value.strip().lstrip("+-").isdigit() else float(value))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers after {name}=, got {value.strip()!r}") from None
    return name, tuple(numbers)


def _given_once(items, flag, parser, what="name"):
    """A parser error for the first of ``items`` given more than once to ``flag`` (one of the values
    would be dropped without a word, or one run done twice)."""
    for item in items:
        if items.count(item) > 1:
            parser.error(f"argument {flag}: {item} given {items.count(item)} times; expected each {what} once")


def _once(pairs, flag, parser):
    """``(name, value)`` pairs of a repeatable flag as a dict, each name given once."""
    _given_once([name for name, _ in pairs], flag, parser)
    return dict(pairs)


def _add_output_arguments(parser, out, default):
    """``--out`` (its default ``out``, or ``default`` when None) and ``--force``."""
    parser.add_argument("--out", default=None, help=f"output folder (default {out or default})")
    parser.set_defaults(default_out=out)
    parser.add_argument("--force", action="store_true",
                        help="overwrite results already in --out (without it, a given --out that holds results "
                             "is an error and the default folder gets a numbered sibling)")


def add_bench_arguments(parser, system=None, runs=None, train_lengths=(500,), jobs=-1, out=None):
    """The benchmark's arguments, shared by ``kbfilter bench`` and the scenario scripts.

    ``system`` fixes the system (a scenario script); otherwise it is a positional argument.
    """
    from .bench import METHODS, SYSTEMS
    from .bench.runner import ON_ERROR

    if system is None:
        parser.add_argument("system", choices=[*sorted(SYSTEMS), *_RECORDINGS],
                            help="a simulated system; or a recording (opensky, solent), whose benchmark takes its "
                                 "own options: kbfilter bench solent --help")
    parser.set_defaults(system=system)
    parser.add_argument("--runs", type=int, default=runs,
                        help="independent runs (default: 6, 4 for the image systems; paper protocol: 30, "
                             "images: 10)" if runs is None else f"independent runs (default {runs})")
    parser.add_argument("--train-length", "--train-lengths", dest="train_lengths", type=int, nargs="+",
                        default=list(train_lengths), metavar="T",
                        help=f"training steps; several values run one study each (default "
                             f"{' '.join(map(str, train_lengths))}; paper: 1000)")
    parser.add_argument("--test-length", type=int, default=200, help="test steps (default 200)")
    parser.add_argument("--validation-length", type=int, default=None,
                        help="training steps held out for tuning (default 200, or half the training steps "
                             "when there are fewer than 400)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=None, metavar="METHOD",
                        help=f"any of {', '.join(METHODS)} (default: the system's usual set)")
    parser.add_argument("--folds", type=int, default=1,
                        help="validation blocks of --validation-length steps from the end of training, "
                             "each held out in turn (default 1: the paper protocol)")
    parser.add_argument("--filter-seeds", type=int, default=1,
                        help="seeds per particle filter (KMC, NN-PF, PF): each is tuned and tested with every seed "
                             "and its errors averaged, so that runs compare methods rather than Monte Carlo draws "
                             "(default 1)")
    parser.add_argument("--reference", choices=METHODS, default=None, metavar="METHOD",
                        help="the method compared with the others (Wilcoxon p-values, wins) and whose particles "
                             "the figures show; one of --methods (default: the system's, e.g. kbf-iw)")
    parser.add_argument("--system-param", dest="system_params", action="append", default=[], metavar="NAME=VALUE",
                        type=_system_param,
                        help="a parameter of the system in place of its default, e.g. distinct_walls=False for "
                             "localization (repeatable; values are Python literals)")
    parser.add_argument("--grid", dest="grid_axes", action="append", default=[], metavar="NAME=v1,v2,...",
                        type=_grid_axis,
                        help="values for one axis of the tuned methods' grids in place of their own, e.g. "
                             "scale=0.05,0.1,0.2 (repeatable; tuning still extends an axis whose best value is "
                             "an end)")
    parser.add_argument("--search", choices=("coordinate", "grid"), default="coordinate",
                        help="hyperparameter search (default coordinate)")
    parser.add_argument("--jobs", type=int, default=jobs, help="parallel runs (default -1: all cores)")
    parser.add_argument("--backend", default=None, help="joblib backend, e.g. dask (default: joblib's)")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address for --backend dask")
    _add_output_arguments(parser, out, "results/bench-SYSTEM")
    parser.add_argument("--seed", type=int, default=0,
                        help="root seed of the study: it fixes every run's data and every random draw, so the same "
                             "seed gives the same table (default 0)")
    parser.add_argument("--first-run", type=int, default=0, metavar="R",
                        help="start at run R of the seed: --first-run 5 --runs 5 makes runs 5-9 of a ten-run study, "
                             "to extend one or to repeat one run alone (default 0)")
    parser.add_argument("--on-error", choices=ON_ERROR, default="record",
                        help="a method that raises in a run: record (default) leaves it out of that run and says so, "
                             "the other runs and methods go on; raise stops with its traceback")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


#: the recordings ``kbfilter bench`` runs on (:data:`kbfilter.bench.tracks.RECORDINGS`)
_RECORDINGS = ("opensky", "solent")


def add_tracks_arguments(parser, data=None, out=None):
    """The arguments of the benchmark on recorded tracks, shared by ``kbfilter bench RECORDING`` and
    ``scenarios/real_tracks.py``.

    ``data`` fixes the recording (``kbfilter bench solent``); otherwise it is the ``--data`` option.
    """
    from .bench.runner import ON_ERROR
    from .bench.tracks import DEFAULT_TRACK_METHODS, TRACK_METHODS, TracksConfig
    from .filters.motion import LOCAL_MEANS, PROPOSALS

    defaults = TracksConfig()
    if data is None:
        parser.add_argument("--data", choices=_RECORDINGS, default=defaults.data,
                            help=f"the recording (default {defaults.data})")
    parser.set_defaults(data=data or defaults.data)
    parser.add_argument("--sensor", choices=("fixes", "radar"), default=defaults.sensor,
                        help="position fixes, or a range-bearing radar at the projection's origin (default fixes)")
    parser.add_argument("--splits", type=int, default=defaults.splits,
                        help=f"train / test splits by vehicle (default {defaults.splits})")
    parser.add_argument("--methods", nargs="+", choices=tuple(TRACK_METHODS), default=None,
                        metavar="METHOD", help=f"any of {', '.join(TRACK_METHODS)} "
                                               f"(default {' '.join(DEFAULT_TRACK_METHODS)}; with --smooth, those "
                                               f"with a smoother)")
    parser.add_argument("--smooth", action="store_true",
                        help="score each method's smoothed estimates (its smooth over the whole track) instead of "
                             "its filtered ones")
    parser.add_argument("--noise", type=float, default=defaults.noise,
                        help=f"the fixes' error, metres (default {defaults.noise:g})")
    parser.add_argument("--range-noise", type=float, default=defaults.range_noise,
                        help=f"the radar's range error, metres (default {defaults.range_noise:g})")
    parser.add_argument("--bearing-noise", type=float, default=defaults.bearing_noise,
                        help=f"the radar's bearing error, radians (default {defaults.bearing_noise:g})")
    parser.add_argument("--gap", type=int, default=defaults.gap,
                        help=f"steps in each dropout (default {defaults.gap})")
    parser.add_argument("--gap-rate", type=float, default=defaults.gap_rate,
                        help=f"the chance that a dropout starts at a step (default {defaults.gap_rate:g})")
    parser.add_argument("--roughening", type=float, default=defaults.roughening,
                        help=f"the learned-motion filters' roughening constant (default {defaults.roughening:g}; "
                             f"0: none)")
    parser.add_argument("--proposal", choices=PROPOSALS, default=defaults.proposal,
                        help=f"how the learned-motion filters move their particles when a fix comes "
                             f"(default {defaults.proposal})")
    parser.add_argument("--local-mean", choices=LOCAL_MEANS, default=defaults.local_mean,
                        help=f"what the learned-motion filters do with their neighbours' mean offset "
                             f"(default {defaults.local_mean})")
    parser.add_argument("--test-size", type=float, default=defaults.test_size,
                        help=f"the fraction of vehicles held out in each split (default {defaults.test_size:g})")
    parser.add_argument("--max-test-tracks", type=int, default=None,
                        help="score at most this many test tracks per split, for a quick look (default: all)")
    parser.add_argument("--map-tracks", type=int, default=defaults.map_tracks,
                        help=f"test tracks drawn in tracks.png (default {defaults.map_tracks})")
    parser.add_argument("--jobs", type=int, default=-1, help="splits in parallel (default -1: all cores)")
    _add_output_arguments(parser, out, "results/bench-RECORDING")
    parser.add_argument("--on-error", choices=ON_ERROR, default="record",
                        help="a method that raises on a test track: record (default) gives it no scores there and "
                             "says so, the other tracks and methods go on; raise stops with its traceback")
    parser.add_argument("--quiet", action="store_true", help="no line per split")
    return parser


def tracks_command(args, parser):
    """Run the benchmark on recorded tracks from parsed arguments; returns the exit code."""
    from ._validation import check_n_jobs
    from .bench.report import writable_folder
    from .bench.tracks import DEFAULT_TRACK_METHODS, UNSMOOTHED, TracksConfig, run_tracks_bench

    out = _output_folders(args, parser, f"results/bench-{args.data}", [None], False)[None]
    methods = args.methods or [m for m in DEFAULT_TRACK_METHODS if not (args.smooth and m in UNSMOOTHED)]
    try:
        check_n_jobs(args.jobs)
        config = TracksConfig.checked(
            data=args.data, sensor=args.sensor, splits=args.splits, methods=tuple(methods), noise=args.noise,
            range_noise=args.range_noise, bearing_noise=args.bearing_noise, gap=args.gap, gap_rate=args.gap_rate,
            roughening=args.roughening, proposal=args.proposal, local_mean=args.local_mean, test_size=args.test_size,
            max_test_tracks=args.max_test_tracks, map_tracks=args.map_tracks, smooth=args.smooth)
        writable_folder(out)
    except ValueError as exc:
        name, _, message = str(exc).partition(": ")
        parser.error(f"argument {_FLAGS.get(name, '--' + name.replace('_', '-'))}: {message}")

    import matplotlib

    matplotlib.use("Agg")
    with _terminated_as_interrupted():
        print(f"kbfilter bench {args.data}: results in {out}", flush=True)
        _, summary = run_tracks_bench(config, out, n_jobs=args.jobs, progress=not args.quiet,
                                      command=args.command_line, on_error=args.on_error)
    return _exit_status(parser.prog, {m: counts["failed"] for m, counts in summary["left_out"].items()}, "track")


def tracks_scenario_main(argv=None):
    """``scenarios/real_tracks.py``: the benchmark on recorded tracks with the recording as an option."""
    parser = _Parser(prog="real_tracks.py", description="Learned motion on recorded tracks against the models a "
                                                        "tracking engineer writes.")
    add_tracks_arguments(parser, out="results/real_tracks/DATA-SENSOR")
    args = parser.parse_args(argv)
    args.default_out = f"results/real_tracks/{args.data}-{args.sensor}"
    args.command_line = ["real_tracks.py", *(sys.argv[1:] if argv is None else argv)]
    return tracks_command(args, parser)


def build_parser():
    """The ``kbfilter`` argument parser."""
    parser = _Parser(prog="kbfilter", description="Nonparametric state-space filtering with kernel Bayes' rule.")
    parser.add_argument("--version", action="version", version=f"kbfilter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    bench = sub.add_parser("bench", help="compare kernel Bayes filters with EKF, UKF and a particle filter",
                           description="Simulate independent training and test runs, tune the kernel Bayes "
                                       "filters on validation data, run every method, print a table and "
                                       "write results.json, results.csv and figures.")
    add_bench_arguments(bench)
    # errors found after parsing are reported by the subcommand's parser, as argparse reports its own
    bench.set_defaults(command_parser=bench)
    return parser


def _backend(args, parser):
    """The joblib backend the arguments ask for, as a context manager, its arguments checked first
    (before the output folder is made: a bad backend leaves nothing behind)."""
    if args.scheduler and args.backend != "dask":
        parser.error("--scheduler needs --backend dask")
    if args.backend is None:
        return contextlib.nullcontext
    from joblib import parallel_config

    if args.backend != "dask":
        try:
            with parallel_config(backend=args.backend):  # refuses an unknown name, and sets nothing after
                pass
        except ValueError as exc:
            parser.error(f"argument --backend: {exc}")
        return lambda: parallel_config(backend=args.backend)
    try:
        from dask.distributed import Client
    except ImportError:
        parser.error("--backend dask needs dask[distributed]: pip install 'kbfilter[cluster]'")
    return lambda: _dask_backend(Client, args.scheduler)


def _dask_backend(Client, scheduler):
    """The Dask backend: a client of ``scheduler``, or of a new local cluster."""
    from joblib import parallel_config

    # without a scheduler: a local cluster of processes with one thread each, so that workers
    # do not compete for the cores
    client = Client(scheduler) if scheduler else Client(threads_per_worker=1)
    stack = contextlib.ExitStack()
    stack.enter_context(client)
    stack.enter_context(parallel_config(backend="dask"))
    return stack


def _holds_results(folder):
    return (Path(folder) / "results.json").exists()


def _unused_folder(out, many, force):
    """The default output folder, or, when it holds results and ``force`` is off, the first of
    ``out-2``, ``out-3``, ... that does not."""
    def used(folder):
        return any(_holds_results(f) for f in Path(folder).glob("train*")) if many else _holds_results(folder)

    if force or not used(out):
        return out
    k = 2
    while used(f"{out}-{k}"):
        k += 1
    return f"{out}-{k}"


def _output_folders(args, parser, default, lengths, many):
    """The folder of each training length: ``--out`` (or else a default folder that holds no
    results), with one ``trainT`` folder inside it per length when ``many``; a folder the user named
    that already holds results is an error unless ``--force``."""
    if args.out is not None and not args.out.strip():
        parser.error("argument --out: expected a folder, got an empty name (leave --out out for the default)")
    out = args.out or _unused_folder(args.default_out or default, many, args.force)
    folders = {T: f"{out}/train{T}" if many else out for T in lengths}
    if not args.force:
        for folder in folders.values():
            if _holds_results(folder):
                parser.error(f"argument --out: {folder} already holds results; pass --force to overwrite them "
                             f"or choose another --out")
    return folders


def bench_command(args, parser, folder_per_length=False):
    """Run ``kbfilter bench`` (or a scenario script) from parsed arguments; returns the exit code."""
    from .bench import BENCH_SYSTEMS, run_and_report
    from .bench.report import writable_folder
    from ._validation import check_int, check_n_jobs
    from .bench.runner import BenchConfig

    if args.system in _RECORDINGS:
        parser.error(f"argument system: {args.system} is a recording, whose benchmark takes its own options; "
                     f"name it first: kbfilter bench {args.system} [options] (see kbfilter bench {args.system} "
                     f"--help)")
    if args.runs is None:
        args.runs = BENCH_SYSTEMS[args.system].quick_runs
    # the second run of a length would overwrite the first's results
    _given_once(args.train_lengths, "--train-length", parser, "length")
    many = folder_per_length or len(args.train_lengths) > 1
    folders = _output_folders(args, parser, f"results/bench-{args.system}", args.train_lengths, many)
    system_params = _once(args.system_params, "--system-param", parser)
    backend = _backend(args, parser)
    try:
        check_n_jobs(args.jobs)
        check_int(args.first_run, "first_run", minimum=0)
        configs = {T: BenchConfig.checked(args.system, args.runs, T, args.test_length, args.methods,
                                          args.validation_length, None, args.search, args.folds, args.seed,
                                          args.filter_seeds, args.reference, system_params,
                                          _once(args.grid_axes, "--grid", parser))
                   for T in args.train_lengths}
        for folder in folders.values():
            writable_folder(folder)
    except ValueError as exc:
        parser.error(f"argument {_as_flags(str(exc))}")

    import matplotlib

    matplotlib.use("Agg")
    failed = Counter()
    with backend(), _terminated_as_interrupted():
        for T, folder in folders.items():
            print(f"kbfilter bench {args.system}: {args.runs} runs, training {T} steps "
                  f"(last {configs[T].validation_length} for tuning), test {args.test_length} steps; results in "
                  f"{folder}", flush=True)
            rows, _ = run_and_report(configs[T], folder, n_jobs=args.jobs, progress=not args.quiet,
                                     command=args.command_line, first_run=args.first_run, on_error=args.on_error)
            failed.update(m for row in rows for m in row.get("failed", {}))
    return _exit_status(parser.prog, failed, "run")


#: the exit status of a study that ran to its end with some method raising somewhere (recorded, not stopped)
EXIT_FAILED_RUNS = 1


def _exit_status(prog, failed, unit):
    """0, or :data:`EXIT_FAILED_RUNS` with a line on standard error when a method raised in some
    ``unit`` (run or track): the results are written, but a script running the study must be able
    to tell that a method's entries are missing from them."""
    failed = {m: n for m, n in failed.items() if n}
    if not failed:
        return 0
    counts = ", ".join(f"{m} failed on {n} {unit}{'s' if n > 1 else ''}" for m, n in failed.items())
    print(f"{prog}: {counts} (the results hold the messages; --on-error raise stops at the first with its "
          f"traceback); exit status {EXIT_FAILED_RUNS}", file=sys.stderr)
    return EXIT_FAILED_RUNS


@contextlib.contextmanager
def _terminated_as_interrupted():
    """SIGTERM ends the run as Ctrl-C does: joblib then shuts its worker pool down instead of leaving
    the workers running after the parent has gone."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _warnings_as_notes(prog):
    """Warnings printed as the command's notes, ``prog: Category: message``: the caller is a shell,
    and the line a warning would name (the command's entry point, or a worker process's) says
    nothing to it."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{prog}: {category.__name__}: {message}", file=sys.stderr if file is None else file)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def scenario_main(system, argv=None):
    """The protocol scenario scripts (``scenarios/{rotation,oscillation,sprite,camera}.py``):
    ``kbfilter bench`` with the protocol's runs and training lengths, one folder per length."""
    from .bench import PROTOCOLS

    runs, lengths = PROTOCOLS[system]
    parser = _Parser(prog=f"{system}.py", description=f"The {system} filtering study: {runs} runs per training "
                                                      f"length, test length 200, tuning on the last 200 steps.")
    add_bench_arguments(parser, system=system, runs=runs, train_lengths=lengths, out=f"results/{system}")
    args = parser.parse_args(argv)
    args.command_line = [f"{system}.py", *(sys.argv[1:] if argv is None else argv)]
    with _warnings_as_notes(parser.prog):
        return bench_command(args, parser, folder_per_length=True)


def main(argv=None):
    """Entry point of the ``kbfilter`` command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) >= 2 and argv[0] == "bench" and argv[1] in _RECORDINGS:
        tracks = _Parser(prog=f"kbfilter bench {argv[1]}",
                         description="Learned motion on recorded tracks against constant velocity, coordinated "
                                     "turns and their IMM: splits by vehicle, a simulated sensor with dropouts, "
                                     "position RMSE, NEES and paired tests; writes results.json, results.csv and "
                                     "tracks.png.")
        add_tracks_arguments(tracks, data=argv[1])
        args = tracks.parse_args(argv[2:])
        args.command_line = ["kbfilter", *argv]
        with _warnings_as_notes(tracks.prog):
            return tracks_command(args, tracks)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    args.command_line = ["kbfilter", *argv]
    with _warnings_as_notes(args.command_parser.prog):
        return bench_command(args, args.command_parser)
