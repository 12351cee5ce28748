import json
import os
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest

import kbfilter as kb
from kbfilter.bench import format_table, run_bench, run_trial, summarise
from kbfilter.cli import EXIT_FAILED_RUNS, main

TINY = dict(runs=2, train_length=60, test_length=15, validation_length=20, progress=False,
            methods=("kbf-iw", "ekf", "pf"),
            param_grid={"scale": (0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-3, 1e-1)})


def strip_times(rows):
    return [{k: r[k] for k in ("mse", "params")} for r in rows]


def test_a_method_that_fails_in_a_run_is_named_with_the_call_that_repeats_the_run(monkeypatch):
    """A failure deep in a long bench had said what failed but not in which method or run."""
    import sys

    if sys.version_info < (3, 11):
        pytest.skip("exception notes are Python 3.11's")

    def fails(self, zs, *args, **kwargs):
        raise np.linalg.LinAlgError("UnscentedKalman: no sigma points can be drawn")

    monkeypatch.setattr(kb.filters.UnscentedKalman, "batch_filter", fails)
    with pytest.raises(np.linalg.LinAlgError, match="no sigma points") as caught:
        run_bench("rotation", runs=1, first_run=3, seed=5, train_length=60, test_length=10, validation_length=20,
                  methods=["ekf", "ukf"], n_jobs=1, progress=False, on_error="raise")
    assert caught.value.__notes__ == ["kbfilter bench: raised by method 'ukf' in run 3 of seed 5 "
                                      "(run_bench(..., seed=5, first_run=3, runs=1) repeats it)"]


SHORT = dict(train_length=60, test_length=10, validation_length=20, methods=["ekf", "ukf", "pf"], progress=False)


def _fails_every_other_call(monkeypatch, cls, exc):
    calls = []
    batch_filter = cls.batch_filter

    def fails(self, zs, *args, **kwargs):
        calls.append(1)
        if len(calls) % 2:
            raise exc
        return batch_filter(self, zs, *args, **kwargs)

    monkeypatch.setattr(cls, "batch_filter", fails)


def test_a_method_that_fails_in_some_runs_costs_those_runs_entries_not_the_study(monkeypatch, tmp_path):
    """One method raising in one run had lost every run's results, the others' included."""
    import warnings

    whole = run_bench("rotation", runs=4, seed=2, n_jobs=1, **SHORT)
    _fails_every_other_call(monkeypatch, kb.filters.UnscentedKalman, np.linalg.LinAlgError("no sigma points"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = run_bench("rotation", runs=4, seed=2, n_jobs=1, **SHORT)
    assert [r["failed"] for r in rows] == [{"ukf": "LinAlgError: no sigma points"}, {}] * 2
    notes = [str(w.message) for w in caught if "failed in run" in str(w.message)]
    assert len(notes) == 2 and all(w.filename == __file__ for w in caught if "failed in run" in str(w.message))
    assert notes[0].startswith("run_bench: method 'ukf' failed in run 0 of seed 2 (LinAlgError: no sigma "
                               "points)") and "first_run=0, runs=1, on_error='raise') repeats it" in notes[0]
    # the other methods' results, and the failed one's in the other runs, are those of the run without failures
    for row, full in zip(rows, whole):
        assert row["methods"] == ["ekf", "ukf", "pf"]
        ran = [m for m in ("ekf", "ukf", "pf") if m not in row["failed"]]
        assert row["mse"] == {m: full["mse"][m] for m in ran}
        assert set(row["fit_s"]) == set(row["tune_s"]) == set(row["ms_per_step"]) == set(ran)
    summary = summarise(rows, reference="ekf")
    ukf = [full["mse"]["ukf"] for full in whole[1::2]]
    assert summary["ukf"]["mse_mean"] == pytest.approx(np.mean(ukf), rel=1e-12)
    assert (summary["ukf"]["runs"], summary["ukf"]["failed"], summary["ukf"]["pairs"]) == (2, 2, 2)
    assert summary["ukf"]["wins"] == sum(full["mse"]["ekf"] < full["mse"]["ukf"] for full in whole[1::2])
    timings = ("ms_per_step", "fit_s", "tune_s")
    untouched = summarise(whole, reference="ekf")["pf"]  # untouched by the other's failures
    assert {k: v for k, v in summary["pf"].items() if k not in timings} == {
        k: v for k, v in untouched.items() if k not in timings}
    table = format_table(summary, 4, "ekf")
    assert "left out of the MSE" in table.splitlines()[0] and table.splitlines()[3].endswith("2 failed")
    assert "left out" not in format_table(summarise(whole, "ekf"), 4, "ekf")
    # the files hold every run, the failed entries with their messages
    kb.bench.write_results(tmp_path, "rotation", rows, summary, {})
    lines = (tmp_path / "results.csv").read_text().splitlines()
    assert lines[0].endswith(",failed") and lines[2] == "0,ukf,,,,,,,LinAlgError: no sigma points"
    assert json.loads((tmp_path / "results.json").read_text())["runs"][0]["failed"] == rows[0]["failed"]


def test_a_run_fails_alike_in_a_worker_and_a_method_failing_everywhere_is_a_row_of_dashes(monkeypatch):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fails_every_other_call(monkeypatch, kb.filters.UnscentedKalman, ValueError("bad"))
        one = run_bench("rotation", runs=2, seed=2, n_jobs=1, **SHORT)
        monkeypatch.undo()
        monkeypatch.setattr(kb.filters.UnscentedKalman, "batch_filter",
                            lambda self, *a, **k: (_ for _ in ()).throw(ValueError("bad")))
        with joblib.parallel_config(backend="threading"):  # workers that see the patched method
            two = run_bench("rotation", runs=2, seed=2, n_jobs=2, **SHORT)
    assert [r["failed"] for r in one] == [{"ukf": "ValueError: bad"}, {}]
    assert [r["failed"] for r in two] == [{"ukf": "ValueError: bad"}] * 2
    assert [w.filename for w in caught if "failed in run 1 of seed 2" in str(w.message)] == [__file__]
    summary = summarise(two, reference="ekf")
    assert summary["ukf"]["mse_mean"] is None and summary["ukf"]["wins"] == 0 and summary["ukf"]["pairs"] == 0
    line = format_table(summary, 2, "ekf").splitlines()[3]
    assert line.split()[:5] == ["ukf", "-", "-", "-", "-"] and line.endswith("2 failed")
    with pytest.raises(ValueError, match="on_error: expected one of"):
        run_bench("rotation", runs=1, on_error="skip", **SHORT)


def test_a_diverged_method_is_reported_not_a_report_that_fails_after_the_runs(monkeypatch, tmp_path):
    """An infinite MSE (a filter that diverged) had made the summary refuse the rows after every
    run had finished, and nothing was written."""
    batch_filter = kb.filters.ExtendedKalman.batch_filter
    calls = []

    def diverges(self, zs, *args, **kwargs):
        means, *rest = batch_filter(self, zs, *args, **kwargs)
        calls.append(1)
        if len(calls) != 2:
            means = means.copy()
            means[3:] = np.inf
        return (means, *rest)

    monkeypatch.setattr(kb.filters.ExtendedKalman, "batch_filter", diverges)
    rows, summary = kb.bench.run_and_report("rotation", tmp_path, runs=3, seed=2, n_jobs=1, print_fn=lambda s: None,
                                            **{k: v for k, v in SHORT.items()})
    assert [np.isinf(r["mse"]["ekf"]) for r in rows] == [True, False, True]
    ekf = summary["ekf"]
    assert (ekf["runs"], ekf["diverged"], ekf["failed"]) == (1, 2, 0) and ekf["mse_mean"] == rows[1]["mse"]["ekf"]
    assert ekf["nees_mean"] is None or np.isfinite(ekf["nees_mean"])
    # paired with the reference, a diverged run is a loss for the one that diverged
    pf = summarise(rows, reference="ekf")["pf"]
    assert pf["wins"] == int(rows[1]["mse"]["ekf"] < rows[1]["mse"]["pf"]) and pf["pairs"] == 3
    ukf = summarise(rows, reference="ukf")["ekf"]
    assert ukf["wins"] == 2 + int(rows[1]["mse"]["ukf"] < rows[1]["mse"]["ekf"])
    assert (tmp_path / "results.json").exists() and "2 diverged" in format_table(summary, 3, "pf")


def test_same_seed_gives_identical_tables():
    a = run_bench("rotation", seed=7, n_jobs=1, **TINY)
    b = run_bench("rotation", seed=7, n_jobs=2, **TINY)
    c = run_bench("rotation", seed=8, n_jobs=1, **TINY)
    assert strip_times(a) == strip_times(b)
    assert strip_times(a) != strip_times(c)
    summary = summarise(a)
    assert summary["ekf"]["wins"] in (0, 1, 2) and summary["kbf-iw"]["wins"] is None
    assert "kbf-iw wins" in format_table(summary, 2)


def test_the_report_refuses_rows_and_summaries_that_are_not_the_benchs_by_name():
    row = {"mse": {"a": 1.0, "b": 2.0}, "ms_per_step": {"a": 1.0, "b": 1.0}, "fit_s": {"a": 0.0, "b": 0.0},
           "tune_s": {"a": 0.0, "b": 0.0}}
    assert summarise([row, row], reference="a")["b"]["wins"] == 2
    with pytest.raises(ValueError, match="rows: expected the non-empty list of rows run_bench returns"):
        summarise([])
    with pytest.raises(ValueError, match=r"rows\[1\]\['fit_s'\]: expected a value for every method .* \['b'\]"):
        summarise([row, dict(row, fit_s={"a": 0.0})])
    with pytest.raises(ValueError, match="summary: expected what summarise returns"):
        format_table({"a": {"mse_mean": 1.0}}, 1)
    with pytest.raises(ValueError, match="runs: expected an integer >= 1"):
        format_table(summarise([row]), 0)
    # a value that is not a number would make a NaN mean, or a TypeError deep in numpy
    for bad in (-1.0, "2", None, True):
        with pytest.raises(ValueError, match=r"rows\[1\]\['mse'\]\['b'\]: expected a non-negative number"):
            summarise([row, dict(row, mse={"a": 1.0, "b": bad})])
    # a NaN MSE is a filter that diverged: counted as such, not averaged
    diverged = summarise([row, dict(row, mse={"a": 1.0, "b": np.nan})], reference="a")["b"]
    assert (diverged["runs"], diverged["diverged"], diverged["mse_mean"], diverged["wins"]) == (1, 1, 2.0, 2)
    with pytest.raises(ValueError, match=r"rows\[0\]\['nees'\]\['b'\]: expected a non-negative finite number"):
        summarise([dict(row, nees={"a": None, "b": "x"})])
    heading = dict(row, errors={"heading": {"b": 0.5}})
    with pytest.raises(ValueError, match=r"rows\[1\]\['errors'\]\['heading'\]: expected a value for 'b'"):
        summarise([heading, row])
    assert summarise([heading, heading], reference="a")["b"]["heading_mean"] == 0.5
    for call in (lambda: summarise([row], reference=3), lambda: format_table(summarise([row]), 1, reference=3)):
        with pytest.raises(ValueError, match="reference: expected a method's name"):
            call()
    broken = {m: dict(entry, mse_mean="x") for m, entry in summarise([row]).items()}
    with pytest.raises(ValueError, match=r"summary\['a'\]\['mse_mean'\]: expected a non-negative finite number"):
        format_table(broken, 1)


def test_first_run_makes_the_runs_a_longer_call_ends_with():
    both = run_bench("rotation", seed=7, n_jobs=1, **TINY)
    second = run_bench("rotation", seed=7, n_jobs=1, first_run=1, **dict(TINY, runs=1))
    assert strip_times(second) == strip_times(both[1:])
    assert strip_times(second) != strip_times(both[:1])
    with pytest.raises(ValueError, match="first_run: expected an integer >= 0"):
        run_bench("rotation", first_run=-1, **TINY)
    # a truthy string showed a progress bar the caller had asked to hide
    with pytest.raises(ValueError, match="progress: expected True or False, got 'no'"):
        run_bench("rotation", **dict(TINY, progress="no"))


def test_a_trial_given_the_same_seed_sequence_twice_simulates_the_same_data():
    seed = np.random.SeedSequence(7).spawn(2)[0]
    kwargs = dict(validation_length=20, param_grid=TINY["param_grid"], filter_seeds=2)
    first = run_trial("rotation", seed, 60, 15, ("kbf-iw", "pf"), **kwargs)
    second = run_trial("rotation", seed, 60, 15, ("kbf-iw", "pf"), **kwargs)
    assert strip_times([first]) == strip_times([second])
    assert first["mse_per_seed"]["pf"] == second["mse_per_seed"]["pf"]
    bench = run_bench("rotation", seed=7, n_jobs=1, **dict(TINY, methods=("kbf-iw", "pf"), filter_seeds=2))
    assert strip_times([first]) == strip_times(bench[:1])  # the bench's first run


def test_filter_seeds_average_the_particle_filters_and_leave_the_others_alone():
    one = run_bench("rotation", seed=7, n_jobs=1, **dict(TINY, runs=1))[0]
    three = run_bench("rotation", seed=7, n_jobs=1, filter_seeds=3, **dict(TINY, runs=1))[0]
    pf = three["mse_per_seed"]["pf"]
    assert len(pf) == 3 and len(set(pf)) == 3
    assert three["mse"]["pf"] == pytest.approx(np.mean(pf), rel=1e-12)
    assert pf[0] == one["mse"]["pf"]  # the first seed is the single-seed run's
    for deterministic in ("kbf-iw", "ekf"):
        assert three["mse_per_seed"][deterministic] == [one["mse"][deterministic]]
        assert three["mse"][deterministic] == one["mse"][deterministic]


def test_dask_local_cluster_gives_the_same_table_as_a_local_run():
    distributed = pytest.importorskip("dask.distributed")
    from joblib import parallel_config

    local = run_bench("oscillation", seed=3, n_jobs=1, **TINY)
    # the dashboard on any free port: the default, 8787, may be another test's (None means the default)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster), parallel_config(backend="dask"):
        remote = run_bench("oscillation", seed=3, **TINY)
    assert strip_times(local) == strip_times(remote)


def test_cli_bench_writes_results(tmp_path, capsys):
    code = main(["bench", "rotation", "--runs", "2", "--train-length", "50", "--validation-length", "20",
                 "--test-length", "10", "--methods", "ekf", "ukf", "pf", "--jobs", "1", "--quiet",
                 "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "MSE mean" in out and "ukf" in out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["system"] == "rotation" and len(data["runs"]) == 2
    for name in ("results.csv", "mse_boxplot.png", "trajectory.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "nis: mean NIS" in out and ",nees,nis," in (tmp_path / "results.csv").read_text().splitlines()[0]
    record = data["provenance"]
    assert record["command"][1:3] == ["bench", "rotation"] and record["date"].startswith("20")
    assert set(record["versions"]) >= {"kbfilter", "numpy", "scipy", "scikit-learn", "filterpy"}
    assert record["system"]["class"] == "Rotation" and record["system"]["omega"] > 0


def test_cli_backends_give_the_table_of_a_local_run(tmp_path, capsys):
    """``--backend`` (a joblib backend by name, or Dask on the scheduler ``--scheduler`` names) runs
    the same study: only where the runs are computed changes."""
    distributed = pytest.importorskip("dask.distributed")
    args = ["bench", "rotation", "--runs", "2", "--train-length", "50", "--validation-length", "20",
            "--test-length", "10", "--methods", "kbf-iw", "ukf", "--quiet"]

    def mses(out, *extra):
        assert main(args + ["--out", str(tmp_path / out), *extra]) == 0
        return [run["mse"] for run in json.loads((tmp_path / out / "results.json").read_text())["runs"]]

    local = mses("local", "--jobs", "1")
    assert mses("threads", "--backend", "threading", "--jobs", "2") == local
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        assert cluster.scheduler.transition_counter == 0
        assert mses("dask", "--backend", "dask", "--scheduler", cluster.scheduler_address) == local
        assert cluster.scheduler.transition_counter > 0    # the runs went to the cluster
    capsys.readouterr()


def test_warnings_of_runs_in_worker_processes_reach_the_caller_once(tmp_path, capsys):
    """A run's warnings (here tuning's grid edge) come back from the workers and are said once, at
    the caller's line; they had printed in each worker, at multiprocessing's line, and never
    reached the caller. The command line says them as its notes."""
    import warnings

    config = dict(TINY, methods=["kbf-iw"], grid_axes={"reg_update": (1e3, 3e3, 1e4)}, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_bench("rotation", n_jobs=2, **config)
    edges = [w for w in caught if "is the smallest value of its grid" in str(w.message)]
    assert len(edges) == 1 and edges[0].filename == __file__
    capsys.readouterr()
    assert main(["bench", "rotation", "--runs", "2", "--train-length", "60", "--validation-length", "20",
                 "--test-length", "15", "--methods", "kbf-iw", "--grid", "reg_update=1e3,3e3,1e4", "--seed", "1",
                 "--jobs", "2", "--quiet", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("kbfilter bench: UserWarning: tune_filter: the chosen reg_update=") == 1, err
    assert "multiprocessing" not in err and ".py:" not in err


def test_what_a_worker_warned_is_said_once_and_a_dependencys_deprecation_not_at_all():
    import warnings

    from kbfilter._warnings import recorded, reissued

    def work(x):
        for _ in range(3):
            warnings.warn("a grid edge", UserWarning)
        warnings.warn("some_function is deprecated", DeprecationWarning)
        warnings.warn("renamed in the next release", FutureWarning)
        return 2 * x

    result, messages = recorded(work, 21)
    assert result == 42 and [category for _, category in messages] == [UserWarning] * 3 + [FutureWarning]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reissued(messages)
    assert [(str(w.message), w.filename) for w in caught] == [("a grid edge", __file__),
                                                              ("renamed in the next release", __file__)]


def test_work_recorded_in_two_threads_at_once_keeps_each_threads_warnings_and_loses_none_after():
    """The first thread to start finishing first had left the second's exit restoring the first's
    recorder: every later warning of the process went to a list nobody read."""
    import threading
    import warnings

    from kbfilter._warnings import recorded

    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        first_in.set()
        second_in.wait(5)
        warnings.warn("from the first", UserWarning)

    def second():
        first_in.wait(5)
        second_in.set()
        first_out.wait(5)  # the first has finished recording
        warnings.warn("from the second", UserWarning)

    results = {}

    def run(name, work):
        results[name] = recorded(work)[1]
        if name == "first":
            first_out.set()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=run, args=("first", first))]
        threads[0].start()
        first_in.wait(5)
        threads.append(threading.Thread(target=run, args=("second", second)))
        threads[1].start()
        for thread in threads:
            thread.join(10)
        warnings.warn("after the threads", UserWarning)
    assert results == {"first": [("from the first", UserWarning)], "second": [("from the second", UserWarning)]}
    assert [str(w.message) for w in caught] == ["after the threads"]


def test_warnings_ignored_in_two_threads_at_once_are_each_threads_own_and_none_stay_ignored():
    """Two threads ignoring warnings with catch_warnings at once had left the process with the
    filter of the one that started last: after it, every warning of that kind was dropped."""
    import threading
    import warnings

    from kbfilter._warnings import ignored

    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    let_through = []

    def first():
        with ignored(UserWarning):
            first_in.set()
            second_in.wait(5)
            warnings.warn("dropped in the first", UserWarning)
            warnings.warn("the first's other kind", FutureWarning)
        first_out.set()

    def second():
        first_in.wait(5)
        with ignored(RuntimeWarning):
            second_in.set()
            first_out.wait(5)  # the first has left its scope
            warnings.warn("dropped in the second", RuntimeWarning)
            warnings.warn("not the second's to drop", UserWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        warnings.warn("after the threads", UserWarning)
        warnings.warn("after the threads", RuntimeWarning)
        let_through = [(str(w.message), w.category) for w in caught]
    assert let_through == [("the first's other kind", FutureWarning), ("not the second's to drop", UserWarning),
                           ("after the threads", UserWarning), ("after the threads", RuntimeWarning)]


def test_what_a_scope_lets_through_follows_the_callers_filters():
    import warnings

    from kbfilter._warnings import ignored

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("error", RuntimeWarning)
        with ignored(UserWarning):
            warnings.warn("dropped", UserWarning)
            warnings.warn("the caller ignores it", DeprecationWarning)
            warnings.warn("shown", FutureWarning)
            with pytest.raises(RuntimeWarning, match="the caller's error"):
                warnings.warn("the caller's error", RuntimeWarning)
        with ignored(UserWarning, message="drop"):
            warnings.warn("Dropped: its text matches", UserWarning)
            warnings.warn("kept: its text does not", UserWarning)
    assert [str(w.message) for w in caught] == ["shown", "kept: its text does not"]


def test_a_warning_a_scope_lets_through_is_shown_as_often_as_the_callers_filters_say():
    """The scope puts "always" in front of the process's filters, so that every warning reaches it:
    one it let through was then shown at every step of a loop, where the caller's "default" shows
    it once a line ("module" once a module, "once" once)."""
    import warnings

    from kbfilter._warnings import ignored

    def three_times(text, category=UserWarning):
        for _ in range(3):
            warnings.warn(text, category)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.simplefilter("always", FutureWarning)
        warnings.filterwarnings("once", message="once")
        with ignored(RuntimeWarning):
            three_times("a line")
            three_times("a line, again")
            three_times("always", FutureWarning)
            three_times("once")
            three_times("once")
        with ignored(RuntimeWarning):  # a new scope, as a new catch_warnings, forgets what was shown
            three_times("a line")
    assert [str(w.message) for w in caught] == ["a line", "a line, again"] + ["always"] * 3 + ["once", "a line"]


def test_cli_bench_compares_with_the_reference_it_is_given(tmp_path, capsys):
    code = main(["bench", "rotation", "--runs", "2", "--train-length", "50", "--validation-length", "20",
                 "--test-length", "10", "--methods", "ekf", "ukf", "--reference", "ukf", "--jobs", "1", "--quiet",
                 "--out", str(tmp_path)])
    assert code == 0
    assert "ukf wins" in capsys.readouterr().out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["reference"] == "ukf"
    ekf = [r["mse"]["ekf"] for r in data["runs"]]
    ukf = [r["mse"]["ukf"] for r in data["runs"]]
    assert data["summary"]["ekf"]["wins"] == sum(u < e for u, e in zip(ukf, ekf))
    assert data["summary"]["ukf"]["wins"] is None


def test_cli_never_overwrites_results_unless_forced(tmp_path, monkeypatch, capsys):
    args = ["bench", "rotation", "--runs", "1", "--train-length", "50", "--validation-length", "20",
            "--test-length", "5", "--methods", "ekf", "--jobs", "1", "--quiet"]
    monkeypatch.chdir(tmp_path)
    assert main(args) == 0 and main(args) == 0     # the default folder: a numbered sibling
    assert (tmp_path / "results/bench-rotation/results.json").exists()
    assert (tmp_path / "results/bench-rotation-2/results.json").exists()
    with pytest.raises(SystemExit) as stop:        # a folder the user named: asks for --force
        main(args + ["--out", "results/bench-rotation"])
    assert stop.value.code == 2 and "already holds results; pass --force" in capsys.readouterr().err
    assert main(args + ["--out", "results/bench-rotation", "--force"]) == 0


def test_image_bench_writes_frames_with_marks(tmp_path):
    from kbfilter.bench import write_results

    rows = run_bench("sprite", runs=1, train_length=80, test_length=12, validation_length=20, progress=False,
                     n_jobs=1, methods=("kbf-iw", "kbf-iw-blur", "pf-pixel"),
                     param_grid={"scale_z": (0.15,), "reg_prior": (1e-2,), "reg_update": (1e-2,)})
    traj = rows[0]["trajectory"]
    assert traj["latent"].shape == traj["states"].shape
    assert rows[0]["mse"]["kbf-iw-blur"] < 0.3     # tracks (0.10 measured; state variance ~1)
    paths = write_results(tmp_path, "sprite", rows, summarise(rows), {})
    assert (tmp_path / "frames.png") in paths and (tmp_path / "frames.png").stat().st_size > 0


@pytest.mark.parametrize("args, fragment", [
    (["bench", "pendulum"], "invalid choice"),
    (["bench", "rotation", "--runs", "0"], "--runs"),
    (["bench", "rotation", "--runs", "many"], "invalid int value"),
    (["bench", "rotation", "--train-length", "0"], "--train-length"),
    (["bench", "rotation", "--train-length", "100", "--validation-length", "200"], "--train-length"),
    (["bench", "rotation", "--folds", "0"], "--folds"),
    (["bench", "rotation", "--filter-seeds", "0"], "--filter-seeds"),
    (["bench", "rotation", "--folds", "3", "--train-length", "500"], "--folds x --validation-length"),
    (["bench", "rotation", "--methods", "lstm"], "invalid choice"),
    (["bench", "rotation", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler needs --backend dask"),
    (["bench", "rotation", "--validation-length", "0"], "--validation-length"),
    (["bench", "rotation", "--validation-length", "-5"], "--validation-length"),
    (["bench", "rotation", "--jobs", "0"], "--jobs"),
    (["bench", "rotation", "--seed", "-1"], "--seed"),
    (["bench", "rotation", "--test-length", "0"], "--test-length"),
    (["bench", "rotation", "--backend", "nonexistent"], "Invalid backend: nonexistent"),
    (["bench", "rotation", "--methods", "ekf", "--reference", "ukf"], "--reference: expected one of ['ekf']"),
    (["bench", "rotation", "--out", "/proc/kbfilter-cannot-write-here"], "--out: cannot write results"),
    (["bench", "rotation", "--system-param", "noise"], "--system-param: expected NAME=VALUE"),
    (["bench", "localization", "--system-param", "colour=red"], "RobotInRoom has no parameter 'colour'"),
    (["bench", "localization", "--system-param", "distinct_walls=maybe"],
     "--system-param: distinct_walls: expected True or False"),
])
def test_cli_bad_arguments_one_line_and_exit_code_2(args, fragment, tmp_path):
    # in a folder of its own, with this checkout's package: a refused command leaves nothing behind
    # (a bad --backend or --scheduler was found after the default output folder had been made)
    proc = subprocess.run([sys.executable, "-m", "kbfilter", *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(kb.__file__).parents[1])})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    # the error names the command, whether argparse or the bench's own checks found it
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("kbfilter bench: error: ")
    assert not list(tmp_path.iterdir())


def test_cli_without_a_command_shows_help_and_fails():
    proc = subprocess.run([sys.executable, "-m", "kbfilter"], capture_output=True, text=True)
    assert proc.returncode == 2 and "bench" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "kbfilter", "bench", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--train-length" in proc.stdout


def test_scenario_scripts_are_the_bench_with_the_protocol_defaults(tmp_path, capsys):
    from kbfilter.cli import scenario_main

    with pytest.raises(SystemExit) as stop:
        scenario_main("rotation", ["--runs", "0"])
    assert stop.value.code == 2 and "--runs" in capsys.readouterr().err
    code = scenario_main("rotation", ["--runs", "1", "--train-lengths", "40", "50", "--validation-length", "20",
                                      "--test-length", "5", "--methods", "ekf", "--jobs", "1", "--quiet",
                                      "--out", str(tmp_path)])
    assert code == 0
    for T in (40, 50):
        data = json.loads((tmp_path / f"train{T}" / "results.json").read_text())
        assert data["config"]["train_length"] == T and data["config"]["runs"] == 1


def test_the_catalogue_builds_every_method_for_every_system_it_runs_on():
    import numpy as np

    from kbfilter.bench import CATALOGUE, DEFAULT_METHODS, SYSTEMS

    for system_name, methods in DEFAULT_METHODS.items():
        system = SYSTEMS[system_name]()
        for name in methods:
            method = CATALOGUE[name]
            built = method.build(system, np.random.default_rng(0))
            assert hasattr(built, "batch_filter")
            assert (method.grid(system) is None) == (method.kind != "tuned")


def test_every_robot_method_builds_and_tunes_only_its_own_parameters():
    import numpy as np

    from kbfilter.bench import CATALOGUE, SYSTEMS

    robot = SYSTEMS["localization"]()
    for name, method in CATALOGUE.items():
        if name in ("ekf", "ukf", "pf", "kbf-iw-pca", "kbf-iw-learned", "window-mlp", "oracle-pf"):
            continue  # need a model of the observations, or features the robot's images are not made for
        built = method.build(robot, np.random.default_rng(0))
        assert hasattr(built, "batch_filter"), name
        if method.kind == "tuned":
            assert set(method.grid(robot)) <= set(built.get_params()), name


def test_the_scalable_methods_run_in_the_bench():
    from kbfilter.bench import run_bench

    grid = {"scale": (0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-2,)}
    rows = run_bench("oscillation", runs=1, train_length=260, test_length=20, validation_length=50,
                     methods=("kbf-iw-nystrom", "kbf-iw-nystrom-knn"), param_grid=grid, progress=False)
    for name in ("kbf-iw-nystrom", "kbf-iw-nystrom-knn"):
        assert 0 < rows[0]["mse"][name] < 0.5
        assert rows[0]["params"][name]["scale"] in (0.5, 1.0)


def test_localization_scenario_holds_out_half_of_a_short_log(tmp_path):
    from kbfilter.cli import scenario_main

    code = scenario_main("localization", ["--runs", "1", "--train-lengths", "60", "--test-length", "5",
                                          "--methods", "nai", "--jobs", "1", "--quiet", "--out", str(tmp_path)])
    assert code == 0
    data = json.loads((tmp_path / "train60" / "results.json").read_text())
    assert data["config"]["validation_length"] == 30
    assert set(data["runs"][0]["errors"]["heading_error_deg"]) == {"nai"}


def test_a_controlled_system_runs_the_methods_that_take_no_controls_and_reseeds_those_that_do():
    # the controls go to a filter by keyword: the window regressor refuses them and gets none, a
    # particle filter tuned once and drawn again with another seed gets them at fit and every step
    row = run_bench("localization", runs=1, train_length=60, test_length=5, validation_length=30, n_jobs=1,
                    methods=("window-mlp", "nn-pf"), filter_seeds=2, progress=False,
                    param_grid={"n_neighbors": (5,), "scale": (0.1,)})[0]
    assert set(row["mse"]) == {"window-mlp", "nn-pf"}
    assert len(row["mse_per_seed"]["nn-pf"]) == 2 and np.all(np.isfinite(row["mse_per_seed"]["nn-pf"]))
    assert np.isfinite(row["mse"]["window-mlp"])


def test_the_system_is_built_with_the_parameters_given_and_records_them(tmp_path):
    from kbfilter.bench import run_and_report
    from kbfilter.cli import scenario_main

    code = scenario_main("localization", ["--runs", "1", "--train-lengths", "60", "--test-length", "5",
                                          "--methods", "nai", "--jobs", "1", "--quiet", "--out", str(tmp_path),
                                          "--system-param", "distinct_walls=false", "--system-param", "n_pillars=1"])
    assert code == 0
    data = json.loads((tmp_path / "train60" / "results.json").read_text())
    assert data["config"]["system_params"] == {"distinct_walls": False, "n_pillars": 1}
    assert data["provenance"]["system"]["distinct_walls"] is False
    assert data["provenance"]["system"]["n_pillars"] == 1
    small = dict(runs=1, train_length=60, test_length=5, methods=("nai",), progress=False, print_fn=lambda *a: None)
    alike = run_and_report("localization", tmp_path / "a", system_params={"distinct_walls": False}, **small)[0]
    distinct = run_and_report("localization", tmp_path / "d", **small)[0]
    assert alike[0]["mse"]["nai"] != distinct[0]["mse"]["nai"]  # same seed, another room
    with pytest.raises(ValueError, match="system_params: Rotation has no parameter 'walls'"):
        run_bench("rotation", runs=1, train_length=60, system_params={"walls": 1})


def test_the_library_holds_out_what_the_command_line_holds_out(tmp_path):
    from kbfilter.bench import bench_validation_length, run_and_report

    assert [bench_validation_length(T) for T in (60, 399, 400, 5000)] == [30, 199, 200, 200]
    assert bench_validation_length(60, 12) == 12
    small = dict(runs=1, train_length=60, test_length=10, methods=("kbf-iw",), progress=False,
                 param_grid={"scale": (0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-2,)})
    implicit = run_bench("rotation", **small)
    explicit = run_bench("rotation", validation_length=30, **small)
    assert strip_times(implicit) == strip_times(explicit)
    run_and_report("rotation", tmp_path, print_fn=lambda *a: None,
                   **{k: v for k, v in small.items() if k != "param_grid"})
    assert json.loads((tmp_path / "results.json").read_text())["config"]["validation_length"] == 30
    for too_short in (1, 4):   # the message names what the user gave, not the block made from it
        with pytest.raises(ValueError, match="train_length: expected an integer >= 5"):
            run_bench("rotation", runs=1, train_length=too_short, test_length=10, progress=False)


def test_a_system_registered_once_is_known_to_the_runner_and_the_command_line(monkeypatch):
    from kbfilter.bench import catalogue

    for registry in (catalogue.BENCH_SYSTEMS, catalogue.SYSTEMS, catalogue.PROTOCOLS, catalogue.DEFAULT_METHODS):
        monkeypatch.setitem(registry, "__probe__", None)   # restored after the test
    catalogue.register_system(catalogue.BenchSystem("__probe__", kb.systems.Rotation, (3, (60,)), ("kbf-iw", "ekf"),
                                                    quick_runs=1))
    assert catalogue.reference_method("__probe__") == "kbf-iw"
    rows = kb.bench.run_bench("__probe__", runs=1, train_length=60, test_length=10, n_jobs=1, progress=False,
                              param_grid={"scale": (1.0,), "reg_prior": (1e-2,), "reg_update": (1e-2,)})
    assert set(rows[0]["mse"]) == {"kbf-iw", "ekf"}
    with pytest.raises(ValueError, match="not in the catalogue"):
        catalogue.register_system(catalogue.BenchSystem("__probe__", kb.systems.Rotation, (3, (60,)), ("no-such",)))


def test_the_command_line_checks_its_arguments_once_and_passes_one_configuration_on(tmp_path, monkeypatch, capsys):
    from kbfilter.bench import BenchConfig

    calls = []
    original = BenchConfig.checked.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args[:1])
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(BenchConfig, "checked", classmethod(counted))
    code = main(["bench", "rotation", "--runs", "1", "--train-length", "40", "50", "--validation-length", "20",
                 "--test-length", "10", "--methods", "ekf", "ukf", "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 0 and len(calls) == 2   # one check per training length, none in the runner or the report
    record = json.loads((tmp_path / "r" / "train50" / "results.json").read_text())["config"]
    assert (record["train_length"], record["validation_length"], record["methods"]) == (50, 20, ["ekf", "ukf"])
    config = BenchConfig.checked("rotation", runs=1, train_length=40, test_length=10, validation_length=20,
                                 methods=("ekf",))
    assert run_bench(config, n_jobs=1, progress=False)[0]["mse"] == \
        run_bench("rotation", runs=1, train_length=40, test_length=10, validation_length=20, methods=("ekf",),
                  n_jobs=1, progress=False)[0]["mse"]
    with pytest.raises(ValueError, match="search"):
        BenchConfig.checked("rotation", search="random")


def _tiny_report(out, **kwargs):
    from kbfilter.bench import run_and_report

    return run_and_report("rotation", out, runs=1, train_length=40, test_length=10, validation_length=20,
                          methods=("ekf",), n_jobs=1, progress=False, print_fn=lambda *a: None, **kwargs)


def test_an_interrupted_or_failed_write_leaves_no_results_json(tmp_path, monkeypatch):
    import kbfilter.plots as plots

    def interrupted(ax, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "save_figure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _tiny_report(tmp_path / "a")
    assert not (tmp_path / "a" / "results.json").exists()          # the next run does not take it as done
    assert json.loads((tmp_path / "a" / "results.partial.json").read_text())["runs"]   # nothing is lost

    def disk_full(ax, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(plots, "save_figure", disk_full)
    with pytest.raises(OSError, match=r"No space left.*the results are in .*results.partial.json"):
        _tiny_report(tmp_path / "b")
    assert not (tmp_path / "b" / "results.json").exists()
    monkeypatch.undo()
    _tiny_report(tmp_path / "b")
    assert (tmp_path / "b" / "results.json").exists() and not list((tmp_path / "b").glob("*.partial*"))


def test_a_folder_another_run_holds_is_refused(tmp_path):
    import os

    from kbfilter.bench.report import LOCK_NAME

    (tmp_path / LOCK_NAME).write_text(str(os.getppid()))          # a live process holds it
    with pytest.raises(ValueError, match="is in use by another kbfilter bench"):
        _tiny_report(tmp_path)
    (tmp_path / LOCK_NAME).write_text("999999999")                # left by a run that died
    _tiny_report(tmp_path)
    assert (tmp_path / "results.json").exists() and not (tmp_path / LOCK_NAME).exists()
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "rotation", "--out", " ", "--runs", "1"])
    assert exit_.value.code == 2


def _descendants(pid):
    from pathlib import Path

    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for c in children:
                if c not in found:
                    found.add(c)
                    todo.append(c)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_shuts_the_worker_pool_down(tmp_path):
    import os
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "kbfilter", "bench", "rotation", "--runs", "6", "--jobs", "2",
                             "--train-length", "400", "--quiet", "--out", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers, deadline = set(), time.time() + 60
    while len(workers) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        workers = _descendants(proc.pid)
    assert workers, "the bench started no worker"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    deadline = time.time() + 30
    alive = workers
    while alive and time.time() < deadline:
        time.sleep(0.5)
        alive = {w for w in workers if os.path.exists(f"/proc/{w}") and
                 "Z" not in open(f"/proc/{w}/stat").read().split(")")[-1].split()[0]}
    assert not alive, f"workers left running after SIGTERM: {sorted(alive)}"
    assert not (tmp_path / "results.json").exists()


def test_the_default_reference_is_one_of_the_methods_that_run():
    """The system's reference had stayed the reference when it was not run: the table compared
    every method with a method it had no results of, under a heading naming it."""
    assert kb.bench.BenchConfig.checked("rotation", methods=["kbf-iw", "ekf"]).reference == "kbf-iw"
    config = kb.bench.BenchConfig.checked("rotation", methods=["ukf", "ekf"])
    assert config.reference == "ukf"
    assert kb.bench.BenchConfig.checked("rotation", methods=["ukf", "ekf"], reference="ekf").reference == "ekf"
    rows = run_bench("rotation", n_jobs=1, **dict(SHORT, runs=2, methods=["ukf", "ekf"]))
    summary = summarise(rows, config.reference)
    assert summary["ekf"]["pairs"] == len(rows) and "ukf wins" in format_table(summary, len(rows), config.reference)


def test_the_command_line_repeats_one_run_of_a_study_and_stops_at_a_failure_when_asked(monkeypatch, tmp_path, capsys):
    """A failure's warning named a library call: the command line could neither start at a run
    nor stop with the traceback."""
    args = ["bench", "rotation", "--train-length", "60", "--validation-length", "20", "--test-length", "10",
            "--methods", "ekf", "ukf", "--jobs", "1", "--quiet", "--seed", "3"]
    assert main([*args, "--runs", "3", "--out", str(tmp_path / "all")]) == 0
    assert main([*args, "--runs", "1", "--first-run", "2", "--out", str(tmp_path / "third")]) == 0
    whole, third = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("all", "third"))
    assert third["config"]["first_run"] == 2 and [r["run"] for r in whole["runs"]] == [0, 1, 2]
    assert strip_times(third["runs"]) == strip_times(whole["runs"][2:])
    assert (tmp_path / "third" / "results.csv").read_text().splitlines()[1].startswith("2,ekf,")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*args, "--first-run", "-1", "--out", str(tmp_path / "bad")])
    assert exited.value.code == 2 and "argument --first-run: expected an integer >= 0" in capsys.readouterr().err

    def fails(self, *a, **k):
        raise np.linalg.LinAlgError("no sigma points")

    monkeypatch.setattr(kb.filters.UnscentedKalman, "batch_filter", fails)
    # the results are written, and a script running the study can tell a method's entries are missing
    assert main([*args, "--runs", "2", "--out", str(tmp_path / "recorded")]) == EXIT_FAILED_RUNS == 1
    err = capsys.readouterr().err
    assert "--seed 3 --first-run 0 --runs 1 --on-error raise" in err
    assert err.splitlines()[-1] == ("kbfilter bench: ukf failed on 2 runs (the results hold the messages; --on-error "
                                    "raise stops at the first with its traceback); exit status 1")
    assert (tmp_path / "recorded" / "results.json").exists()
    with pytest.raises(np.linalg.LinAlgError, match="no sigma points"):
        main([*args, "--runs", "1", "--on-error", "raise", "--out", str(tmp_path / "raised")])
