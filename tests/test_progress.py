"""Progress bars on long fits: shown on the work's own line, quiet where a caller counts the work."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kbfilter as kb
from kbfilter.rules.conditional_weights import QUERY_BLOCK

BAR = "localized conditional embedding"


@pytest.fixture()
def oscillation():
    return kb.systems.Oscillation().simulate(600, rng=0)


@pytest.fixture()
def immediate(monkeypatch):
    # every bar shown from its start, as a fit of 10^6 states shows it after PROGRESS_DELAY
    monkeypatch.setattr(kb.progress, "PROGRESS_DELAY", 0.0)


def test_a_local_fit_shows_its_progress_unless_kept_quiet(oscillation, immediate, capsys):
    kb.KernelBayesFilter(approximation="local").fit(*oscillation)
    shown = capsys.readouterr().err
    assert BAR in shown and "0/600 " in shown
    with kb.progress.quiet_progress():
        kb.KernelBayesFilter(approximation="local").fit(*oscillation)
    assert capsys.readouterr().err == ""
    # quiet_progress(False) leaves the bars as they are, and the quiet block ended with the with
    with kb.progress.quiet_progress(False):
        kb.KernelBayesFilter(approximation="local").fit(*oscillation)
    assert BAR in capsys.readouterr().err


def test_a_nystrom_fit_shows_its_landmarks_and_its_localized_transition(oscillation, immediate, capsys):
    kb.KernelBayesFilter(approximation="nystrom", transition="knn").fit(*oscillation)
    shown = capsys.readouterr().err
    assert "pivoted Cholesky" in shown and BAR in shown


def test_the_default_delay_keeps_short_fits_silent(oscillation, capsys):
    kb.KernelBayesFilter(approximation="local").fit(*oscillation)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("progress", [True, False])
def test_tuning_counts_its_fits_on_its_own_bar(oscillation, immediate, capsys, progress):
    kb.tune_filter(kb.KernelBayesFilter(approximation="local"), *oscillation, validation_length=100, n_jobs=1,
                   param_grid={"scale": [0.5, 1.0], "reg_update": [1e-2, 1e-1]}, progress=progress,
                   max_extensions=0)
    shown = capsys.readouterr().err
    # the fits on the 500 training steps are tune_filter's to count; the final fit on all 600 is
    # shown as a fit of the user's own is, unless progress=False
    assert "/500 " not in shown
    assert ("0/600 " in shown) == progress and ("tuning" in shown) == progress


def test_the_tuning_and_bench_bars_keep_quiet_where_every_other_bar_does(oscillation, immediate, capsys,
                                                                       monkeypatch):
    # they were tqdm bars of their own: shown at once, inside quiet_progress and with TQDM_DISABLE set
    def tune():
        kb.tune_filter(kb.KernelBayesFilter(), *oscillation, validation_length=100, n_jobs=1, max_extensions=0,
                       param_grid={"scale": [0.5, 1.0]})

    def bench():
        kb.bench.run_bench("rotation", runs=1, train_length=60, test_length=5, validation_length=20, n_jobs=1,
                           methods=("ekf",))

    for work, bar in ((tune, "tuning"), (bench, "bench rotation")):
        work()
        assert bar in capsys.readouterr().err
        with kb.progress.quiet_progress():
            work()
        assert bar not in capsys.readouterr().err
    monkeypatch.undo()  # the default delay: work this short shows no bar
    tune()
    assert "tuning" not in capsys.readouterr().err
    # TQDM_DISABLE is read when tqdm is imported: a process started with it set shows no bar
    script = ("import kbfilter as kb; kb.progress.PROGRESS_DELAY = 0.0; "
              "xs, zs = kb.systems.Rotation().simulate(200, rng=0); "
              "kb.tune_filter(kb.KernelBayesFilter(), xs, zs, {'scale': [0.5, 1.0]}, validation_length=50); "
              "kb.bench.run_bench('rotation', runs=1, train_length=60, test_length=5, validation_length=20, "
              "n_jobs=1, methods=('ekf',))")
    environ = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    for env, shown in ((environ, True), ({**environ, "TQDM_DISABLE": "1"}, False)):
        err = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stderr
        assert ("tuning" in err) == shown and ("bench rotation" in err) == shown, err


def test_the_localized_embedding_answers_in_blocks_as_query_by_query():
    # more queries than one block: each block's neighbourhoods and weights are those of the queries alone
    rng = np.random.default_rng(0)
    A = rng.normal(size=(300, 2))
    embedding = kb.ConditionalEmbedding(method="knn", n_neighbors=20).fit(A, np.sin(A))
    Q = rng.normal(size=(QUERY_BLOCK + 50, 2))
    idx, vals, reach = embedding.local_weights(Q, return_distance=True)
    assert idx.shape == vals.shape == (len(Q), 20) and reach.shape == (len(Q),)
    for rows in (slice(0, 30), slice(QUERY_BLOCK - 10, QUERY_BLOCK + 10), slice(len(Q) - 30, len(Q))):
        alone = embedding.local_weights(Q[rows], return_distance=True)
        for whole, part in zip((idx, vals, reach), alone):
            np.testing.assert_array_equal(whole[rows], part)


def test_the_mmd_test_counts_its_permutations(immediate, capsys):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(30, 2))
    result = kb.mmd_test(X, Y, n_permutations=300, random_state=0)
    shown = capsys.readouterr().err
    assert "MMD test" in shown and "0/300 " in shown
    # the bar changes nothing the test computes
    with kb.progress.quiet_progress():
        assert kb.mmd_test(X, Y, n_permutations=300, random_state=0) == result
    assert capsys.readouterr().err == ""
