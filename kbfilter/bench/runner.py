"""The benchmark's runner: seeded trials, in parallel through joblib.

Each run simulates an independent training sequence and an independent test sequence, tunes
the kernel Bayes filters on the last steps of the training sequence only, runs every method on
the test observations, and records the state MSE (mean over test steps of the squared Euclidean
error), the mean NEES of the covariance each method reports, the mean NIS of the innovations it
reports (filterpy's ``mahalanobis`` squared), the time per step and the fitting / tuning times.
Runs go through joblib with whatever backend is active, so ``joblib.parallel_config(backend="dask")``
moves them to a cluster.
"""

import contextlib
import time
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone

from .._validation import check_bool, check_choice, check_int, check_n_jobs
from .._warnings import ignored, recorded, reissued, warn_user
from ..linalg import NumericalWarning
from ..progress import progress_bar, quiet_progress
from ..stats import NISRecorder, mean_nees
from ..threads import limited_blas
from ..tuning import check_param_grid, check_validation_length, default_validation_length, fitted_on_run, tune_filter
from .catalogue import CATALOGUE, DEFAULT_METHODS, make_system, reference_method

__all__ = ["BenchConfig", "run_trial", "run_bench", "check_bench_arguments", "ON_ERROR"]

#: test steps after which the reference method's particles are kept for the figure (run 0)
SNAPSHOT_STEPS = (0, 5, 20)


def _fitted(method, system, data, rng, row, config):
    """The method's filter, ready to run on the test observations; times go into ``row``.

    ``data`` is ``(states, observations)``, or ``(states, observations, controls)`` for a
    controlled system."""
    start = time.perf_counter()
    if method.kind == "tuned":
        template = method.build(system, rng)
        grid = dict(config.param_grid or method.grid(system))
        grid.update({k: v for k, v in config.grid_axes.items() if k in template.get_params()})
        filt = tune_filter(template, *data[:2], param_grid=grid,
                           validation_length=config.validation_length, n_jobs=1, progress=False,
                           search=config.search, n_folds=config.n_folds,
                           controls=data[2] if len(data) > 2 else None,
                           n_repeats=config.filter_seeds if method.stochastic else 1)
        row["tune_s"][method.name] = time.perf_counter() - start
        row["fit_s"][method.name] = filt.refit_time_
        row["params"][method.name] = filt.best_params_
        row["extended"][method.name] = {k: list(v) for k, v in filt.extended_params_.items()}
        return filt
    if method.kind == "trained":
        filt = fitted_on_run(method.build(system, rng), *data)
        row["tune_s"][method.name], row["fit_s"][method.name] = 0.0, time.perf_counter() - start
        return filt
    row["tune_s"][method.name] = row["fit_s"][method.name] = 0.0
    return method.build(system, rng)


def _reseeded(method, system, filt, data, rng):
    """Another draw of a stochastic method: the same (tuned) settings, its random numbers from ``rng``."""
    if method.kind in ("tuned", "trained"):
        return fitted_on_run(clone(filt).set_params(random_state=rng), *data)
    return method.build(system, rng)


class _Recorder:
    """``batch_filter``'s saver for the bench: the NIS of every step (``innovations``, a
    :class:`~kbfilter.stats.NISRecorder`, or None for a filter without innovations) and the
    particles and their weights after the steps in ``snapshots``."""

    def __init__(self, filt, snapshots):
        self.filt, self.snapshots, self.kept, self.step = filt, snapshots, {}, 0
        self.innovations = NISRecorder(filt) if hasattr(filt, "mahalanobis") else None

    def save(self):
        if self.innovations is not None:
            self.innovations.save()
        if self.step in self.snapshots:
            self.kept[self.step] = (self.filt.particles.copy(), self.filt.particle_weights.copy())
        self.step += 1


def _filtered(filt, zs, us, snapshots=()):
    """The filter's posterior means and covariances over ``zs``, its particles and their weights
    after the steps in ``snapshots`` (for the figure; only for filters that have particles), and
    its NIS (:class:`~kbfilter.stats.NISRecorder`; None for a filter without innovations). The
    time reading the innovations takes is the recorder's ``seconds``, which the bench's time a step
    leaves out."""
    recorder = _Recorder(filt, snapshots if hasattr(filt, "particles") else ())
    means, covs, _, _ = filt.batch_filter(zs, us=us, saver=recorder)
    return means, covs, recorder.kept, recorder.innovations


def bench_validation_length(train_length, validation_length=None):
    """The bench's tuning block: ``validation_length`` if given, else the one block
    :func:`~kbfilter.tuning.tune_filter` holds out by default: the last 200 training steps, or half
    of a shorter training run, so that a short run keeps as much data for the fit as for tuning.

    Parameters
    ----------
    train_length : int
        Steps simulated for training.
    validation_length : int, optional
        An explicit block length, returned as it is.

    Returns
    -------
    int
        ``validation_length``, or ``min(200, train_length // 2)`` when it is None.
    """
    if validation_length is not None:
        return validation_length
    # half of 5 steps leaves the 3 a fit needs; fewer leave no block the default could name
    return default_validation_length(check_int(train_length, "train_length", minimum=5))


def _children(seed, n):
    """The first ``n`` children of a ``SeedSequence``, as ``seed.spawn(n)`` gives them the first
    time; ``spawn`` itself counts its calls, so a trial given the same sequence twice would
    otherwise simulate other data the second time."""
    return [np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k), pool_size=seed.pool_size)
            for k in range(n)]


def _checked_axes(grid_axes, system, methods):
    """``grid_axes`` as ``{name: tuple of numbers}``, each name a parameter of one of the tuned ``methods``."""
    if grid_axes is None:
        return {}
    if not isinstance(grid_axes, dict):
        raise ValueError(f"grid_axes: expected a dict of parameter names and value lists, got {grid_axes!r}")
    rng = np.random.default_rng(0)
    tuned = [name for name in methods if CATALOGUE[name].kind == "tuned"]
    templates = [CATALOGUE[name].build(system, rng) for name in tuned]
    defaults = [template.get_params() for template in templates]
    checked = {}
    for name, values in grid_axes.items():
        if not any(name in d for d in defaults):
            raise ValueError(f"grid_axes: {name!r} is not a parameter of any tuned method "
                             f"({', '.join(tuned) or 'none among the methods'})")
        values = tuple(values) if isinstance(values, (list, tuple)) else (values,)
        counts = [d[name] for d in defaults if isinstance(d.get(name), Integral) and not isinstance(d[name], bool)]
        if counts:
            # 256.0 is taken as 256, the type the filter checks for
            if not all(isinstance(v, Real) and not isinstance(v, bool) and float(v).is_integer() for v in values):
                raise ValueError(f"grid_axes: {name} is a count (default {counts[0]}); expected whole numbers, got "
                                 f"{values!r}")
            values = tuple(int(v) for v in values)
        # each method's own check, as tune_filter runs it, before the data are made
        for template, params in zip(templates, defaults):
            if name in params:
                check_param_grid(template, {name: values}, name="grid_axes")
        checked[name] = values
    return checked


@dataclass(frozen=True)
class BenchConfig:
    """What a benchmark run is: the system, the protocol and the methods, checked once.

    Build it with :meth:`checked`, which validates every field before any work and fills in the
    defaults (the system's methods and reference, the tuning block); the runner, the report and the
    command line then pass this one object on.

    Parameters
    ----------
    system : str or BenchConfig
        A name in :data:`~kbfilter.bench.SYSTEMS`, or a checked configuration (the arguments
        after ``n_jobs`` and ``progress`` are then not used).
    runs : int
        Independent runs.
    train_length, test_length : int
        Steps simulated for training (tuning included) and for the test.
    methods : tuple of str
        Names in :data:`~kbfilter.bench.CATALOGUE`.
    validation_length : int
        Steps held out at the end of each training run to tune on.
    param_grid : dict or None
        A grid for every tuned method (None: each method's own).
    search : {"coordinate", "grid"}
        The hyperparameter search.
    n_folds : int
        Validation blocks.
    seed : int
        Root seed.
    filter_seeds : int
        Seeds per stochastic method.
    reference : str
        The method the others are compared with.
    system_params : dict
        Parameters of the system in place of its defaults.
    grid_axes : dict
        Axes that replace (or add) the same axes of each tuned method's grid, for the methods
        that have such a parameter (``--grid`` on the command line).
    """

    system: str
    runs: int = 10
    train_length: int = 1000
    test_length: int = 200
    methods: tuple = ()
    validation_length: int = 200
    param_grid: dict = None
    search: str = "coordinate"
    n_folds: int = 1
    seed: int = 0
    filter_seeds: int = 1
    reference: str = None
    system_params: dict = field(default_factory=dict)
    grid_axes: dict = field(default_factory=dict)

    @classmethod
    def checked(cls, system, runs=10, train_length=1000, test_length=200, methods=None, validation_length=None,
                param_grid=None, search="coordinate", n_folds=1, seed=0, filter_seeds=1, reference=None,
                system_params=None, grid_axes=None):
        """The configuration, every argument checked and every default resolved.

        Parameters
        ----------
        system, runs, train_length, test_length, methods, validation_length, param_grid, search
            As :func:`run_bench` takes them.
        n_folds, seed, filter_seeds, reference, system_params, grid_axes
            As :func:`run_bench` takes them (``methods``, ``validation_length`` and ``reference``
            may be None for the system's defaults).

        Returns
        -------
        BenchConfig
            The configuration, with the system's defaults filled in.

        Raises
        ------
        ValueError
            Naming the first bad argument.
        """
        system_params = dict(system_params or {})
        bench_system = make_system(system, system_params)  # the system's name and parameters
        methods = tuple(DEFAULT_METHODS[system] if methods is None else methods)
        if not methods:
            raise ValueError("methods: expected at least one method")
        for name in methods:
            check_choice(name, "methods", tuple(CATALOGUE))
        if len(set(methods)) < len(methods):
            raise ValueError(f"methods: each method once, got {list(methods)}")
        check_int(runs, "runs")
        check_int(test_length, "test_length")
        check_int(seed, "seed", minimum=0)
        check_int(filter_seeds, "filter_seeds")
        check_choice(search, "search", ("coordinate", "grid"))
        train_length = check_int(train_length, "train_length")
        validation_length, n_folds = check_validation_length(
            train_length, bench_validation_length(train_length, validation_length), n_folds)
        if reference is not None:
            check_choice(reference, "reference", methods)
        grid_axes = _checked_axes(grid_axes, bench_system, methods)
        return cls(system, runs, train_length, test_length, methods, validation_length, param_grid, search, n_folds,
                   seed, filter_seeds, reference_method(system, reference, methods), system_params, grid_axes)

    def record(self):
        """The configuration as ``results.json`` records it.

        Returns
        -------
        dict
            Every field but the system's name and the grid, the methods as a list.
        """
        record = asdict(self)
        del record["system"], record["param_grid"]
        record["methods"] = list(self.methods)
        record["grid_axes"] = {k: list(v) for k, v in self.grid_axes.items()}
        return record


@contextlib.contextmanager
def failure_noted(note):
    """Add ``note`` to an exception raised inside (Python 3.11 and later: the traceback ends with
    it), so that a failure deep in a long benchmark says where it happened."""
    try:
        yield
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        raise


def _run_of(seed):
    """The run of ``seed`` (a ``SeedSequence`` spawned by :func:`run_bench`): its number, and the
    words naming it; None and the seed's own words for a seed given otherwise."""
    run = seed.spawn_key[-1] if len(seed.spawn_key) == 1 else None
    return run, f"in run {run} of seed {seed.entropy}" if run is not None else f"in the run of {seed!r}"


def _run_named(method, seed):
    """The note of a failure of ``method`` in the run of ``seed``, with the call that repeats that
    run alone."""
    run, where = _run_of(seed)
    again = f" (run_bench(..., seed={seed.entropy}, first_run={run}, runs=1) repeats it)" if run is not None else ""
    return f"kbfilter bench: raised by method {method!r} {where}{again}"


#: what :func:`run_trial` and :func:`run_bench` do when a method raises in a run
ON_ERROR = ("record", "raise")


def _failure_recorded(row, name, exc, seed):
    """Take ``name``'s partial entries out of ``row``, record its failure and say so: the other
    methods' results of the run stand."""
    for entry in ("tune_s", "fit_s", "params", "extended"):  # what _fitted records before the method can fail
        row[entry].pop(name, None)
    row["failed"][name] = f"{type(exc).__name__}: {exc}"
    run, where = _run_of(seed)
    again = (f"; run_bench(..., seed={seed.entropy}, first_run={run}, runs=1, on_error='raise') repeats it with its "
             f"traceback (on the command line: the same options with --seed {seed.entropy} --first-run {run} --runs 1 "
             f"--on-error raise)" if run is not None else "; on_error='raise' gives its traceback")
    warn_user(f"run_bench: method {name!r} failed {where} ({row['failed'][name]}); its results of that run are "
              f"left out, the run's other methods are kept{again}", UserWarning)


def run_trial(config, seed, train_length=None, test_length=None, methods=None, validation_length=None,
              param_grid=None, search="coordinate", keep_estimates=False, n_folds=1, filter_seeds=1, reference=None,
              system_params=None, on_error="record"):
    """One run: simulate, tune the kernel Bayes filters on validation, filter the test sequence
    with every method. Returns a dict of per-method results (and the test trajectory if asked).
    ``seed`` (an int or a ``numpy.random.SeedSequence``) fixes the data and every draw: the same
    seed gives the same row each time it is passed.

    A stochastic method (a particle filter) is tuned with ``filter_seeds`` seeds per validation
    block and run on the test sequence once per seed; its errors and time per step are the means
    over seeds, and ``mse_per_seed`` keeps each one. The first seed is the one a single-seed
    run uses.

    For a controlled system (one with ``dim_u``, e.g. :class:`~kbfilter.systems.RobotInRoom`)
    the controls go to fitting, tuning and filtering. The errors are the system's
    (:meth:`~kbfilter.systems.System.errors`): ``mse``, and any others under ``"errors"``. With
    ``keep_estimates``, the particles of ``reference`` (default: the system's
    :func:`~kbfilter.bench.reference_method`) are kept at a few test steps for the figures.
    ``system_params`` builds the system (:func:`~kbfilter.bench.make_system`).

    A method that raises is, with ``on_error="record"``, left out of the run: its message goes
    into the row's ``failed`` (method -> ``"ExceptionType: message"``), a warning names the method
    and the run, and the other methods run on. ``on_error="raise"`` lets the exception through,
    with a note naming the method and the run.

    ``config`` is a :class:`BenchConfig` (the arguments after ``seed`` are then not used) or the
    system's name, with the protocol in the other arguments."""
    on_error = check_choice(on_error, "on_error", ON_ERROR)
    if not isinstance(config, BenchConfig):
        config = BenchConfig.checked(config, 1, train_length, test_length, methods, validation_length, param_grid,
                                     search, n_folds, 0, filter_seeds, reference, system_params)
    system = make_system(config.system, config.system_params)
    train_length, test_length, filter_seeds = config.train_length, config.test_length, config.filter_seeds
    seed = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    sim_seed, filter_seed = _children(seed, 2)
    streams = [filter_seed, *_children(filter_seed, filter_seeds - 1)]
    rng = np.random.default_rng(sim_seed)
    if getattr(system, "dim_u", None) is not None:
        states, controls, obs = system.simulate(train_length, rng)
        data = (states, obs, controls)
        test_states, test_controls, test_obs = system.simulate(test_length, rng)
        test_latent = test_states
    else:
        data = system.simulate(train_length, rng)
        test_states, test_obs, test_latent = system.simulate(test_length, rng, return_latent=True)
        test_controls = None
    row = {"mse": {}, "errors": {}, "nees": {}, "nis": {}, "ms_per_step": {}, "fit_s": {}, "tune_s": {}, "params": {},
           "extended": {}, "mse_per_seed": {}, "failed": {}}
    estimates, particles, weights = {}, {}, {}
    for name in config.methods:
        method = CATALOGUE[name]
        snapshots = SNAPSHOT_STEPS if keep_estimates and name == config.reference else ()
        # the bench's own bar counts the runs; the fits inside one are quiet; a failure says which
        # method and run raised it, and how to run that alone again
        try:
            # numerical events are counted in the filters' diagnostics, not printed
            with ignored(NumericalWarning), quiet_progress(), failure_noted(_run_named(name, seed)):
                # every method that draws random numbers gets the same fresh streams
                rngs = [np.random.default_rng(s) for s in (streams if method.stochastic else streams[:1])]
                given, us = (data, test_controls) if method.controls else (data[:2], None)
                filt = _fitted(method, system, given, rngs[0], row, config)
                draws = []
                for k, rng in enumerate(rngs):
                    draw = filt if k == 0 else _reseeded(method, system, filt, given, rng)
                    start = time.perf_counter()
                    means, covs, kept, innovations = _filtered(
                        draw, test_latent if method.kind == "oracle" else test_obs, us, snapshots if k == 0 else ())
                    seconds = time.perf_counter() - start - (0.0 if innovations is None else innovations.seconds)
                    draws.append((1000 * seconds / test_length, system.errors(means, test_states), means, kept,
                                  mean_nees(test_states, means, covs),
                                  None if innovations is None else innovations.mean()))
        except Exception as exc:  # a method's failure in one run costs that run's entry, not the study
            if on_error == "raise":
                raise
            _failure_recorded(row, name, exc, seed)
            continue
        row["ms_per_step"][name] = float(np.mean([ms for ms, *_ in draws]))
        for key, consistency in (("nees", [d[-2] for d in draws]), ("nis", [d[-1] for d in draws])):
            row[key][name] = None if None in consistency else float(np.mean(consistency))
        errors = {metric: [e[metric] for _, e, *_ in draws] for metric in draws[0][1]}
        row["mse_per_seed"][name] = errors["mse"]
        row["mse"][name] = float(np.mean(errors.pop("mse")))
        for metric, values in errors.items():
            row["errors"].setdefault(metric, {})[name] = float(np.mean(values))
        if keep_estimates:
            _, _, means, kept, *_ = draws[0]
            estimates[name] = means
            if kept:
                particles[name] = {t: cloud for t, (cloud, _) in kept.items()}
                weights[name] = {t: w for t, (_, w) in kept.items()}
    row["methods"] = list(config.methods)  # the failed ones included, in the table's order
    if keep_estimates:
        row["trajectory"] = {"states": test_states, "observations": test_obs, "latent": test_latent,
                             "estimates": estimates, "particles": particles, "particle_weights": weights}
    return row


def check_bench_arguments(system, runs=10, train_length=1000, test_length=200, methods=None,
                          validation_length=None, n_folds=1, seed=0, n_jobs=None, filter_seeds=1, reference=None,
                          system_params=None):
    """Validate the arguments of :func:`run_bench` before any work; returns the method names
    (:meth:`BenchConfig.checked`, and ``n_jobs``).

    Raises ``ValueError`` naming the first bad argument.
    """
    check_n_jobs(n_jobs)
    return BenchConfig.checked(system, runs, train_length, test_length, methods, validation_length, None,
                               "coordinate", n_folds, seed, filter_seeds, reference, system_params).methods


@limited_blas
def run_bench(system, runs=10, train_length=1000, test_length=200, methods=None, n_jobs=None, seed=0,
              progress=True, validation_length=None, param_grid=None, search="coordinate", n_folds=1,
              filter_seeds=1, reference=None, system_params=None, grid_axes=None, first_run=0, on_error="record"):
    """Run the benchmark; returns the per-run rows (the first one keeps its test trajectory).

    Every run gets its own spawned seed (``numpy.random.SeedSequence.spawn``), so the same ``seed``
    gives the same numbers whatever the number of workers or the backend.

    Parameters
    ----------
    system : str
        A name in :data:`~kbfilter.bench.SYSTEMS`.
    runs : int
        Independent runs.
    train_length, test_length : int
        Steps simulated for training (tuning included) and for the test.
    methods : sequence of str, optional
        Names in :data:`~kbfilter.bench.CATALOGUE`; the system's default set when None.
    n_jobs : int or None
        joblib workers for the runs.
    seed : int
        Root seed.
    progress : bool
        Show a progress bar.
    validation_length : int, optional
        Steps held out at the end of each training run to tune on; default
        :func:`bench_validation_length` (200, or half of a shorter run).
    n_folds, param_grid, search
        Passed to :func:`~kbfilter.tune_filter` (``param_grid`` None: each method's own grid).
    filter_seeds : int
        Seeds per stochastic method (the particle filters): each is tuned with that many runs per
        validation block (``n_repeats``) and run on the test sequence once per seed, and its
        errors are the means over seeds. More seeds make the paired comparison one of methods
        rather than of Monte Carlo draws, at that many times the cost.
    reference : str, optional
        One of ``methods``, the one compared with the others; run 0 keeps its particles at a few
        test steps for the figures. Default: the system's :func:`~kbfilter.bench.reference_method`
        when it is among ``methods``, else the first of them.
    system_params : dict, optional
        The system's parameters in place of its defaults, e.g. ``{"distinct_walls": False}`` for
        ``localization`` (see :func:`~kbfilter.bench.make_system`).
    grid_axes : dict, optional
        Values for one or more grid axes, e.g. ``{"scale": (0.05, 0.1, 0.2)}``: they replace the
        same axis of each tuned method's grid (or add it), for the methods that have that
        parameter; ``kbfilter bench --grid scale=0.05,0.1,0.2``.
    first_run : int
        Start at this run: ``first_run=5, runs=5`` makes runs 5 to 9 of the same root seed, the
        rows a ten-run call would end with, so a study can be extended without repeating it.
    on_error : {"record", "raise"}, default="record"
        What a method that raises in a run does: ``"record"`` leaves it out of that run (its
        message in the row's ``failed``, a warning naming the method, the run and the call that
        repeats it), so that the other runs and methods are kept; ``"raise"`` stops the bench
        with the exception, noted with the method and the run.

    Returns
    -------
    list of dict
        One row per run: ``mse``, ``nees`` (:func:`kbfilter.stats.mean_nees`), ``nis`` (the mean
        of the squared ``mahalanobis`` over the steps with an innovation; None for a method that
        reports none), ``ms_per_step``, ``fit_s``, ``tune_s``, ``params``,
        ``extended`` (the grid values tuning added past an edge, see
        :func:`~kbfilter.tune_filter`) and ``mse_per_seed`` by method, ``failed`` (the methods
        that raised in the run, with their messages; they have no other entry in it),
        ``methods`` (every method run, in order) and ``run`` (the run's number in the seed's
        study: ``first_run`` for the first row).
    """
    check_n_jobs(n_jobs)
    progress = check_bool(progress, "progress")
    on_error = check_choice(on_error, "on_error", ON_ERROR)
    first_run = check_int(first_run, "first_run", minimum=0)
    if not isinstance(system, BenchConfig):
        system = BenchConfig.checked(system, runs, train_length, test_length, methods, validation_length, param_grid,
                                     search, n_folds, seed, filter_seeds, reference, system_params, grid_axes)
    config = system
    # spawned children depend only on their index, so runs first_run... are those of a longer call
    seeds = np.random.SeedSequence(config.seed).spawn(first_run + config.runs)[first_run:]
    jobs = (delayed(recorded)(run_trial, config, s, keep_estimates=(i == 0), on_error=on_error)
            for i, s in enumerate(seeds))
    results = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    with progress_bar(config.runs, f"bench {config.system}", unit="run", shown=progress) as bar:
        rows, caught = [], []
        for run, (row, messages) in enumerate(results, start=first_run):
            rows.append({"run": run, **row})
            caught += messages
            bar.update()
    reissued(caught)  # once each, at the caller's line, not at each worker's
    return rows
