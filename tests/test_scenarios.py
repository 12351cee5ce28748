"""The study scripts under ``scenarios/`` run end to end on small settings, and refuse a bad count
before any work. (The protocol scripts are ``kbfilter bench`` and are tested with it.)"""

import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _script(name):
    spec = importlib.util.spec_from_file_location(f"scenario_{name}", SCENARIOS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, argv, message", [
    ("herding_compression", ["--runs", "0"], "argument --runs: expected an integer >= 1, got '0'"),
    ("herding_compression", ["--keep", "many"], "argument --keep: expected an integer >= 1, got 'many'"),
    ("posterior_mean", ["--runs", "1"], "argument --runs: expected an integer >= 2, got '1'"),
    ("ckme_accuracy", ["--queries", "0"], "argument --queries: expected an integer >= 1, got '0'"),
    ("sparse_ckme", ["--jobs", "0"], "argument --jobs: expected a positive number of workers, or -1 for all cores"),
    ("bkl_mixture", ["--permutations", "-5"], "argument --permutations: expected an integer >= 1, got '-5'"),
    ("fix_glitches", ["--offset", "-5"], "argument --offset: expected a positive number of metres, got -5.0"),
])
def test_a_study_script_refuses_a_bad_count_before_any_work(name, argv, message, tmp_path, capsys):
    # before: 0 runs wrote tables of NaN (and "IW below original at every d: True" over no run)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        _script(name).main([*argv, "--out", str(out)])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_posterior_mean_study_gives_every_method_a_mean_and_its_standard_error(tmp_path):
    script = _script("posterior_mean")
    # --runs is kept with --quick (before, --quick ran 5 runs whatever --runs said)
    script.main(["--quick", "--runs", "2", "--out", str(tmp_path)])
    with open(tmp_path / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["d"]) for r in rows] == list(script.DIMS[:4])
    values = np.array([[float(r[f"{m}_{k}"]) for m in script.METHODS for k in ("mean", "sem")] for r in rows])
    assert np.all(np.isfinite(values)) and np.all(values >= 0)
    # each row counts its wins over the two runs
    lines = (tmp_path / "table.md").read_text().splitlines()[2:]
    assert len(lines) == 4 and all(line.endswith("/2 |") for line in lines)


def test_the_conditional_embedding_study_scores_every_method_at_every_size(tmp_path):
    script = _script("ckme_accuracy")
    script.main(["--quick", "--trials", "1", "--queries", "3", "--out", str(tmp_path)])
    with open(tmp_path / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {(int(r["n"]), r["method"]) for r in rows} == {(n, m) for n in (100, 300, 1000) for m in script.METHODS}
    assert all(int(r["trials"]) == 1 for r in rows)
    errors = np.array([[float(r[k]) for k in ("rkhs_error", "rmse_mean", "rmse_mode")] for r in rows])
    assert np.all(np.isfinite(errors)) and np.all(errors > 0)


def test_the_herding_study_compares_three_filters_and_says_when_no_test_is_possible(tmp_path):
    script = _script("herding_compression")
    script.main(["--runs", "1", "--train-length", "250", "--keep", "20", "--out", str(tmp_path)])
    (row,) = json.loads((tmp_path / "runs.json").read_text())
    assert all(np.isfinite(row[f"{name}_mse"]) and row[f"{name}_mse"] > 0 for name in script.FILTERS)
    # one run has no spread and no signed-rank test: before, the table printed "± nan" and "p = nan"
    table = (tmp_path / "table.md").read_text()
    assert "nan" not in table
    assert "| herding | " in table and "(Wilcoxon p = n/a with one run)" in table


def test_the_glitch_study_scores_both_rules_on_clean_glitched_and_jumped_fixes(tmp_path, capsys):
    out = tmp_path / "glitches"
    _script("fix_glitches").main(["--runs", "1", "--particles", "100", "--out", str(out)])
    row = json.loads((out / "runs.json").read_text())[0]
    # a glitch restarts the track at once with the default and is left out when a second is awaited
    assert row["glitch_1"]["reacquired"] >= 1 and row["glitch_1"]["outliers"] == 0
    assert row["glitch_2"]["outliers"] == 2 and row["glitch_2"]["reacquired"] == 0
    assert row["glitch_2"]["after"] < 0.2 * row["glitch_1"]["after"]
    # the clean fixes never leave the gate: both rules are the same filter there
    assert row["clean_1"] == row["clean_2"]
    assert row["jump_2"]["reacquired"] >= 1
    assert "| glitch | 2 |" in (out / "table.md").read_text()
