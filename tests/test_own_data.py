"""A user's own data: columns in different units, grids whose best value is an end, the bench's --grid."""

import warnings

import numpy as np
import pytest
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator

import kbfilter as kb
from kbfilter.kernel_approximation import NystromKernel, RandomFourierKernel

RNG = np.random.default_rng(0)
# columns of very different spread, as an angle and an angular velocity (or a range and a bearing)
X = RNG.normal(size=(300, 3)) * [1.0, 20.0, 0.05]
SD = X.std(axis=0)


# -- standardised kernels -------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [kb.GaussianKernel, kb.LaplaceKernel])
def test_a_standardised_kernel_is_the_kernel_of_the_standardised_points(kernel):
    k = kernel(standardise=True, scale=0.7).fit(X)
    plain = kernel(scale=0.7).fit(X / SD)
    np.testing.assert_allclose(k.column_scale_, SD, rtol=1e-12)
    np.testing.assert_allclose(k(X[:40], X[40:90]), plain(X[:40] / SD, X[40:90] / SD), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(k.paired(X[:5], X[5:10]), plain.paired(X[:5] / SD, X[5:10] / SD), rtol=1e-12)
    np.testing.assert_allclose(k.gram_batched(X[None, :7]), plain.gram_batched((X / SD)[None, :7]), rtol=1e-12)
    np.testing.assert_allclose(k.diag(X[:3]), 1.0)


def test_standardising_leaves_one_column_and_equal_spreads_as_they_were():
    x = RNG.normal(size=(80, 1)) * 7.0
    np.testing.assert_allclose(kb.GaussianKernel(standardise=True).fit(x)(x), kb.GaussianKernel().fit(x)(x),
                               rtol=1e-12, atol=1e-15)
    a = RNG.normal(size=90) * 3.0
    equal = np.column_stack([a, RNG.permutation(a)])  # two columns of exactly the same spread
    np.testing.assert_allclose(kb.GaussianKernel(standardise=True).fit(equal)(equal),
                               kb.GaussianKernel().fit(equal)(equal), rtol=1e-12, atol=1e-15)


def test_a_constant_column_does_not_break_standardising():
    data = np.column_stack([RNG.normal(size=50), np.full(50, 3.0)])
    k = kb.GaussianKernel(standardise=True).fit(data)
    assert np.all(np.isfinite(k(data)))
    np.testing.assert_allclose(k(data), kb.GaussianKernel(standardise=True).fit(data[:, :1])(data[:, :1]), rtol=1e-12)


@pytest.mark.parametrize("approximation", ["exact", "local"])
def test_a_state_column_that_never_changes_is_estimated_as_it_was_without_a_warning(approximation):
    states, observations = kb.systems.Rotation().simulate(300, rng=0)
    logged = np.column_stack([states, np.full(300, 5.0)])           # e.g. a recorded constant, a flag
    kbf = kb.KernelBayesFilter(approximation=approximation).fit(logged, observations)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NumericalWarning)
        means = kbf.batch_filter(observations[:40])[0]
    np.testing.assert_allclose(means[:, 2], 5.0, rtol=1e-12)
    # and the other columns are those of the filter that never saw it
    np.testing.assert_allclose(means[:, :2], kb.KernelBayesFilter(approximation=approximation).fit(
        states, observations).batch_filter(observations[:40])[0], rtol=1e-9, atol=1e-12)
    assert not kbf.diagnostics


def test_standardise_is_checked_and_needs_a_fit():
    with pytest.raises(ValueError, match="standardise: expected True or False"):
        kb.GaussianKernel(standardise="yes").fit(X)
    with pytest.raises(Exception, match="must be fitted"):
        kb.GaussianKernel(bandwidth=1.0, standardise=True)(X)
    with pytest.raises(ValueError, match="X: expected 3 columns"):
        kb.GaussianKernel(standardise=True).fit(X).paired(X[:, :2], X[:, :2])


@pytest.mark.parametrize("method", ["exact", "knn", "nw", "nystrom", "rff", "icf", "random"])
def test_every_conditional_embedding_method_measures_in_the_kernels_coordinates(method):
    # what goes around the kernel to scikit-learn (neighbour index, Nystroem, RBFSampler) must see the
    # standardised points too: the embedding equals the plain one on standardised inputs
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] / 20])
    params = dict(method=method, random_state=0, n_neighbors=20, rank=80, reg=1e-3)
    a = kb.ConditionalEmbedding(kernel_in=kb.GaussianKernel(standardise=True), **params).fit(X, Y)
    b = kb.ConditionalEmbedding(kernel_in=kb.GaussianKernel(), **params).fit(X / SD, Y)
    np.testing.assert_allclose(a.predict_mean(X[:25]), b.predict_mean(X[:25] / SD), rtol=1e-8, atol=1e-10)


def test_approximated_standardised_kernels_equal_the_approximations_of_standardised_points():
    for approx in (lambda k: NystromKernel(k, rank=60), lambda k: RandomFourierKernel(k, rank=300, random_state=0)):
        a = approx(kb.GaussianKernel(standardise=True)).fit(X)
        b = approx(kb.GaussianKernel()).fit(X / SD)
        np.testing.assert_allclose(a(X[:10], X[10:20]), b(X[:10] / SD, X[10:20] / SD), atol=1e-10)


def test_a_standardised_kernel_survives_save_and_load_and_a_tampered_one_is_refused(tmp_path):
    from kbfilter.persistence import load, save

    k = kb.GaussianKernel(standardise=True).fit(X)
    save(k, tmp_path / "k.npz")
    np.testing.assert_array_equal(load(tmp_path / "k.npz")(X[:5]), k(X[:5]))
    for field, value in (("column_scale_", -SD), ("column_scale_", SD[:, None]), ("bandwidth_", -1.0),
                         ("bandwidth_", float("inf"))):
        bad = kb.GaussianKernel(standardise=True).fit(X)
        setattr(bad, field, value)
        save(bad, tmp_path / "bad.npz")
        with pytest.raises(ValueError, match=f"damaged kbfilter file.*{field}"):
            load(tmp_path / "bad.npz")


def test_the_filters_default_kernels_standardise_states_and_vector_observations():
    # a filter with default kernels equals one given standardising kernels, and one fitted on
    # standardised states and observations (estimates mapped back to the user's units)
    system = kb.systems.Oscillation()
    states, obs = system.simulate(300, rng=1)
    stretch, zstretch = np.array([1.0, 25.0]), np.array([0.02, 1.0])
    states, obs = states * stretch, obs * zstretch
    test_states, test_obs = system.simulate(40, rng=2)
    test_obs = test_obs * zstretch
    default = kb.KernelBayesFilter(reg_prior=1e-3, reg_update=1e-2).fit(states, obs)
    given = kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(standardise=True),
                                 kernel_z=kb.GaussianKernel(standardise=True),
                                 reg_prior=1e-3, reg_update=1e-2).fit(states, obs)
    sd, zsd = states.std(axis=0), obs.std(axis=0)
    by_hand = kb.KernelBayesFilter(reg_prior=1e-3, reg_update=1e-2).fit(states / sd, obs / zsd)
    means = default.batch_filter(test_obs)[0]
    np.testing.assert_array_equal(means, given.batch_filter(test_obs)[0])
    np.testing.assert_allclose(means, by_hand.batch_filter(test_obs / zsd)[0] * sd, rtol=1e-7, atol=1e-9)
    assert default.kernel_x_.standardise


def test_image_observations_keep_an_isotropic_observation_kernel():
    states, images = kb.systems.MovingSprite().simulate(60, rng=0)
    kbf = kb.KernelBayesFilter(features=None).fit(states, images)
    assert not kbf.observation_model_.rule.kernel_z_.standardise
    assert kbf.kernel_x_.standardise


# -- grids that follow the optimum ----------------------------------------------------------------
class _Offset(BaseEstimator):
    """A 'filter' whose estimates are the observations moved by log(scale / best): its validation MSE
    is ``dim x log(scale / best)^2``, smallest at ``scale = best``."""

    def __init__(self, scale=1.0, best=1.0, n_neighbors=3, best_neighbors=7.0):
        self.scale, self.best, self.n_neighbors, self.best_neighbors = scale, best, n_neighbors, best_neighbors

    def fit(self, states, observations):
        return self

    def batch_filter(self, zs, us=None):
        offset = np.log(self.scale / self.best) + 0.01 * abs(np.log(self.n_neighbors / self.best_neighbors))
        return (np.asarray(zs) + offset,)


STATES = np.cumsum(RNG.normal(size=(60, 2)), axis=0)


def _tuned(best, grid, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = kb.tune_filter(_Offset(best=best), STATES, STATES, param_grid=grid, validation_length=20,
                               progress=False, **kwargs)
    return tuned, [w for w in caught if "grid" in str(w.message)]


@pytest.mark.parametrize("search", ["coordinate", "grid"])
def test_tuning_extends_an_edge_by_the_grids_ratio_until_the_optimum_is_inside(search):
    tuned, caught = _tuned(5.0, {"scale": (0.5, 1.0, 2.0)}, search=search)
    assert tuned.best_params_ == {"scale": 4.0}
    assert tuned.extended_params_ == {"scale": (4.0, 8.0)}
    assert tuned.param_grid_ == {"scale": (0.5, 1.0, 2.0, 4.0, 8.0)}
    assert caught == []


class _Levelling(_Offset):
    """A 'filter' whose validation MSE is ``dim x (0.01 + exp(-scale))``: it falls as the scale grows
    and levels off at 0.02, as a regulariser's score does near its limit."""

    def batch_filter(self, zs, us=None):
        return (np.asarray(zs) + np.sqrt(0.01 + np.exp(-self.scale)),)


def test_tuning_does_not_warn_of_an_end_where_the_score_has_levelled_off():
    """The UNGM growth model's update regulariser gained 0.01 % on its last step, and the warning
    asked for more extensions that could change nothing."""
    for grid, warned in [({"scale": (8.0, 16.0, 32.0)}, False),      # 32 gains 1e-5 of the MSE on 16
                         ({"scale": (1.0, 2.0, 4.0)}, True)]:         # 4 gains 80 % of the MSE on 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tuned = kb.tune_filter(_Levelling(), STATES, STATES, param_grid=grid, validation_length=20,
                                   progress=False, max_extensions=0)
        assert tuned.best_params_ == {"scale": grid["scale"][-1]}
        assert len([w for w in caught if "is the largest value of its grid" in str(w.message)]) == warned


def test_tuning_extends_at_most_max_extensions_times_then_warns_at_the_callers_line():
    tuned, caught = _tuned(1000.0, {"scale": (0.5, 1.0, 2.0)})
    assert tuned.extended_params_ == {"scale": (4.0, 8.0, 16.0)}
    assert tuned.best_params_ == {"scale": 16.0}
    assert len(caught) == 1 and "after 3 extension(s)" in str(caught[0].message)
    assert caught[0].filename == __file__
    tuned, caught = _tuned(1000.0, {"scale": (0.5, 1.0, 2.0)}, max_extensions=1)
    assert tuned.extended_params_ == {"scale": (4.0,)} and tuned.best_params_ == {"scale": 4.0}
    tuned, caught = _tuned(1000.0, {"scale": (0.5, 1.0, 2.0)}, max_extensions=0)
    assert tuned.extended_params_ == {} and tuned.best_params_ == {"scale": 2.0} and len(caught) == 1
    with pytest.raises(ValueError, match="max_extensions"):
        _tuned(1.0, {"scale": (0.5, 1.0, 2.0)}, max_extensions=-1)


def test_tuning_extends_downwards_descending_and_integer_axes_and_not_short_ones():
    tuned, _ = _tuned(0.03, {"scale": (1.0, 0.5, 0.25)})   # descending: the small end is the last
    assert tuned.extended_params_ == {"scale": (0.125, 0.0625, 0.03125)}
    assert tuned.param_grid_["scale"][-1] == 0.03125
    tuned, _ = _tuned(1.0, {"scale": (1.0,), "n_neighbors": (1, 2, 4)})  # best n_neighbors is 7
    assert tuned.extended_params_ == {"n_neighbors": (8, 16)} and tuned.best_params_["n_neighbors"] == 8
    assert isinstance(tuned.best_params_["n_neighbors"], int)
    tuned, caught = _tuned(1000.0, {"scale": (1.0, 2.0)})   # two values: no interior, no extension
    assert tuned.extended_params_ == {} and caught == []
    tuned, _ = _tuned(1e-4, {"scale": (1e-2, 1e-1, 1.0)})  # a geometric grid: by its ratio, without round-off
    assert tuned.extended_params_ == {"scale": (1e-3, 1e-4, 1e-5)}


def test_no_warning_for_an_end_nothing_lies_past():
    # one neighbour is the fewest there are: the search cannot go past it, and nobody should try
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = kb.tune_filter(_Offset(best_neighbors=0.5), STATES, STATES, param_grid={"n_neighbors": (1, 3, 10)},
                               validation_length=20, progress=False)
    assert tuned.best_params_ == {"n_neighbors": 1} and tuned.extended_params_ == {}
    assert [str(w.message) for w in caught] == []
    # past the other end there are more: extended, and warned about once the extensions run out
    tuned, caught = _tuned(1.0, {"scale": (1.0,), "n_neighbors": (1, 3, 10)}, max_extensions=0)
    assert tuned.best_params_["n_neighbors"] == 10 and len(caught) == 1 and "largest" in str(caught[0].message)


def test_a_tuning_warning_through_joblib_points_at_the_callers_line():
    # the bench runs tune_filter inside joblib: the warning must not point into joblib's source
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Parallel(n_jobs=1)(delayed(kb.tune_filter)(_Offset(best=1000.0), STATES, STATES,
                                                   param_grid={"scale": (0.5, 1.0, 2.0)}, validation_length=20,
                                                   progress=False, max_extensions=0) for _ in range(1))
    edge = [w for w in caught if "grid" in str(w.message)]
    assert len(edge) == 1 and edge[0].filename == __file__


# -- the bench's --grid ---------------------------------------------------------------------------
def test_bench_grid_axes_replace_an_axis_of_each_tuned_methods_grid():
    from kbfilter.bench import run_bench

    rows = run_bench("rotation", runs=1, train_length=80, test_length=10, methods=("kbf-iw", "ekf"),
                     validation_length=20, progress=False, n_jobs=1,
                     grid_axes={"scale": (0.7,), "reg_prior": (1e-2,), "reg_update": (1e-2,)})
    assert rows[0]["params"]["kbf-iw"] == {"scale": 0.7, "reg_prior": 1e-2, "reg_update": 1e-2}
    assert rows[0]["extended"]["kbf-iw"] == {}
    with pytest.raises(ValueError, match="grid_axes: 'n_particles' is not a parameter of any tuned method"):
        run_bench("rotation", runs=1, methods=("kbf-iw",), grid_axes={"n_particles": (10,)}, progress=False)
    # refused by the method's own check, as tune_filter refuses it, before any data are made
    with pytest.raises(ValueError, match=r"grid_axes: KernelBayesFilter refuses scale='wide' \(scale: expected"):
        run_bench("rotation", runs=1, methods=("kbf-iw",), grid_axes={"scale": ("wide",)}, progress=False)
    with pytest.raises(ValueError, match=r"grid_axes: KernelBayesFilter refuses scale=-1.0 \(scale: expected"):
        run_bench("rotation", runs=1, methods=("kbf-iw",), grid_axes={"scale": (0.5, -1.0)}, progress=False)
    with pytest.raises(ValueError, match=r"grid_axes: KernelMonteCarloFilter refuses ess_threshold=2.0 "
                                         r"\(ess_threshold: expected a fraction"):
        run_bench("rotation", runs=1, methods=("kmc-iw",), grid_axes={"ess_threshold": (0.5, 2.0)}, progress=False)
    with pytest.raises(ValueError, match=r"grid_axes\['scale'\]: expected a list of candidate values, got an empty"):
        run_bench("rotation", runs=1, methods=("kbf-iw",), grid_axes={"scale": ()}, progress=False)
    with pytest.raises(ValueError, match=r"grid_axes: support is a count \(default 256\); expected whole numbers"):
        run_bench("rotation", runs=1, methods=("kbf-iw-local",), grid_axes={"support": (100.5,)}, progress=False)


def test_the_command_line_takes_grid_axes_and_refuses_bad_ones(tmp_path, capsys):
    from kbfilter.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "rotation", "--grid", "scale=0.5,x", "--out", str(tmp_path / "a")])
    assert stop.value.code == 2 and "expected numbers after scale=" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["bench", "rotation", "--grid", "bogus=1,2", "--out", str(tmp_path / "b")])
    assert stop.value.code == 2 and "--grid: 'bogus' is not a parameter" in capsys.readouterr().err
    # a name given twice had kept the last value without a word; a value given twice ran twice
    for args, refusal in [(["--grid", "scale=0.5", "--grid", "scale=2"], "--grid: scale given 2 times"),
                          (["--system-param", "noise=0.1", "--system-param", "noise=0.2"],
                           "--system-param: noise given 2 times"),
                          (["--grid", "scale=0.5,2,0.5"], "--grid['scale']: expected distinct candidate values"),
                          # two runs of one length wrote into one folder, the second over the first
                          (["--train-length", "80", "80"], "--train-length: 80 given 2 times"),
                          (["--methods", "ekf", "ukf", "ekf"], "--methods: each method once")]:
        with pytest.raises(SystemExit) as stop:
            main(["bench", "rotation", *args, "--out", str(tmp_path / "d")])
        assert stop.value.code == 2 and refusal in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
    assert main(["bench", "rotation", "--runs", "1", "--train-length", "80", "--test-length", "10",
                 "--validation-length", "20", "--methods", "kbf-iw", "--jobs", "1", "--quiet",
                 "--grid", "scale=0.7", "--grid", "reg_prior=0.01", "--grid", "reg_update=0.01",
                 "--out", str(tmp_path / "c")]) == 0
    import json

    results = json.loads((tmp_path / "c" / "results.json").read_text())
    assert results["config"]["grid_axes"] == {"scale": [0.7], "reg_prior": [0.01], "reg_update": [0.01]}


# -- the pendulum of the "Your own data" page -----------------------------------------------------
@pytest.fixture(scope="module")
def pendulum():
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "own_data.py"
    return runpy.run_path(str(example))["Pendulum"]


def test_on_the_pendulum_the_default_filter_is_the_filter_of_hand_standardised_columns(pendulum):
    states, obs = pendulum().simulate(460, rng=3)
    train, test = slice(0, 400), slice(400, None)
    assert states[train].std(axis=0)[1] > 2 * states[train].std(axis=0)[0]  # the columns differ in scale
    params = dict(scale=0.5, reg_prior=1e-4, reg_update=1e-1)
    default = kb.KernelBayesFilter(**params).fit(states[train], obs[train])
    mx, sx = states[train].mean(axis=0), states[train].std(axis=0)
    mz, sz = obs[train].mean(axis=0), obs[train].std(axis=0)
    by_hand = kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(), kernel_z=kb.GaussianKernel(), **params).fit(
        (states[train] - mx) / sx, (obs[train] - mz) / sz)
    np.testing.assert_allclose(default.batch_filter(obs[test])[0],
                               by_hand.batch_filter((obs[test] - mz) / sz)[0] * sx + mx, rtol=1e-7, atol=1e-9)


def test_on_the_pendulum_tuning_extends_a_grid_whose_optimum_is_beyond_it(pendulum):
    states, obs = pendulum().simulate(400, rng=3)
    grid = {"scale": (2.0, 4.0, 8.0), "reg_prior": (1e-4,), "reg_update": (1e-1,)}  # all too wide
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, param_grid=grid, validation_length=100,
                             progress=False)
    assert kbf.extended_params_["scale"][0] == 1.0 and kbf.best_params_["scale"] < 2.0
    best = min(kbf.search_table_, key=lambda row: row["mse"])
    assert kbf.best_params_["scale"] == best["scale"]
