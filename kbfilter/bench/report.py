"""The benchmark's report: statistics, the table, ``results.json`` / ``results.csv`` and figures."""

import contextlib
import csv
import datetime
import json
import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from numbers import Real
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from .._validation import check_choice, check_int, check_n_jobs
from ..stats import chi2_band
from .catalogue import BENCH_SYSTEMS, REFERENCE, make_system
from .runner import ON_ERROR, BenchConfig, run_bench

__all__ = ["folder_lock", "LOCK_NAME", "summarise", "format_table", "consistency_note", "write_results",
           "run_and_report", "writable_folder", "provenance", "system_parameters", "published", "partial_name"]

_PACKAGES = ("kbfilter", "numpy", "scipy", "scikit-learn", "filterpy", "joblib", "matplotlib")


#: the file a running benchmark holds in its output folder, so that a second run refuses the folder
LOCK_NAME = ".kbfilter-bench.lock"


@contextlib.contextmanager
def folder_lock(out):
    """Hold the output folder for one run: a second run into it is refused while this one lasts.

    The lock is a file naming the process that holds it; a lock left by a process that no longer
    runs (killed) is taken over.

    Parameters
    ----------
    out : path-like
        The folder (it exists).

    Raises
    ------
    ValueError
        Naming ``out``, when another running process holds it.
    """
    lock = Path(out) / LOCK_NAME
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            try:
                pid = int(lock.read_text() or 0)
                os.kill(pid, 0)
            except (ValueError, ProcessLookupError, FileNotFoundError):
                lock.unlink(missing_ok=True)  # left by a run that died: take it over
                continue
            except PermissionError:
                pass  # the process exists and belongs to someone else
            raise ValueError(f"out: {str(out)!r} is in use by another kbfilter bench (process {pid}); wait for it "
                             f"to finish or choose another --out") from None
    else:
        raise ValueError(f"out: cannot take {str(lock)!r}")
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield Path(out)
    finally:
        lock.unlink(missing_ok=True)


def writable_folder(out):
    """Create the folder ``out`` if needed and check that files can be written in it.

    Raises ``ValueError`` naming ``out`` otherwise.
    """
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kbfilter-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"out: cannot write results to {str(out)!r} ({exc.strerror or exc})") from exc
    return out


def system_parameters(system):
    """A system's scalar parameters (nested systems included), for the record.

    Parameters
    ----------
    system : System
        A system instance.

    Returns
    -------
    dict
        ``{"class": name, parameter: value, ...}``; arrays (rendered panoramas, pixel grids) are
        left out.
    """
    params = {"class": type(system).__name__}
    for name, value in vars(system).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (bool, int, float, str)):
            params[name] = value
        elif isinstance(value, tuple) and all(isinstance(v, (int, float)) for v in value):
            params[name] = list(value)
        elif hasattr(value, "simulate"):
            params[name] = system_parameters(value)
    return params


def provenance(system, command=None):
    """What produced a result: the command line, the date, the package versions and the system.

    Parameters
    ----------
    system : str, System or None
        A name in :data:`~kbfilter.bench.SYSTEMS`, or a system (None: a run that has no system,
        such as the benchmark on recorded tracks).
    command : list of str, optional
        The command line (default: this process's ``sys.argv``).

    Returns
    -------
    dict
        ``command``, ``date`` (UTC), ``python``, ``platform``, ``versions`` (package -> version)
        and, when a system is given, ``system`` (its parameters).
    """
    versions = {}
    for package in _PACKAGES:
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    if command is None:
        command = [Path(sys.argv[0]).name] + sys.argv[1:]
    record = {"command": list(command),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "python": platform.python_version(), "platform": platform.platform(), "versions": versions}
    if system is not None:
        record["system"] = system_parameters(make_system(system) if isinstance(system, str) else system)
    return record


#: what every row of run_bench holds for each method, and what summarise needs of it
_ROW_FIELDS = ("mse", "ms_per_step", "fit_s", "tune_s")
#: what every method's entry of a summary holds, and what format_table needs of it
_SUMMARY_FIELDS = ("mse_mean", "mse_std", "mse_median", "ms_per_step", "fit_s", "tune_s", "p_value", "wins")
#: the runs a method's MSE statistics leave out, counted in its entry of a summary
_LEFT_OUT = ("failed", "diverged")


def _checked_number(value, where, *, signed=False, finite=True):
    if (isinstance(value, bool) or not isinstance(value, Real) or (finite and not np.isfinite(value))
            or (value < 0 and not signed)):
        raise ValueError(f"{where}: expected a {'' if signed else 'non-negative '}{'finite ' if finite else ''}number, "
                         f"got {value!r}")
    return value


def _checked_reference(reference):
    if not isinstance(reference, str):
        raise ValueError(f"reference: expected a method's name, got {reference!r}")
    return reference


def _methods(row):
    """The methods a row of run_bench ran, in order: its ``methods``, or (a row from before it
    recorded them) those with an MSE and then those that failed."""
    return list(row.get("methods") or [*row["mse"], *row.get("failed", {})])


def _checked_rows(rows):
    """``rows`` as a list: run_bench's rows, each with a number in every field of :data:`_ROW_FIELDS`
    for each of the first row's methods that did not fail in it (an MSE may be infinite or NaN: a
    filter that diverged), and the same optional consistency and other errors."""
    rows = list(rows) if isinstance(rows, (list, tuple)) else None
    if not rows or not all(isinstance(row, dict) and all(isinstance(row.get(f), dict) for f in _ROW_FIELDS)
                           for row in rows):
        raise ValueError(f"rows: expected the non-empty list of rows run_bench returns, each a dict with "
                         f"{', '.join(_ROW_FIELDS)} per method")
    methods = _methods(rows[0])
    metrics = rows[0].get("errors", {})
    if not (isinstance(metrics, dict) and all(isinstance(v, dict) for v in metrics.values())):
        raise ValueError("rows[0]['errors']: expected a dict of metrics, each a dict of methods' values")
    for i, row in enumerate(rows):
        if _methods(row) != methods:
            raise ValueError(f"rows[{i}]['methods']: expected the first row's methods {methods}, got {_methods(row)}")
        failed = row.get("failed", {})
        if not (isinstance(failed, dict) and all(m in methods and isinstance(v, str) for m, v in failed.items())):
            raise ValueError(f"rows[{i}]['failed']: expected a dict of the methods that raised in the run and their "
                             f"messages, got {failed!r:.120}")
        ran = [m for m in methods if m not in failed]
        for field in _ROW_FIELDS:
            missing = [m for m in ran if m not in row[field]]
            if missing:
                raise ValueError(f"rows[{i}][{field!r}]: expected a value for every method of the first row, "
                                 f"missing {missing}")
            for m in ran:
                _checked_number(row[field][m], f"rows[{i}][{field!r}][{m!r}]", finite=field != "mse")
        scored = [m for m in ran if np.isfinite(row["mse"][m])]
        for key, what in (("nees", "NEES"), ("nis", "NIS")):
            consistency = row.get(key, {})
            if not isinstance(consistency, dict):
                raise ValueError(f"rows[{i}][{key!r}]: expected a dict of methods' mean {what}, got "
                                 f"{type(consistency).__name__}")
            for m, value in consistency.items():
                if value is not None:
                    _checked_number(value, f"rows[{i}][{key!r}][{m!r}]", finite=m in scored)
        for metric, values in metrics.items():  # every row carries what the first one does
            for m in values:
                if m in failed:
                    continue
                value = row.get("errors", {}).get(metric, {}).get(m) if isinstance(row.get("errors"), dict) else None
                if value is None:
                    raise ValueError(f"rows[{i}]['errors'][{metric!r}]: expected a value for {m!r}, as the first "
                                     f"row has")
                _checked_number(value, f"rows[{i}]['errors'][{metric!r}][{m!r}]", signed=True, finite=m in scored)
    return rows


def _mean(values):
    return float(np.mean(values)) if len(values) else None


def summarise(rows, reference=REFERENCE):
    """Per method: MSE mean, std, median; ms per step; fit and tune time; Wilcoxon p and wins
    of ``reference`` against the method (paired over runs).

    A run in which a method raised (the row's ``failed``) has no entry for it: its statistics
    leave that run out, and so does the pairing. A run in which it diverged (an infinite or NaN
    MSE) is left out of its MSE and consistency statistics, and counts in the pairing as a
    larger error than any finite one (a tie when both diverged). ``runs``, ``failed`` and
    ``diverged`` count the runs of each kind, ``pairs`` the runs paired with ``reference``.

    Parameters
    ----------
    rows : list of dict
        What :func:`~kbfilter.bench.run_bench` returns.
    reference : str
        The method the others are compared with.

    Returns
    -------
    dict
        Method name -> statistics (None where no run is left to give one).
    """
    rows, reference = _checked_rows(rows), _checked_reference(reference)
    methods = _methods(rows[0])

    ran = {m: [r for r in rows if m not in r.get("failed", {})] for m in methods}  # the runs it has results in

    def ranked(r, m):  # a diverged run's error is larger than any finite one
        return r["mse"][m] if np.isfinite(r["mse"][m]) else np.inf

    summary = {}
    for m in methods:
        scored = [r for r in ran[m] if np.isfinite(r["mse"][m])]
        mse = np.array([r["mse"][m] for r in scored])
        entry = {
            "mse_mean": _mean(mse), "mse_std": float(mse.std(ddof=1)) if len(mse) > 1 else 0.0 if len(mse) else None,
            "mse_median": float(np.median(mse)) if len(mse) else None,
            "ms_per_step": _mean([r["ms_per_step"][m] for r in ran[m]]),
            "fit_s": _mean([r["fit_s"][m] for r in ran[m]]),
            "tune_s": _mean([r["tune_s"][m] for r in ran[m]]),
            "p_value": None, "wins": None, "pairs": None,
            "runs": len(scored), "failed": len(rows) - len(ran[m]), "diverged": len(ran[m]) - len(scored),
        }
        for key in ("nees", "nis"):
            consistency = [r[key][m] for r in scored if r.get(key, {}).get(m) is not None]
            entry[f"{key}_mean"] = float(np.mean(consistency)) if scored and len(consistency) == len(scored) else None
        for metric, values in rows[0].get("errors", {}).items():  # the system's other errors, e.g. heading
            if m in values:
                entry[f"{metric}_mean"] = _mean([r["errors"][metric][m] for r in scored])
        if reference in methods and m != reference:
            both = [r for r in ran[m] if reference not in r.get("failed", {})]
            ref = np.array([ranked(r, reference) for r in both])
            other = np.array([ranked(r, m) for r in both])
            tied = np.isinf(ref) & np.isinf(other)  # both diverged: no difference between them
            ref[tied] = other[tied] = 0.0
            entry["wins"], entry["pairs"] = int(np.sum(ref < other)), len(both)
            if len(both) > 1 and np.any(ref != other):
                entry["p_value"] = float(wilcoxon(ref, other).pvalue)
        summary[m] = entry
    return summary


def format_table(summary, runs, reference=REFERENCE):
    """The summary as a plain-text table, one row per method.

    Parameters
    ----------
    summary : dict
        What :func:`summarise` returns.
    runs : int
        Number of runs (for the wins column, where a summary does not say how many runs were
        paired).
    reference : str
        The method the wins column compares against.

    Returns
    -------
    str
        The table, one line per method; with a last column counting the runs left out of a
        method's MSE (failed or diverged, see :func:`summarise`) when there are any.
    """
    if not (isinstance(summary, dict) and summary and all(isinstance(m, str) for m in summary)
            and all(isinstance(s, dict) and all(f in s for f in _SUMMARY_FIELDS) for s in summary.values())):
        raise ValueError(f"summary: expected what summarise returns, a non-empty dict of methods with "
                         f"{', '.join(_SUMMARY_FIELDS)}")
    for m, s in summary.items():
        for field in (*_SUMMARY_FIELDS, *_LEFT_OUT):  # None: no run left to give it (or no reference to pair with)
            if s.get(field) is not None:
                _checked_number(s[field], f"summary[{m!r}][{field!r}]")
    runs, reference = check_int(runs, "runs"), _checked_reference(reference)
    w = max(14, *(len(m) + 2 for m in summary))
    wins_w = max(14, len(reference) + 6)
    extra = [key for key in next(iter(summary.values())) if key.endswith("_mean") and key != "mse_mean"]
    extra_w = [max(10, len(key) - 3) for key in extra]
    left_out = {m: ", ".join(f"{s[k]} {k}" for k in _LEFT_OUT if s.get(k)) for m, s in summary.items()}
    left_w = max(len(v) for v in left_out.values())
    head = (f"{'method':<{w}}{'MSE mean ± std':>20}{'median':>9}"
            + "".join(f"{key[:-5]:>{width}}" for key, width in zip(extra, extra_w))
            + f"{'ms/step':>9}{'fit s':>8}{'tune s':>8}{'p (Wilcoxon)':>14}{f'{reference} wins':>{wins_w}}"
            + (f"  {'left out of the MSE':<{max(left_w, 19)}}" if left_w else ""))
    lines = [head, "-" * len(head)]
    for m, s in summary.items():
        p = "" if s["p_value"] is None else f"{s['p_value']:.2g}"
        pairs = runs if s.get("pairs") is None else s["pairs"]
        wins = "" if s["wins"] is None else f"{s['wins']}/{pairs}"
        mse = (f"{'-':>11}{'':9}" if s["mse_mean"] is None else
               f"{s['mse_mean']:>11.4f} ± {s['mse_std']:<6.4f}")
        lines.append((f"{m:<{w}}{mse}{_cell(s['mse_median'], 9, 4)}"
                      + "".join(_cell(s.get(key), width) for key, width in zip(extra, extra_w))
                      + f"{_cell(s['ms_per_step'], 9)}{_cell(s['fit_s'], 8)}{_cell(s['tune_s'], 8, 1)}{p:>14}"
                      + f"{wins:>{wins_w}}" + (f"  {left_out[m]}" if left_w else "")))
    return "\n".join(lines)


def _cell(value, width, digits=2):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def consistency_note(dim_x, steps, dim_z=None):
    """The lines under the table that say what a consistent filter's mean NEES and mean NIS are.

    Parameters
    ----------
    dim_x : int
        The state's dimension.
    steps : int
        Test steps over all runs (the mean NEES of the table averages over all of them).
    dim_z : int, optional
        The observation's dimension, for the NIS line (None: no such line, as for images).

    Returns
    -------
    str
        The note, with the 95 % bands of :func:`kbfilter.stats.chi2_band`.
    """
    low, high = chi2_band(dim_x, steps)
    note = (f"nees: mean NEES of the covariance each method reports; a consistent filter gives dim_x = {dim_x} "
            f"(95 % band over {steps} independent steps: {low:.2f}-{high:.2f}; errors correlated in time widen "
            f"it); above: over-confident, below: too cautious; '-': no positive definite covariance")
    if dim_z is None:
        return note
    low, high = chi2_band(check_int(dim_z, "dim_z"), steps)
    return (f"{note}\nnis: mean NIS, filterpy's mahalanobis squared, of the innovations each method reports (no "
            f"truth needed: what a tracker can check on real data); consistent: dim_z = {dim_z} (95 % band "
            f"{low:.2f}-{high:.2f}); '-': a method that reports none")


def write_results(out, system, rows, summary, config, command=None):
    """Write ``results.json``, ``results.csv`` and the figures.

    Parameters
    ----------
    out : str or path-like
        The folder (created if needed).
    system : str
        The system's name.
    rows : list of dict
        What :func:`~kbfilter.bench.run_bench` returns.
    summary : dict
        What :func:`summarise` returns.
    config : dict
        The run's settings, recorded in ``results.json``; its ``system_params``, if any, build the
        system whose parameters are recorded and whose room the map shows.
    command : list of str, optional
        The command line that asked for the run, recorded with the package versions, the date and
        the system's parameters (see :func:`provenance`).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    system_ = make_system(system, config.get("system_params"))
    runs = [{k: v for k, v in r.items() if k != "trajectory"} for r in rows]
    record = {"system": system, "provenance": provenance(system_, command), "config": config, "summary": summary,
              "runs": runs}
    return published(out, record, lambda: _write_table_and_figures(out, system, system_, rows))


def published(out, record, write_rest):
    """Write ``results.json`` and the files that go with it, all or none.

    Every file is written under a temporary name (:func:`partial_name`) and renamed into place
    once all are written, ``results.json`` last: a folder holds complete results or none
    (``results.json`` is what says a folder holds results). The record goes first, so that a
    failure later leaves it to recover.

    Parameters
    ----------
    out : pathlib.Path
        The folder (it exists).
    record : dict
        What ``results.json`` holds (JSON-serialisable).
    write_rest : callable
        ``write_rest()`` writes the other files, each under its temporary name, and returns their
        final names.

    Returns
    -------
    list of pathlib.Path
        The files written, ``results.json`` first.
    """
    partial = out / "results.partial.json"
    with open(partial, "w") as fh:
        json.dump(record, fh, indent=1)
    try:
        paths = write_rest()
    except (OSError, ValueError) as exc:
        raise OSError(f"could not write the results' table and figures to {str(out)!r} ({exc}); the results are "
                      f"in {str(partial)!r}") from exc
    for path in paths:
        os.replace(partial_name(path), path)
    os.replace(partial, out / "results.json")
    return [out / "results.json", *paths]


def partial_name(path):
    """The temporary name ``path`` is written under until its results are complete.

    Parameters
    ----------
    path : pathlib.Path
        The final name.

    Returns
    -------
    pathlib.Path
        ``NAME.partial.SUFFIX`` in the same folder.
    """
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def _write_table_and_figures(out, system, system_, rows):
    """results.csv and the figures, each under its temporary name; returns the final names."""
    from ..plots import plot_frames, plot_map, plot_mse_box, plot_trajectory, save_figure

    with open(partial_name(out / "results.csv"), "w", newline="") as fh:
        writer = csv.writer(fh)
        metrics = list(rows[0].get("errors", {}))
        writer.writerow(["run", "method", "mse", *metrics, "nees", "nis", "ms_per_step", "fit_s", "tune_s", "failed"])
        for i, r in enumerate(rows):
            run = r.get("run", i)  # the run's number in its seed's study (from run_bench's first_run)
            for m in _methods(r):
                if m in r.get("failed", {}):  # no results: the message in the last column
                    writer.writerow([run, m, *[""] * (len(metrics) + 6), r["failed"][m]])
                    continue
                writer.writerow([run, m, r["mse"][m], *(r["errors"][k][m] for k in metrics), r.get("nees", {}).get(m),
                                 r.get("nis", {}).get(m), r["ms_per_step"][m], r["fit_s"][m], r["tune_s"][m], ""])
    paths = [out / "results.csv", out / "mse_boxplot.png", out / "trajectory.png"]
    ax = plot_mse_box({m: [r["mse"].get(m, np.nan) for r in rows] for m in _methods(rows[0])})  # NaN: failed
    ax.set_title(f"{system}: test MSE over {len(rows)} runs")
    save_figure(ax, partial_name(paths[1]))
    traj = rows[0]["trajectory"]
    shown = min(100, len(traj["states"]))
    ax = plot_trajectory(traj["states"], traj["estimates"], steps=shown)
    ax.figure.suptitle(f"{system}: run 0, first {shown} test steps (panel MSEs over those steps and all state "
                       f"coordinates; the table's are over every test step)", fontsize=9)
    save_figure(ax, partial_name(paths[2]))
    if hasattr(system_, "top_down"):  # a map: the room from above with the paths and the particles
        paths.append(out / "map.png")
        ax = plot_map(system_, traj["states"], traj["estimates"], traj.get("particles", {}),
                      weights=traj.get("particle_weights"))
        ax.set_title(f"{system}: run 0, the test path from above")
        save_figure(ax, partial_name(paths[-1]))
    elif np.asarray(traj["observations"]).ndim > 2:  # images: a row of frames with truth and estimates
        steps = np.linspace(0, len(traj["states"]) - 1, 6).astype(int)
        shown = [m for m in BENCH_SYSTEMS[system].frame_methods if m in traj["estimates"]]
        titles = ["t=%d true %s\n" % (t, np.round(traj["states"][t], 2))
                  + "\n".join(f"{m} {np.round(traj['estimates'][m][t], 2)}" for m in shown) for t in steps]
        points = {"true": traj["states"], **{m: traj["estimates"][m] for m in shown}}
        coords = {k: system_.pixel_coordinates(v[steps], traj["latent"][steps]) for k, v in points.items()}
        marks = [{k: tuple(c[j]) for k, c in coords.items()} for j in range(len(steps))]
        paths.append(out / "frames.png")
        save_figure(plot_frames(np.asarray(traj["observations"])[steps], titles, marks), partial_name(paths[-1]))
    return paths


def run_and_report(system, out, runs=10, train_length=1000, test_length=200, methods=None, n_jobs=None,
                   seed=0, progress=True, validation_length=None, search="coordinate", n_folds=1, print_fn=print,
                   command=None, filter_seeds=1, reference=None, system_params=None, first_run=0, on_error="record"):
    """:func:`~kbfilter.bench.run_bench`, then print the table and write results and figures to ``out``.

    Every argument is checked, and ``out`` is made sure to be writable, before the run starts.

    Parameters
    ----------
    system : str or BenchConfig
        A name in :data:`~kbfilter.bench.SYSTEMS`, or a checked configuration (the protocol's
        arguments are then not used).
    out : str or path-like
        The results folder.
    runs, train_length, test_length, methods, n_jobs, seed, progress, validation_length, search, n_folds
        As in :func:`~kbfilter.bench.run_bench`.
    print_fn : callable, default=print
        Where the table and the closing line go.
    command : list of str, optional
        The command line recorded in ``results.json``.
    filter_seeds, reference, system_params, first_run, on_error
        As in :func:`~kbfilter.bench.run_bench`; ``results.json`` records ``first_run`` with the
        settings.

    Returns
    -------
    rows : list of dict
        What :func:`~kbfilter.bench.run_bench` returns.
    summary : dict
        What :func:`summarise` returns.
    """
    check_n_jobs(n_jobs)
    on_error = check_choice(on_error, "on_error", ON_ERROR)
    first_run = check_int(first_run, "first_run", minimum=0)
    config = system if isinstance(system, BenchConfig) else BenchConfig.checked(
        system, runs, train_length, test_length, methods, validation_length, None, search, n_folds, seed, filter_seeds,
        reference, system_params)
    out = writable_folder(out)  # before the run, so that its results cannot be lost at the end
    with folder_lock(out):
        start = time.perf_counter()
        rows = run_bench(config, n_jobs=n_jobs, progress=progress, first_run=first_run, on_error=on_error)
        summary = summarise(rows, config.reference)
        print_fn(format_table(summary, config.runs, config.reference))
        model = make_system(config.system, config.system_params)
        images = len(getattr(model, "obs_shape", None) or ()) > 1  # their innovations are none
        print_fn(consistency_note(model.dim_x, config.runs * config.test_length, None if images else model.dim_z))
        paths = write_results(out, config.system, rows, summary, {**config.record(), "first_run": first_run}, command)
    print_fn(f"\n{time.perf_counter() - start:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return rows, summary
