"""scikit-learn's conventions, BLAS threads and tuning's reports."""

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.gaussian_process.kernels import RBF, Matern
from threadpoolctl import threadpool_info

import kbfilter as kb
from kbfilter.features import GaussianBlur, LearnedFeatures, RandomFourierFeatures
from kbfilter.filters import WindowRegressor
from kbfilter.filters.nearest import NearestNeighbourParticleFilter

RNG = np.random.default_rng(0)
A = RNG.normal(size=(150, 2))
B = np.sin(A) + 0.1 * RNG.normal(size=(150, 2))


# -- scikit-learn's estimator checks ------------------------------------------------------------
# Each exemption says why kbfilter differs on purpose; any other failing check fails the test.
EVERYWHERE = {
    # fit(states, observations) / fit(A, B) / fit(Z, X): both arguments are data the model needs,
    # named for what they are; none is an optional supervised target called y
    "check_fit_score_takes_y": "two required data arguments, named for what they are",
    # a 1-D array is documented as n one-dimensional points (states of a scalar system)
    "check_fit1d": "1-D input means n scalar points",
    "check_fit2d_predict1d": "1-D input means n scalar points; a feature-count mismatch is reported as such",
    # every bad input raises ValueError naming the argument; the check wants numpy's TypeError
    "check_dtype_object": "non-numeric entries raise ValueError naming the argument, not TypeError",
    # the number of features is checked after fit, in kbfilter's words ("Q: expected 3 columns
    # (features per sample), got 1") rather than scikit-learn's sentence
    "check_n_features_in_after_fitting": "feature counts are checked, with kbfilter's message",
}
# filterpy's predict() / update(z) are the Bayesian steps, not scikit-learn's predict(X): every
# check that calls predict(X) on a filter does not apply
FILTER = {name: "predict() is the filter's time update, not predict(X)" for name in (
    "check_estimators_dtypes", "check_dtype_object", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit2d_predict1d", "check_estimators_nan_inf", "check_estimators_unfitted")}
FILTER["check_dont_overwrite_parameters"] = ("the belief (x, P, weights) is filterpy's public state, set by fit's "
                                             "reset() as filterpy sets it at construction")
# scikit-learn's checks fit on a single feature whose values it repeats; the median bandwidth of
# such data can be 0, and kbfilter refuses it with a message naming the kernel
MEDIAN = {"check_fit2d_1feature": "median bandwidth of degenerate data is refused with its own message",
          "check_fit_check_is_fitted": "same: the check's data has a zero median distance"}
# an image transformer needs the image's shape: scikit-learn's checks cannot give it
IMAGES = {"check_fit2d_1feature": "a 1 x 1 image cannot be blurred with a 3-pixel kernel",
          **{name: "the checks' data are not images of the transformer's image_shape" for name in (
              "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
              "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_estimators_dtypes",
              "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle",
              "check_f_contiguous_array_estimator", "check_transformer_general", "check_transformer_preserve_dtypes",
              "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_fit2d_1sample",
              "check_dict_unchanged", "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in",
              "check_transformer_data_not_an_array")}}

CASES = [
    (kb.KernelBayesFilter(), {**EVERYWHERE, **FILTER, **MEDIAN}),
    (WindowRegressor(), {**EVERYWHERE, **FILTER}),
    (kb.KernelBayesRule(), {**EVERYWHERE, **MEDIAN}),
    (kb.ConditionalEmbedding(), {**EVERYWHERE, **MEDIAN}),
    (GaussianBlur(image_shape=(2, 2)), {**EVERYWHERE, **IMAGES}),
    (RandomFourierFeatures(), dict(EVERYWHERE)),
    (LearnedFeatures(n_pca=2, hidden_layer_sizes=(4,), max_iter=20), dict(EVERYWHERE)),
]


@pytest.mark.skipif(tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 6),
                    reason="check_estimator(on_fail=None), which lists every check's result, is scikit-learn 1.6's")
@pytest.mark.parametrize("estimator, exempt", CASES, ids=[type(e).__name__ for e, _ in CASES])
def test_scikit_learn_estimator_checks_pass_except_the_listed_exemptions(estimator, exempt):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    unexpected = {k: v for k, v in failed.items() if k not in exempt}
    assert not unexpected
    assert any(r["status"] == "passed" for r in results)


def test_n_features_in_and_a_regression_scorer():
    from sklearn.model_selection import GridSearchCV

    ckme = kb.ConditionalEmbedding().fit(A, B)
    assert ckme.n_features_in_ == 2
    np.testing.assert_array_equal(ckme.predict(A[:5]), ckme.predict_mean(A[:5]))
    search = GridSearchCV(kb.ConditionalEmbedding(), {"reg": [1e-4, 1e-2, 10.0]}, cv=3,
                          scoring="neg_mean_squared_error").fit(A, B)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and search.best_params_["reg"] != 10.0
    assert kb.KernelBayesFilter().fit(A, B).n_features_in_ == 2
    assert kb.KernelBayesRule().fit(A, B).n_features_in_ == 2


@pytest.mark.parametrize("make, fitted_name", [
    (lambda: kb.KernelBayesFilter(), "rule_"),
    (lambda: kb.KernelMonteCarloFilter(motion=kb.systems.Rotation()), "particles"),
    (lambda: kb.LearnedMotionFilter(), "motion_"),
    (lambda: WindowRegressor(), "obs_shape_"),
], ids=["kbf", "kmc", "learned-motion", "window"])
def test_reading_the_belief_or_the_model_before_fit_says_to_fit(make, fitted_name):
    """The estimate or a fitted attribute read before fit had raised an AttributeError naming an
    internal attribute (``'_belief'``, ``'model_'``, ``'belief'``) the getter had missed."""
    import pickle

    unfitted = make()
    for name in ("x", "P", "x_prior", "P_post", fitted_name):
        with pytest.raises(NotFittedError, match=rf"^This {type(unfitted).__name__} instance is not fitted yet, "
                                                 rf"so it has no {name}; call fit first$"):
            getattr(unfitted, name)
        assert not hasattr(unfitted, name)   # still an AttributeError, as hasattr and getattr(..., None) read it
    # names the filter never has, and the noise it takes from elsewhere, keep Python's message
    for name in ("bogus", "Q"):
        with pytest.raises(AttributeError, match=rf"^'{type(unfitted).__name__}' object has no attribute '{name}'$"):
            getattr(unfitted, name)
    assert type(pickle.loads(pickle.dumps(unfitted))) is type(unfitted)


def test_a_particle_filter_read_before_its_belief_says_to_initialize():
    from kbfilter.filters import ParticleFilter

    pf = ParticleFilter(kb.systems.Rotation(), n_particles=50, rng=0)
    for name in ("x", "particles", "particle_weights"):
        with pytest.raises(AttributeError, match=rf"^ParticleFilter: no belief yet, so no {name}; call initialize"):
            getattr(pf, name)
    pf.initialize(np.zeros(2), np.eye(2))
    assert pf.particles.shape == (50, 2) and pf.x.shape == (2,)


def test_scikit_learns_rbf_and_matern_kernels_are_accepted_and_equal_ours():
    for theirs, ours in ((RBF(0.7), kb.GaussianKernel(0.7)), (Matern(0.7, nu=0.5), kb.LaplaceKernel(0.7)),
                         (Matern(0.7, nu=np.inf), kb.GaussianKernel(0.7))):
        # the same function: equal up to the rounding of |a|^2 + |b|^2 - 2 a.b against a direct |a - b|
        np.testing.assert_allclose(theirs(A[:20], A[:30]), ours(A[:20], A[:30]), rtol=0, atol=1e-7)
        a = kb.ConditionalEmbedding(kernel_in=theirs, kernel_out=theirs).fit(A, B).predict(A[:10])
        b = kb.ConditionalEmbedding(kernel_in=ours, kernel_out=ours).fit(A, B).predict(A[:10])
        np.testing.assert_array_equal(a, b)
    states, obs = kb.systems.Rotation().simulate(120, rng=0)
    a = kb.KernelBayesFilter(kernel_x=RBF(0.8), kernel_z=RBF(0.9), scale=0.5).fit(states, obs).batch_filter(obs[:20])
    b = kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(0.8), kernel_z=kb.GaussianKernel(0.9),
                             scale=0.5).fit(states, obs).batch_filter(obs[:20])
    np.testing.assert_array_equal(a[0], b[0])
    with pytest.raises(ValueError, match=r"kernel_in: Matern\(nu=1.5\) has no kbfilter equal"):
        kb.ConditionalEmbedding(kernel_in=Matern(1.0, nu=1.5)).fit(A, B)
    with pytest.raises(ValueError, match="kernel_x: an anisotropic RBF"):
        kb.KernelBayesFilter(kernel_x=RBF([1.0, 2.0])).fit(states, obs)
    with pytest.raises(ValueError, match="kernel_z: expected a kbfilter Kernel"):
        kb.KernelBayesFilter(kernel_z="rbf").fit(states, obs)


# -- threads -------------------------------------------------------------------------------------
class _RecordingKernel(kb.GaussianKernel):
    """Records the BLAS thread counts in force whenever a Gram matrix is computed."""

    seen = []

    def _gram(self, A, B):
        _RecordingKernel.seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return super()._gram(A, B)


def test_entry_points_run_under_the_blas_thread_setting_and_restore_it():
    states, obs = kb.systems.Rotation().simulate(80, rng=0)
    outside = {i["filepath"]: i["num_threads"] for i in threadpool_info()}
    previous = kb.blas_threads()
    try:
        for setting in (1, 2):
            kb.set_blas_threads(setting)
            _RecordingKernel.seen = []
            kb.KernelBayesFilter(kernel_x=_RecordingKernel()).fit(states, obs).batch_filter(obs[:5])
            assert _RecordingKernel.seen and all(s == {setting} for s in _RecordingKernel.seen)
            assert {i["filepath"]: i["num_threads"] for i in threadpool_info()} == outside
        kb.set_blas_threads(None)
        _RecordingKernel.seen = []
        kb.KernelBayesFilter(kernel_x=_RecordingKernel()).fit(states, obs)
        assert all(s == set(outside.values()) for s in _RecordingKernel.seen)
        for bad in (0, True, 2.5):
            with pytest.raises(ValueError, match="n: expected a positive integer or None"):
                kb.set_blas_threads(bad)
        assert kb.blas_threads() is None   # a refused setting leaves the last one
    finally:
        kb.set_blas_threads(previous)
    assert kb.blas_threads() == previous


def test_entry_points_in_several_threads_leave_the_process_setting_as_it_was():
    """BLAS threads are the process's: filters run from four threads at once had left the process
    with kbfilter's limit for good (a thread entering while another held it saved that limit as
    the process's setting, and restored it last)."""
    import copy
    from concurrent.futures import ThreadPoolExecutor

    states, obs = kb.systems.Rotation().simulate(300, rng=0)
    runs = [kb.systems.Rotation().simulate(150, rng=r)[1] for r in range(8)]
    kbf = kb.KernelBayesFilter().fit(states, obs)
    outside = {i["filepath"]: i["num_threads"] for i in threadpool_info()}
    previous = kb.blas_threads()
    try:
        kb.set_blas_threads(2 if max(outside.values()) == 1 else 1)   # not what the process has
        with ThreadPoolExecutor(4) as pool:
            means = list(pool.map(lambda zs: copy.deepcopy(kbf).batch_filter(zs)[0], runs))
        assert all(np.all(np.isfinite(m)) for m in means)
        assert {i["filepath"]: i["num_threads"] for i in threadpool_info()} == outside
    finally:
        kb.set_blas_threads(previous)


# -- tuning --------------------------------------------------------------------------------------
def test_tune_filter_reports_why_settings_failed():
    # a compression larger than the log is refused by fit (it depends on the data), not before
    states, obs = kb.systems.Rotation().simulate(150, rng=0)
    with pytest.raises(ValueError, match=r"every evaluated setting failed.*compress.*raised ValueError: "
                                         r"compress: expected at most 99 \(the logged transitions\)"):
        kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
                       param_grid={"compress": (500, 1000)})
    with pytest.warns(kb.NumericalWarning, match="1 of 2 settings failed and were skipped"):
        kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
                       param_grid={"compress": (500, 40)})
    # a parameter outside the grid that no fit on the shortened log takes: the template is to blame
    with pytest.raises(ValueError, match=r"^filter: every setting of the grid failed alike, fitted on the training "
                                         r"steps before the validation block: ValueError: n_neighbors: expected at "
                                         r"most 99 \(the logged transitions\), got 120$"):
        kb.tune_filter(kb.KernelBayesFilter(transition="knn", n_neighbors=120), states, obs, validation_length=50,
                       progress=False, param_grid={"scale": (0.5, 1.0)})
    # a refusal of the data given names that argument
    with pytest.raises(ValueError, match=r"^controls: every setting of the grid failed alike, .*: ValueError: "
                                         r"controls: LearnedMotionFilter learns no control"):
        kb.tune_filter(kb.LearnedMotionFilter(n_particles=20), states, obs, validation_length=50, progress=False,
                       param_grid={"n_neighbors": (5, 10)}, controls=np.zeros((len(states), 1)))


@pytest.mark.parametrize("params", [{"transition": "knn"}, {"approximation": "local"}])
def test_a_neighbourhood_larger_than_the_log_is_refused_and_the_default_fits_a_short_one(params):
    """A neighbourhood past the logged transitions had been cut to all of them without a word: a
    local solve on the whole log for every state (7 minutes at T = 5,000 for n_neighbors=10**6)."""
    states, obs = kb.systems.Rotation().simulate(40, rng=0)
    with pytest.raises(ValueError, match=r"^n_neighbors: expected at most 39 \(the logged transitions\), got 40$"):
        kb.KernelBayesFilter(n_neighbors=40, **params).fit(states, obs)
    with pytest.raises(ValueError, match=r"^n_neighbors: expected at most 49 \(the logged transitions\), got 60$"):
        kb.KernelBayesFilter(n_neighbors=60, **params).fit([states, states[:11]], [obs, obs[:11]])
    # the default on a log shorter than it: every transition, as given explicitly
    short, seen = states[:15], obs[:15]
    everyone = kb.KernelBayesFilter(n_neighbors=14, **params).fit(short, seen).batch_filter(obs[:5])[0]
    np.testing.assert_array_equal(kb.KernelBayesFilter(**params).fit(short, seen).batch_filter(obs[:5])[0], everyone)
    # the exact transition has no neighbourhood: the value is not read
    kb.KernelBayesFilter(n_neighbors=10**6).fit(states, obs)


def test_a_knn_embedding_given_as_the_transition_keeps_its_neighbourhood_inside_the_log():
    """A template's neighbourhood past the log had been cut to the log without a word, a bad one
    raised a TypeError, and the filter's own ``n_neighbors`` beside it was silently not read."""
    states, obs = kb.systems.Rotation().simulate(40, rng=0)
    template = kb.ConditionalEmbedding(method="knn", n_neighbors=12)
    for params, refusal in [({"n_neighbors": 50}, r"^transition\.n_neighbors: expected at most 39 \(the logged"),
                            ({"n_neighbors": "a"}, r"^transition\.n_neighbors: expected an integer, got 'a'$")]:
        with pytest.raises(ValueError, match=refusal):
            kb.KernelBayesFilter(transition=clone(template).set_params(**params)).fit(states, obs)
    with pytest.raises(ValueError, match=r"^n_neighbors: .* its own n_neighbors=12; expected None$"):
        kb.KernelBayesFilter(transition=template, n_neighbors=5).fit(states, obs)
    # compression keeps fewer transitions than the log holds: the neighbourhood must fit in those
    for given in (template, "knn"):
        with pytest.raises(ValueError, match=r"n_neighbors: expected at most 10 \(the transitions compress keeps\)"):
            kb.KernelBayesFilter(transition=given, n_neighbors=None if given is template else 12,
                                 compress=10).fit(states, obs)
    # inside the log, the template's neighbourhood is the one the filter uses
    fitted = kb.KernelBayesFilter(transition=template).fit(states, obs)
    explicit = kb.KernelBayesFilter(transition="knn", n_neighbors=12).fit(states, obs)
    np.testing.assert_allclose(fitted.batch_filter(obs[:5])[0], explicit.batch_filter(obs[:5])[0], rtol=1e-12)


@pytest.mark.parametrize("template, name, bad, refusal", [
    (kb.KernelBayesFilter(), "scale", -1.0, "scale: expected"),
    (kb.KernelBayesFilter(transition="knn"), "n_neighbors", 0, "n_neighbors: expected an integer >= 1"),
    (kb.KernelBayesFilter(), "rule", "IW", "rule: expected one of"),
    (kb.KernelMonteCarloFilter(motion=kb.systems.Rotation()), "n_particles", 1,
     "n_particles: expected an integer >= 2"),
    (NearestNeighbourParticleFilter(motion=kb.systems.Rotation()), "scale", 0.0,
     "scale: expected"),
])
def test_tune_filter_refuses_a_grid_value_the_filter_refuses_before_any_fit(monkeypatch, count_fits, template, name,
                                                                            bad, refusal):
    states, obs = kb.systems.Rotation().simulate(150, rng=0)
    good = template.get_params()[name]
    fits = count_fits(type(template))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"param_grid: {type(template).__name__} refuses {name}={bad!r} "
                                             rf"\({refusal}"):
            kb.tune_filter(template, states, obs, validation_length=50, progress=False, param_grid={name: (good, bad)})
    assert fits == []
    monkeypatch.undo()
    # what tuning quotes is the filter's own check, which fit runs first
    with pytest.raises(ValueError, match=refusal):
        clone(template).set_params(**{name: bad}).check_params()
    with pytest.raises(ValueError, match=refusal):
        clone(template).set_params(**{name: bad}).fit(states, obs)


def test_tune_filter_refuses_a_template_the_filter_refuses_before_any_fit(count_fits):
    states, obs = kb.systems.Rotation().simulate(150, rng=0)
    fits = count_fits(kb.KernelBayesFilter)
    with pytest.raises(ValueError, match="^filter: estimate: expected one of"):
        kb.tune_filter(kb.KernelBayesFilter(estimate="median"), states, obs, validation_length=50, progress=False,
                       param_grid={"scale": (0.5, 1.0)})
    assert fits == []


def test_tune_filter_warns_when_the_best_value_is_on_the_edge_of_its_grid():
    states, obs = kb.systems.Rotation().simulate(200, rng=0)
    # rotation's noise wants a small regulariser: 10, 30, 100 puts the best at the low edge
    with pytest.warns(UserWarning, match=r"the chosen reg_update=10.0 is the smallest value of its grid"):
        kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
                       param_grid={"reg_update": (10.0, 30.0, 100.0)}, max_extensions=0)
    # by default the grid follows the optimum down instead: 10 / 3, then 10 / 9, ...
    tuned = kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
                           param_grid={"reg_update": (10.0, 30.0, 100.0)})
    assert tuned.extended_params_["reg_update"][0] == pytest.approx(10.0 / 3.0)
    assert tuned.best_params_["reg_update"] < 10.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False,
                       param_grid={"reg_update": (1e-5, 1e-2, 1e3)})


def test_tune_filter_says_what_the_fit_says_of_the_data_once_at_the_callers_line():
    """A training state far from the others is reported by the fit of the chosen filter, once; each
    candidate's fit had said it again (and, in worker processes, at multiprocessing's line)."""
    states, obs = kb.systems.Rotation().simulate(200, rng=0)
    states[50] += 500.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kb.tune_filter(kb.KernelBayesFilter(), states, obs, validation_length=50, progress=False, n_jobs=1,
                       param_grid={"scale": (0.5, 1.0), "reg_update": (0.01, 0.1)}, max_extensions=0)
    outlying = [w for w in caught if "lie more than 100 robust spreads" in str(w.message)]
    assert len(outlying) == 1 and outlying[0].filename == __file__


def test_images_get_the_image_grid_and_the_blur_by_default():
    from kbfilter.tuning import BLUR_GRID, DEFAULT_GRID, FEATURE_GRID, IMAGE_GRID, default_grid

    system = kb.systems.MovingSprite()
    states, images = system.simulate(60, rng=0)
    assert default_grid(kb.KernelBayesFilter(), images) is BLUR_GRID
    assert default_grid(kb.KernelBayesFilter(features=None), images) is IMAGE_GRID
    assert default_grid(kb.KernelBayesFilter(features=LearnedFeatures()), images) is FEATURE_GRID
    assert default_grid(kb.KernelBayesFilter(), states) is DEFAULT_GRID
    blurred = kb.KernelBayesFilter().fit(states, images)
    assert isinstance(blurred.features_, GaussianBlur) and blurred.features_.image_shape == (64, 64)
    explicit = kb.KernelBayesFilter(features=GaussianBlur(sigma=3.0, stride=2)).fit(states, images)
    np.testing.assert_array_equal(blurred.batch_filter(images[:10])[0], explicit.batch_filter(images[:10])[0])
    assert kb.KernelBayesFilter(features=None).fit(states, images).features_ is None
    assert kb.KernelBayesFilter().fit(states, states).features_ is None
    with pytest.raises(ValueError, match="features: expected one of"):
        kb.KernelBayesFilter(features="blur").fit(states, images)
