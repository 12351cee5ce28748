"""The benchmark on recorded tracks: ``kbfilter bench solent`` / ``kbfilter bench opensky``."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import wilcoxon

from kbfilter.bench.tracks import TracksConfig, format_tracks_table, run_tracks_bench, summarise_tracks
from kbfilter.cli import EXIT_FAILED_RUNS, main, tracks_scenario_main
from kbfilter.filters.motion import PROPOSALS
from kbfilter.plots import plot_tracks


def _split(scores):
    """A split's result with the given per-track RMSEs ({method: [rmse per track]})."""
    n = len(next(iter(scores.values())))
    tracks = [{"vehicle": str(i), "steps": 10, "missing": 0,
               **{m: {"rmse": v[i], "rmse_dropouts": 2 * v[i], "nees": v[i] / 10, "nis": v[i] / 5, "ms_per_step": 0.1,
                      "events": {"reacquired": 1} if m == "learned" else {"pseudo_inverse": 0}}
                  for m, v in scores.items()}} for i in range(n)]
    return {"split": 0, "tracks": tracks}


def test_the_summary_compares_each_split_with_its_best_hand_written_model():
    results = [_split({"cv": [10, 20], "imm": [12, 12], "learned": [11, 50]}),    # best hand: imm (12 < 15)
               _split({"cv": [10, 10], "imm": [30, 30], "learned": [25, 5]}),     # best hand: cv
               _split({"cv": [8, 10], "imm": [9, 9], "learned": [8.5, 9.5]})]     # cv 9, imm 9: the first named
    summary = summarise_tracks(results, ("cv", "imm", "learned"))
    assert summary["best_hand_model"] == ["imm", "cv", "cv"]
    assert summary["splits"]["rmse"]["best-hand"] == [12.0, 10.0, 9.0]
    assert summary["splits"]["rmse"]["learned"] == [30.5, 15.0, 9.0]
    # per track against the split's best: 11<12, 50>24 (lost), 25>20 (lost), 5<10, 8.5<8, 9.5<10
    assert summary["lost"]["learned"] == 2 and summary["better"]["learned"] == 3
    assert summary["ratio_to_best_hand"]["learned"] == pytest.approx((30.5 + 15 + 9) / (12 + 10 + 9))
    cell = summary["compared"]["rmse"]["learned"]["cv"]
    assert cell["wins"] == 0 and cell["p"] == pytest.approx(wilcoxon([30.5, 15, 9], [15, 10, 9]).pvalue)
    # a hand-written model is compared with cv only, never with the best of itself and the others
    assert set(summary["compared"]["rmse"]["imm"]) == {"cv"}
    assert summary["nees_median_track"]["learned"] == pytest.approx((0.95 + 1.1) / 2)   # six tracks
    assert summary["nis_median_track"]["learned"] == pytest.approx((1.9 + 2.2) / 2)
    assert summary["events"] == {"cv": {}, "imm": {}, "learned": {"reacquired": 6}}    # one a track
    table = format_tracks_table(summary, 3)
    assert "learned reacquired 6" in table and "pseudo_inverse" not in table
    assert "best hand-written model by split: imm, cv, cv" in table and "lost (RMSE above twice its) on 2" in table


def test_without_a_hand_written_model_there_is_nothing_to_be_lost_against():
    summary = summarise_tracks([_split({"learned": [1.0, 2.0]})], ("learned",))
    assert "best_hand_model" not in summary and summary["lost"] == {}
    assert "learned" in format_tracks_table(summary, 1)


def test_the_summary_refuses_results_that_are_not_the_benchs_by_name():
    good = _split({"cv": [1.0, 2.0], "learned": [1.5, 2.5]})
    with pytest.raises(ValueError, match="methods: expected a non-empty list of distinct method names"):
        summarise_tracks([good], "cv")  # a string would be read one letter a method
    with pytest.raises(ValueError, match="results: expected the non-empty list of splits"):
        summarise_tracks([], ("cv",))
    with pytest.raises(ValueError, match=r"results\[0\]\['tracks'\]\[0\]\['imm'\]: expected the method's scores"):
        summarise_tracks([good], ("cv", "imm"))
    for bad in (-1.0, "1"):
        broken = _split({"cv": [1.0, 2.0], "learned": [1.5, 2.5]})
        broken["tracks"][0]["learned"]["rmse"] = bad
        with pytest.raises(ValueError, match=r"\['learned'\]\['rmse'\]: expected None or a non-negative number"):
            summarise_tracks([good, broken], ("cv", "learned"))
    broken = _split({"cv": [1.0, 2.0], "learned": [1.5, 2.5]})
    broken["tracks"][0]["learned"]["nees"] = np.inf  # finite RMSE: nothing diverged
    with pytest.raises(ValueError, match=r"\['learned'\]\['nees'\]: expected None or a non-negative number"):
        summarise_tracks([broken], ("cv", "learned"))
    broken["tracks"][0]["learned"].update(failed="ValueError: bad")  # a failure has no scores
    with pytest.raises(ValueError, match=r"\['learned'\]\['failed'\]: expected None, or the message"):
        summarise_tracks([broken], ("cv", "learned"))
    summary = summarise_tracks([good], ("cv", "learned"))
    with pytest.raises(ValueError, match="splits: expected an integer"):
        format_tracks_table(summary, "1")
    with pytest.raises(ValueError, match="summary: expected what summarise_tracks returns"):
        format_tracks_table({}, 1)


def test_the_command_line_runs_a_recording_and_writes_results_table_and_map(tmp_path, capsys):
    code = main(["bench", "solent", "--splits", "2", "--max-test-tracks", "2", "--map-tracks", "2",
                 "--methods", "cv", "imm", "learned", "--jobs", "1", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "position RMSE inside dropouts" in out and "split 1:" in out and "Stone Soup" in out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["recording"] == "solent" and data["config"]["methods"] == ["cv", "imm", "learned"]
    assert data["provenance"]["command"][1:3] == ["bench", "solent"] and "system" not in data["provenance"]
    assert (tmp_path / "tracks.png").stat().st_size > 0
    # the summary is what the per-track rows say
    with open(tmp_path / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * 2 * 3
    for s in range(2):
        means = {m: np.mean([float(r["rmse"]) for r in rows if r["split"] == str(s) and r["method"] == m])
                 for m in ("cv", "imm", "learned")}
        assert data["summary"]["splits"]["rmse"]["learned"][s] == pytest.approx(means["learned"])
        assert data["summary"]["splits"]["rmse"]["best-hand"][s] == pytest.approx(min(means["cv"], means["imm"]))
    # dropouts are there, and the filters' errors inside them are scored
    assert any(int(r["missing"]) > 0 for r in rows)


def test_the_same_split_gives_the_same_scores(tmp_path):
    config = TracksConfig.checked(splits=1, methods=("cv", "learned", "kbf-position"), max_test_tracks=1,
                                  map_tracks=0)
    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split

    tracks = RECORDINGS["solent"]()
    a, b = run_tracks_split(config, tracks, 3), run_tracks_split(config, tracks, 3)
    strip = [{m: r[m]["rmse"] for m in config.methods} for r in a["tracks"]]
    assert strip == [{m: r[m]["rmse"] for m in config.methods} for r in b["tracks"]]
    assert a["paths"] == []
    # the kernel Bayes filter on the position alone is scored on the position like the others
    assert a["tracks"][0]["kbf-position"]["rmse"] > 0 and a["tracks"][0]["kbf-position"]["nees"] is not None
    assert all(a["tracks"][0][m]["nis"] > 0 for m in config.methods)


def test_with_smooth_each_method_is_scored_on_its_smoothed_estimates(capsys):
    """``smooth=True`` scores what each method's ``smooth`` gives on the same fixes and dropouts:
    the Kalman smoother of the constant-velocity model equals the filter's own ``smooth`` on them,
    and is closer than its filter; the IMM (no smoother) and pf (no transition density) are refused."""
    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split
    from kbfilter.filters import ExtendedKalman
    from kbfilter.systems import ConstantVelocity, dropouts

    config = TracksConfig.checked(splits=1, methods=("cv", "learned"), max_test_tracks=1, map_tracks=0, smooth=True)
    filtered = TracksConfig.checked(splits=1, methods=("cv", "learned"), max_test_tracks=1, map_tracks=0)
    tracks = RECORDINGS["solent"]()
    smoothed, plain = run_tracks_split(config, tracks, 0), run_tracks_split(filtered, tracks, 0)
    train, test = tracks.split(test_size=config.test_size, random_state=0)
    sensor = config.sensor_model()
    speed = float(np.sqrt(np.mean(np.concatenate([t[:, 2:] for t in train.tracks]) ** 2)))
    cv = ConstantVelocity.fitted(train.tracks, train.step, sensor=sensor, speed=speed)
    for i, (s, f) in enumerate(zip(smoothed["tracks"], plain["tracks"])):
        track = test.tracks[i]
        rng = np.random.default_rng([0, 1, i])
        zs, _ = dropouts(sensor.observe(track, rng=rng), rng=rng, rate=config.gap_rate, length=(config.gap, config.gap))
        means, _ = ExtendedKalman(cv).smooth(zs)
        assert s["cv"]["rmse"] == pytest.approx(np.sqrt(np.mean(np.sum((means[:, :2] - track[:, :2]) ** 2, axis=1))))
        for m in config.methods:
            assert s[m]["rmse"] < f[m]["rmse"] and s[m]["nis"] is None and s[m]["nees"] > 0
    assert "cv - (-)" in format_tracks_table(summarise_tracks([smoothed], config.methods), 1)
    for method in ("imm", "pf"):  # pf's smoother needs a transition density: every track had failed
        able = r"cv, ct, learned, learned-where, kbf, kbf-position"
        with pytest.raises(ValueError, match=rf"methods: {method} cannot smooth these tracks \(.*\); with smooth=True "
                                             rf"give methods that can \({able}\)"):
            TracksConfig.checked(methods=("cv", method), smooth=True)
    with pytest.raises(ValueError, match="smooth: expected True or False"):
        TracksConfig.checked(smooth="yes")
    # on the command line too, before any work
    with pytest.raises(SystemExit) as stop:
        main(["bench", "solent", "--smooth", "--methods", "cv", "imm"])
    assert stop.value.code == 2 and "argument --methods: imm cannot smooth these tracks" in capsys.readouterr().err


def test_a_method_that_fails_on_a_track_is_named_with_the_track_and_split(monkeypatch):
    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split
    from kbfilter.filters import InteractingMultipleModel

    if sys.version_info < (3, 11):
        pytest.skip("exception notes are Python 3.11's")

    def fails(self, zs, *args, **kwargs):
        raise np.linalg.LinAlgError("the innovation covariance is singular")

    monkeypatch.setattr(InteractingMultipleModel, "batch_filter", fails)
    config = TracksConfig.checked(splits=1, methods=("cv", "imm"), max_test_tracks=1, map_tracks=0)
    tracks = RECORDINGS["solent"]()
    with pytest.raises(np.linalg.LinAlgError, match="singular") as caught:
        run_tracks_split(config, tracks, 2, on_error="raise")
    vehicle = tracks.split(test_size=config.test_size, random_state=2)[1].vehicles[0]
    assert caught.value.__notes__ == [f"kbfilter bench: raised by method 'imm' on test track 0 (vehicle {vehicle!r}) "
                                      f"of split 2"]


def test_the_particle_filter_on_constant_velocity_is_that_model_and_is_compared_with_the_best_kalman_one():
    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split

    config = TracksConfig.checked(splits=1, methods=("cv", "pf"), max_test_tracks=2, map_tracks=0)
    split = run_tracks_split(config, RECORDINGS["solent"](), 0)
    # fixes with 10 m errors: the particles approximate the Kalman filter, closely over a long track;
    # over a short one their start dominates (a 10-step track with 2 fixes missing: 1.4 times the
    # Kalman filter's RMSE with the newest numpy and the oldest supported, 2.0 times with numpy 2.2)
    for track in split["tracks"]:
        assert track["pf"]["rmse"] < (1.5 if track["steps"] >= 100 else 3.0) * track["cv"]["rmse"], track
    assert any(track["steps"] >= 100 for track in split["tracks"])
    summary = summarise_tracks([split], config.methods)
    assert summary["best_hand_model"] == ["cv"] and "pf" in summary["lost"] and "cv" not in summary["lost"]


@pytest.mark.parametrize("setting, values", [("proposal", PROPOSALS), ("local_mean", ("shrunk", "recorded"))])
def test_the_learned_motion_settings_reach_the_learned_filters_only(setting, values):
    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split

    tracks = RECORDINGS["solent"]()
    scores = {}
    for value in values:
        config = TracksConfig.checked(splits=1, methods=("cv", "learned"), max_test_tracks=1, map_tracks=0,
                                      **{setting: value})
        rows = run_tracks_split(config, tracks, 0)["tracks"]
        scores[value] = [{m: r[m]["rmse"] for m in config.methods} for r in rows]
    first, second = values
    assert [r["cv"] for r in scores[first]] == [r["cv"] for r in scores[second]]
    assert [r["learned"] for r in scores[first]] != [r["learned"] for r in scores[second]]


@pytest.mark.parametrize("args, fragment", [
    (["--splits", "0"], "--splits"),
    (["--gap-rate", "1.5"], "--gap-rate"),
    (["--noise", "-1"], "--noise"),
    (["--test-size", "1"], "--test-size"),
    (["--max-test-tracks", "0"], "--max-test-tracks"),
    (["--methods", "cv", "cv"], "--methods: each method once"),
    (["--methods", "lstm"], "invalid choice"),
    (["--sensor", "sonar"], "invalid choice"),
    (["--jobs", "0"], "--jobs"),
    (["--proposal", "smart"], "--proposal"),
    (["--local-mean", "median"], "--local-mean"),
    (["--sensor", "radar", "--bearing-noise", "2"], "--bearing-noise: expected a standard deviation in radians"),
    (["--out", "/proc/kbfilter-cannot-write-here"], "--out: cannot write results"),
])
def test_bad_arguments_give_one_line_naming_the_flag_and_exit_code_2(args, fragment, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "opensky", *args])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("kbfilter bench opensky: error: ")


def test_a_recording_named_after_the_options_is_pointed_to_its_own_command():
    proc = subprocess.run([sys.executable, "-m", "kbfilter", "bench", "--runs", "3", "solent"], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "kbfilter bench solent [options]" in proc.stderr
    from kbfilter.bench.tracks import RECORDINGS

    for name in RECORDINGS:                              # every recording the library has is a command
        proc = subprocess.run([sys.executable, "-m", "kbfilter", "bench", name, "--help"], capture_output=True,
                              text=True)
        assert proc.returncode == 0 and "--gap-rate" in proc.stdout and "--train-length" not in proc.stdout


def test_the_scenario_script_is_the_same_benchmark_with_the_recording_as_an_option(capsys):
    with pytest.raises(SystemExit) as stop:
        tracks_scenario_main(["--data", "opensky", "--splits", "0"])
    assert stop.value.code == 2 and "real_tracks.py: error: argument --splits" in capsys.readouterr().err


def test_settings_are_checked_by_name(tmp_path):
    with pytest.raises(ValueError, match="colour: not a setting"):
        TracksConfig.checked(colour="red")
    with pytest.raises(ValueError, match="data: expected one of"):
        TracksConfig.checked(data="atlantic")
    assert TracksConfig.checked(methods="cv").methods == ("cv",)
    with pytest.raises(ValueError, match="progress: expected True or False, got 'no'"):
        run_tracks_bench(TracksConfig.checked(splits=1), tmp_path, progress="no")
    assert not any(tmp_path.iterdir())  # refused before any work


def test_the_map_draws_one_panel_a_track_in_kilometres_from_its_start():
    truth = np.column_stack([np.linspace(5000, 6000, 11), np.full(11, -2000.0)])
    fixes = truth + 10.0
    fixes[3] = np.nan
    axes = plot_tracks([truth, truth[:5]], [{"cv": truth}, {"cv": truth[:5]}], observations=[fixes, None],
                       missing=[np.arange(11) == 3, np.zeros(5, bool)], titles=["a", "b"])
    assert len(axes) == 2 and axes[0].get_title() == "a"
    drawn = axes[0].get_lines()[0].get_xydata()
    np.testing.assert_allclose(drawn[-1], [1.0, 0.0])     # 1 km east of the start
    with pytest.raises(ValueError, match="truths"):
        plot_tracks([], [])


def test_a_track_a_method_fails_or_diverges_on_costs_that_tracks_scores_not_the_study(monkeypatch, tmp_path, capsys):
    """A method raising on one test track had stopped the benchmark, every split's scores lost;
    one diverging (an infinite or NaN RMSE) had made the summary refuse the results after all
    the splits had run."""
    import warnings

    from kbfilter.filters import InteractingMultipleModel

    batch_filter, calls = InteractingMultipleModel.batch_filter, []

    def unreliable(self, zs, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise np.linalg.LinAlgError("the innovation covariance is singular")
        means, *rest = batch_filter(self, zs, *args, **kwargs)
        if len(calls) == 2:
            means = np.full_like(means, np.nan)
        return (means, *rest)

    config = TracksConfig.checked(splits=1, methods=("cv", "imm"), max_test_tracks=3, map_tracks=0)
    whole, _ = run_tracks_bench(config, tmp_path / "whole", progress=False, print_fn=lambda s: None)
    monkeypatch.setattr(InteractingMultipleModel, "batch_filter", unreliable)
    printed = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results, summary = run_tracks_bench(config, tmp_path / "run", n_jobs=1, print_fn=printed.append)
    notes = [str(w.message) for w in caught if "failed on" in str(w.message)]
    assert len(notes) == 1 and notes[0].startswith("run_tracks_split: method 'imm' failed on 1 of the 3 test tracks "
                                                   "of split 0 (first on track 0, vehicle ")
    assert "on_error='raise') repeats the split" in notes[0]
    tracks = results[0]["tracks"]
    assert tracks[0]["imm"]["failed"] == "LinAlgError: the innovation covariance is singular"
    assert tracks[0]["imm"]["rmse"] is None and np.isnan(tracks[1]["imm"]["rmse"])
    # the other method, and the tracks the failing one ran well on, score as in the run without it
    assert [t["cv"]["rmse"] for t in tracks] == [t["cv"]["rmse"] for t in whole[0]["tracks"]]
    assert tracks[2]["imm"]["rmse"] == whole[0]["tracks"][2]["imm"]["rmse"]
    assert summary["splits"]["rmse"]["imm"] == [pytest.approx(tracks[2]["imm"]["rmse"])]
    assert summary["left_out"] == {"cv": {"failed": 0, "diverged": 0}, "imm": {"failed": 1, "diverged": 1}}
    assert ("left out of the means, of 3 test tracks (a learned filter is lost on them): imm 1 failed, 1 diverged"
            in printed[-2])
    assert [line for line in printed if line.startswith("split 0:")][0].endswith("(2 left out)")
    with open(tmp_path / "run" / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["failed"] for r in rows if r["method"] == "imm"] == [tracks[0]["imm"]["failed"], "", ""]
    with pytest.raises(ValueError, match="on_error: expected one of"):
        run_tracks_bench(config, tmp_path / "bad", on_error="skip")
    # the command line records by default, and stops at the failure when asked
    args = ["bench", "solent", "--splits", "1", "--max-test-tracks", "1", "--map-tracks", "0", "--methods", "cv", "imm",
            "--jobs", "1", "--quiet"]
    calls.clear()
    assert main([*args, "--out", str(tmp_path / "cli")]) == EXIT_FAILED_RUNS
    assert capsys.readouterr().err.splitlines()[-1].startswith("kbfilter bench solent: imm failed on 1 track (")
    calls.clear()
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        main([*args, "--on-error", "raise", "--out", str(tmp_path / "cli-raise")])


def test_a_learned_filter_whose_fit_raises_has_no_scores_on_the_split_and_the_others_are_kept(monkeypatch):
    import warnings

    from kbfilter.bench.tracks import RECORDINGS, run_tracks_split
    from kbfilter.filters import LearnedMotionFilter

    def fails(self, *args, **kwargs):
        raise ValueError("the training tracks are too short")

    monkeypatch.setattr(LearnedMotionFilter, "fit", fails)
    config = TracksConfig.checked(splits=1, methods=("cv", "learned"), max_test_tracks=2, map_tracks=0)
    tracks = RECORDINGS["solent"]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_tracks_split(config, tracks, 1)
    assert [t["learned"]["failed"] for t in result["tracks"]] == [
        "RuntimeError: its fit raised ValueError: the training tracks are too short"] * 2
    assert all(t["cv"]["rmse"] > 0 for t in result["tracks"]) and "learned" not in result["fit_s"]
    notes = [str(w.message) for w in caught if "failed on" in str(w.message)]
    assert len(notes) == 1 and notes[0].startswith("run_tracks_split: method 'learned' failed on 2 of the 2 test "
                                                   "tracks of split 1 (first on track 0")
    if sys.version_info >= (3, 11):
        with pytest.raises(ValueError, match="too short") as raised:
            run_tracks_split(config, tracks, 1, on_error="raise")
        assert raised.value.__notes__ == ["kbfilter bench: raised by the fit of method 'learned' on split 1"]
