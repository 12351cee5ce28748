"""The components filters are built from: the learned observation model, the particle belief, the
filter contract, and one fitted kernel per fit."""

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

import kbfilter as kb
import kbfilter._validation as validation
import kbfilter.kernel_approximation as kernel_approximation
import kbfilter.kernels as kernels
from kbfilter.filters import NearestNeighbourParticleFilter, ParticleFilter
from kbfilter.filters.base import LearnedFilter, training_pairs
from kbfilter.filters.observation import ObservationSettings, observation_grid
from kbfilter.filters.particles import ParticleBelief, resampling_due, systematic_resample


@pytest.fixture(scope="module")
def rotation():
    system = kb.systems.Rotation()
    return system, system.simulate(300, rng=0), system.simulate(20, rng=1)


# -- the particle belief ----------------------------------------------------------------------------
def test_reweighting_in_log_space_is_bayes_rule_and_returns_the_evidence():
    rng = np.random.default_rng(0)
    particles, prior = rng.normal(size=(50, 2)), rng.dirichlet(np.ones(50))
    loglik = rng.normal(size=50) * 3
    belief = ParticleBelief(particles, prior)
    evidence = belief.reweight_log(loglik)
    np.testing.assert_allclose(evidence, np.log(np.sum(prior * np.exp(loglik))), rtol=1e-12)
    np.testing.assert_allclose(belief.weights, prior * np.exp(loglik) / np.sum(prior * np.exp(loglik)), rtol=1e-10)
    mean, cov = belief.estimate()
    np.testing.assert_allclose(mean, belief.weights @ particles)
    np.testing.assert_allclose(cov, np.cov(particles.T, aweights=belief.weights, bias=True), atol=1e-12)
    np.testing.assert_allclose(belief.ess, 1 / np.sum(belief.weights**2))


def test_reweighting_by_enormous_log_likelihoods_keeps_the_weights_a_probability():
    # -1e300 + log 0.1 is -1e300 in floating point: every weight came out 1 (summing to 4)
    belief = ParticleBelief(np.zeros((4, 1)), np.array([0.1, 0.2, 0.3, 0.4]))
    assert belief.reweight_log(np.full(4, -1e300)) == -1e300
    np.testing.assert_allclose(belief.weights, [0.1, 0.2, 0.3, 0.4], rtol=1e-12)
    # a particle impossible or far less likely than the others loses its weight; the rest keep theirs
    belief.reweight_log(np.array([-1e300, -np.inf, -1e300 - 1e290, -1e300]))
    np.testing.assert_allclose(belief.weights, [0.2, 0.0, 0.0, 0.8], rtol=1e-12)


def test_a_particle_of_weight_zero_keeps_it_without_a_warning():
    belief = ParticleBelief(np.arange(3.0)[:, None], np.array([0.0, 0.5, 0.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evidence = belief.reweight_log(np.log([1.0, 1.0, 3.0]))
    np.testing.assert_allclose(belief.weights, [0, 0.25, 0.75])
    np.testing.assert_allclose(evidence, np.log(2.0))


def test_a_factor_with_no_positive_entry_leaves_the_weights_as_they_were():
    belief = ParticleBelief(np.arange(4.0)[:, None])
    assert not belief.reweight(np.zeros(4))
    np.testing.assert_array_equal(belief.weights, np.full(4, 0.25))
    assert belief.reweight(np.array([0.0, 1.0, 3.0, 0.0]))
    np.testing.assert_allclose(belief.weights, [0, 0.25, 0.75, 0])


def test_resampling_only_when_the_effective_sample_size_is_low():
    rng = np.random.default_rng(1)
    belief = ParticleBelief(np.arange(10.0)[:, None])
    assert not belief.resample_if_due(0.5, rng)          # equal weights: ESS = n
    belief.reweight(np.r_[np.full(9, 1e-6), 1.0])
    assert belief.resample_if_due(0.5, rng)
    np.testing.assert_array_equal(belief.particles[:, 0], np.full(10, 9.0))
    np.testing.assert_array_equal(belief.weights, np.full(10, 0.1))


def test_systematic_resampling_keeps_each_particle_about_n_times_its_weight_and_refuses_other_weights():
    weights = np.array([0.05, 0.45, 0.0, 0.5])
    counts = np.bincount(systematic_resample(weights, 0), minlength=4)
    # systematic resampling keeps particle j floor(n w_j) or ceil(n w_j) times
    assert np.all(np.abs(counts - 4 * weights) < 1) and counts[2] == 0
    seeded = systematic_resample(weights, np.random.default_rng(3))
    np.testing.assert_array_equal(systematic_resample(weights, 3), seeded)
    # unnormalised weights kept particle 0 alone, NaN or negative ones gave indices all the same
    for bad, message in [(np.ones(4), "summing to 1, got a sum of 4"), (np.array([0.5, np.nan, 0.5]), "finite"),
                         (np.array([0.5, 0.6, -0.1]), "non-negative"), (np.full((2, 2), 0.25), "1-D")]:
        for check in (lambda w: systematic_resample(w, 0), lambda w: resampling_due(w, 0.5)):
            with pytest.raises(ValueError, match=f"weights: expected .*{message}"):
                check(bad)


def test_a_belief_is_refused_when_its_weights_do_not_match_its_particles():
    with pytest.raises(ValueError, match="weights: expected one weight per particle"):
        ParticleBelief(np.zeros((3, 2)), np.ones(4) / 4)
    # weights that are no probability were kept as given, and estimates made from them
    for bad in (np.ones(3), np.array([0.5, 0.6, -0.1]), np.array([0.5, np.nan, 0.5])):
        with pytest.raises(ValueError, match="weights: expected (finite, non-negative|normalised)"):
            ParticleBelief(np.zeros((3, 2)), bad)
    belief = ParticleBelief(np.arange(3.0)[:, None])
    with pytest.raises(ValueError, match="factor: expected a non-negative likelihood"):
        belief.reweight(np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match=r"factor: expected one value per particle, shape \(3,\)"):
        belief.reweight(np.ones(2))
    np.testing.assert_array_equal(belief.weights, np.full(3, 1 / 3))


def test_the_bootstrap_filter_is_bayes_rule_on_its_particle_belief(rotation):
    system, _, (_, obs) = rotation
    pf = ParticleFilter(system, n_particles=200, rng=0, ess_threshold=0.5)
    pf.initialize(np.zeros(2), np.eye(2))
    pf.predict()
    before = ParticleBelief(pf.particles.copy(), pf.particle_weights.copy())
    pf.update(obs[0])
    loglik = system.observation_loglik(obs[0], before.particles)
    expected = before.weights * np.exp(loglik - loglik.max())
    np.testing.assert_allclose(pf.x_post, expected @ before.particles / expected.sum(), rtol=1e-10)
    np.testing.assert_allclose(pf.log_likelihood, logsumexp(np.log(before.weights) + loglik), rtol=1e-12)


def test_the_old_name_of_the_particle_weights_still_works_and_warns(rotation):
    system, (X, Z), _ = rotation
    for filt in (ParticleFilter(system, n_particles=50, rng=0).initialize(np.zeros(2), np.eye(2)),
                 NearestNeighbourParticleFilter(system, n_particles=50, random_state=0).fit(X, Z)):
        with pytest.warns(FutureWarning, match="use particle_weights"):
            np.testing.assert_array_equal(filt.weights, filt.particle_weights)


# -- the learned observation model --------------------------------------------------------------------
def test_the_observation_model_is_kernel_bayes_rule_on_the_filters_prior(rotation):
    _, (X, Z), (_, obs) = rotation
    kbf = kb.KernelBayesFilter().fit(X, Z)
    kbf.predict()
    prior = kbf.weights_prior.copy()
    model = kbf.observation_model_
    raw, _ = model.posterior_weights(kbf.projection_operator_ @ prior, model.admit(obs[0]))
    # the same update through the rule's public surface, from the prior's values at the states
    expected = kbf.rule_.posterior(kb.KernelMean(kbf.states_, prior, kbf.rule_.kernel_x_), obs[0]).weights
    np.testing.assert_allclose(raw, expected, rtol=1e-8, atol=1e-12)
    kbf.update(obs[0])
    np.testing.assert_allclose(kbf.weights, raw / raw.sum(), rtol=1e-10, atol=1e-14)   # signed weights, sum 1


def test_the_gate_is_part_of_the_observation_model(rotation):
    _, (X, Z), _ = rotation
    model = kb.KernelBayesFilter(outlier_quantile=0.9).fit(X, Z).observation_model_
    assert model.admit(Z[0]) is not None and model.admit(Z[0] + 50.0) is None
    with pytest.raises(ValueError, match="z: expected length 2"):
        model.admit([1.0, 2.0, 3.0])


def test_settings_are_checked_before_any_work():
    filt = kb.KernelBayesFilter(scale=-1.0)
    with pytest.raises(ValueError, match="scale"):
        ObservationSettings.of(filt)
    with pytest.raises(ValueError, match="approximation"):
        ObservationSettings.of(kb.KernelMonteCarloFilter(approximation="exactly"))


# -- one fitted kernel, one check of each observation --------------------------------------------------
class _Counter:
    def __init__(self, monkeypatch, module, name):
        self.calls, original = 0, getattr(module, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


@pytest.mark.parametrize("params, medians, factorisations", [
    ({}, 2, 0),                                     # the state and the observation kernel, once each
    ({"approximation": "nystrom"}, 2, 2),           # ... and one landmark choice each
    ({"transition": "knn"}, 2, 0),
    ({"compress": 60, "random_state": 0}, 2, 0),
])
def test_a_fit_fits_each_kernel_once_and_an_update_checks_the_observation_once(rotation, monkeypatch, params,
                                                                                 medians, factorisations):
    _, (X, Z), (_, obs) = rotation
    median = _Counter(monkeypatch, kernels, "median_distance")
    cholesky = _Counter(monkeypatch, kernel_approximation, "pivoted_cholesky")
    kbf = kb.KernelBayesFilter(**params).fit(X, Z)
    assert (median.calls, cholesky.calls) == (medians, factorisations)
    checks = _Counter(monkeypatch, validation, "_as_float")
    kbf.predict()
    kbf.update(obs[0])
    assert checks.calls == 1
    # the rule, the transition and the point estimate share the one state kernel
    bandwidth = kbf.kernel_x_.bandwidth_
    assert kbf.transition_.kernel_out_.bandwidth_ == bandwidth
    state_kernel = kbf.rule_.kernel_x_
    assert getattr(state_kernel, "kernel_", state_kernel).bandwidth_ == bandwidth
    if params.get("approximation") == "nystrom":
        assert kbf.transition_.kernel_in_ is not state_kernel      # frozen copy, same landmarks
        np.testing.assert_array_equal(kbf.transition_.kernel_in_.landmarks_, state_kernel.landmarks_)


def test_the_monte_carlo_filter_checks_each_observation_once(rotation, monkeypatch):
    system, (X, Z), (_, obs) = rotation
    median = _Counter(monkeypatch, kernels, "median_distance")
    kmc = kb.KernelMonteCarloFilter(system, n_particles=50, resample="ratio", random_state=0).fit(X, Z)
    assert median.calls == 2
    checks = _Counter(monkeypatch, validation, "_as_float")
    kmc.update(obs[0])
    assert checks.calls == 1


def test_a_frozen_kernel_is_not_refitted_and_a_clone_is_itself():
    from sklearn.base import clone

    kernel = kb.GaussianKernel().fit(np.arange(10.0)[:, None]).frozen()
    assert clone(kernel) is kernel
    assert kernels.fitted_kernel(kernel, "kernel", np.arange(100.0)[:, None]) is kernel
    embedding = kb.ConditionalEmbedding(kernel_in=kernel, kernel_out=kernel).fit(np.arange(20.0)[:, None],
                                                                               np.arange(20.0)[:, None])
    assert embedding.kernel_in_.bandwidth_ == kernel.bandwidth_
    with pytest.raises(Exception, match="fitted"):
        kb.GaussianKernel().frozen()


# -- the filter contract ------------------------------------------------------------------------------
def test_tuning_takes_the_grid_a_new_filter_states(rotation):
    _, (X, Z), _ = rotation

    class Nearest(LearnedFilter):
        """A filter of the contract's smallest size: the state of the nearest training observation."""

        def __init__(self, shift=0.0):
            self.shift = shift

        def fit(self, states, observations, controls=None):
            self.states_, self.observations_, _ = training_pairs(states, observations)
            return self.reset()

        def reset(self):
            self._set_estimate("post", self.states_.mean(axis=0), np.eye(2))
            return self

        def predict(self, u=None):
            self._set_estimate("prior", self.x.copy(), self.P.copy())

        def update(self, z):
            nearest = np.argmin(np.sum((self.observations_ - z) ** 2, axis=1))
            self._set_estimate("post", self.states_[nearest] + self.shift, self.P)

        def _grid_for(self, obs_shape):
            return {"shift": (0.0, 5.0)}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tuned = kb.tune_filter(Nearest(), X, Z, validation_length=50, progress=False)
    assert tuned.get_params() == {"shift": 0.0}
    assert kb.tuning.default_grid(Nearest(), Z) == {"shift": (0.0, 5.0)}
    assert kb.tuning.default_grid(kb.KernelBayesFilter(), Z) == observation_grid("auto", "exact", (2,))
    with pytest.raises(ValueError, match="param_grid: ParticleFilter has no default grid"):
        kb.tuning.default_grid(ParticleFilter(kb.systems.Rotation()), Z)


def test_bandwidth_learning_names_moved_out_of_tuning_with_a_warning():
    from kbfilter import bandwidth_learning

    with pytest.warns(FutureWarning, match="use kbfilter.bandwidth_learning.bayesian_bandwidth"):
        assert kb.tuning.bayesian_bandwidth is bandwidth_learning.bayesian_bandwidth
    with pytest.raises(AttributeError):
        kb.tuning.no_such_name


def test_the_motion_model_under_its_old_name_still_works_and_warns(rotation):
    system, (X, Z), (_, obs) = rotation
    new = kb.KernelMonteCarloFilter(system, n_particles=50, random_state=0).fit(X, Z)
    with pytest.warns(FutureWarning, match="pass the motion model as motion="):
        old = kb.KernelMonteCarloFilter(transition=system, n_particles=50, random_state=0).fit(X, Z)
    np.testing.assert_array_equal(new.batch_filter(obs)[0], old.batch_filter(obs)[0])
    with pytest.raises(ValueError, match="motion: given twice"):
        NearestNeighbourParticleFilter(system, transition=system).fit(X, Z)
    # a method name under the old name is named as given (it was "motion: ... got str")
    for cls in (kb.KernelMonteCarloFilter, NearestNeighbourParticleFilter):
        with pytest.raises(ValueError, match=r"^transition: the deprecated name of motion, .* got 'knn'; a learned "
                                             r"transition \('exact', 'knn'\) is KernelBayesFilter's$"):
            cls(transition="knn").fit(X, Z)


def test_the_gaussian_filters_refuse_impossible_covariances_and_runs(rotation):
    system, _, (_, obs) = rotation
    for filt in (kb.filters.ExtendedKalman(system), kb.filters.UnscentedKalman(system)):
        with pytest.raises(ValueError, match="P0: expected a symmetric covariance"):
            filt.initialize(np.zeros(2), [[1.0, 0.5], [0.0, 1.0]])
        with pytest.raises(ValueError, match="P0: expected a positive semi-definite covariance"):
            filt.initialize(np.zeros(2), -np.eye(2))
        filt.initialize(np.zeros(2), np.eye(2))
        filt.predict()
        with pytest.raises(ValueError, match="R: expected a positive semi-definite covariance"):
            filt.update(obs[0], R=-np.eye(2))
        filt.update(obs[0], R=np.eye(2) * 0.1)
        assert np.all(np.linalg.eigvalsh(filt.P) > 0)
        with pytest.raises(ValueError, match="zs: expected at least one observation"):
            filt.batch_filter([])
        # a string was a run of one character a step, a number a TypeError from list()
        for run in ("abc", 5, None, np.array(2.0)):
            with pytest.raises(ValueError, match="zs: expected a run, one item a step"):
                filt.batch_filter(run)
        with pytest.raises(ValueError, match="us: expected a run, one item a step"):
            filt.batch_filter(obs[:2], us="ab")
    with pytest.raises(ValueError, match="P0: expected a positive semi-definite"):
        ParticleFilter(system, rng=0).initialize(np.zeros(2), np.diag([1.0, -1.0]))


def test_nested_lists_are_one_sequence_and_a_list_of_arrays_several(rotation):
    _, (X, Z), (_, obs) = rotation
    from_lists = kb.KernelBayesFilter().fit(X.tolist(), Z.tolist())
    np.testing.assert_array_equal(from_lists.batch_filter(obs)[0], kb.KernelBayesFilter().fit(X, Z).batch_filter(obs)[0])
    assert kb.KernelBayesFilter().fit([X[:150], X[150:]], [Z[:150], Z[150:]]).predecessors_.size == 298


def test_the_training_box_and_outlier_count_refuse_points_of_another_width():
    from kbfilter.filters.base import TrainingBox, outlying_states, stacked_predecessors

    states = np.random.default_rng(0).normal(size=(50, 2))
    box = TrainingBox(states)
    # a point of one coordinate was broadcast against both bounds and answered for
    for call, match in ((lambda: box.outside(np.zeros(1)), r"x: expected shape \(2,\), got \(1,\)"),
                        (lambda: box.count_outside(np.zeros((4, 3))), r"X: expected shape \(n, 2\), got \(4, 3\)"),
                        (lambda: TrainingBox(np.r_[states, [[np.nan, 0.0]]]), "states: contains NaN"),
                        (lambda: outlying_states(states, reference=np.zeros((5, 3))), "reference: expected 2 columns"),
                        (lambda: stacked_predecessors("ab"), "sequences: expected a list of sequences")):
        with pytest.raises(ValueError, match=match):
            call()
    # a NaN coordinate is inside no box (it was counted inside every one)
    assert box.outside(np.array([np.nan, 0.0])) and not box.outside(np.zeros(2))
    assert box.count_outside(np.array([[0.0, 0.0], [np.nan, 0.0], [100.0, 0.0]])) == 2
    assert stacked_predecessors([states[:3], states[:2]]).tolist() == [0, 1, 3]


def test_scalar_observations_are_taken_as_fit_took_them():
    x = np.cumsum(np.random.default_rng(0).normal(size=200)) * 0.1
    z = x + 0.1 * np.random.default_rng(1).normal(size=200)
    kbf = kb.KernelBayesFilter().fit(x, z)             # states (T,), observations (T,)
    means = kbf.batch_filter(z[:20])[0]                # observations in the same layout
    kbf.reset().predict()
    kbf.update(z[0])
    assert means.shape == (20, 1) and kbf.x.shape == (1,)


def test_an_estimate_that_leaves_the_training_states_is_counted_and_warned_about():
    # the original rule with vanishing regularisers: signed weights extrapolate far outside the states
    system = kb.systems.Oscillation()
    X, Z = system.simulate(200, rng=0)
    _, Zt = system.simulate(60, rng=1)
    kbf = kb.KernelBayesFilter(rule="original", reg_prior=1e-12, reg_update=1e-12).fit(X, Z)
    with pytest.warns(kb.NumericalWarning, match="left the training states' bounding box by more than 10%"):
        means = kbf.batch_filter(Zt)[0]
    low, high = X.min(axis=0), X.max(axis=0)
    outside = np.sum(np.any((means < low - 0.1 * (high - low)) | (means > high + 0.1 * (high - low)), axis=1))
    assert outside > 0 and kbf.diagnostics["outside_training"] >= outside
    quiet = kb.KernelBayesFilter().fit(X, Z)
    quiet.batch_filter(Zt)
    assert quiet.diagnostics["outside_training"] == 0


def test_distances_far_from_the_origin_keep_their_digits():
    for kernel, expected in ((kb.GaussianKernel(1.0), np.exp(-0.5)), (kb.LaplaceKernel(1.0), np.exp(-1.0))):
        np.testing.assert_allclose(kernel([[1e8]], [[1e8 + 1]]), [[expected]], rtol=1e-9)
        np.testing.assert_allclose(kernel.gram_batched([[[1e8], [1e8 + 1]]])[0, 0, 1], expected, rtol=1e-9)
    G = kb.GaussianKernel(1e290)(np.array([[1e300], [1e300 + 1e290]]), np.array([[1e300]]))
    np.testing.assert_allclose(G[:, 0], [1.0, np.exp(-0.5)], rtol=1e-6)


def test_an_observation_no_particle_explains_keeps_the_prediction(rotation):
    system, _, (_, obs) = rotation
    pf = ParticleFilter(system, n_particles=100, rng=0).initialize(np.zeros(2), np.eye(2))
    pf.predict()
    with pytest.warns(kb.NumericalWarning, match="no particle gives the observation a finite likelihood"):
        pf.update([1e200, 1e200])
    assert np.all(np.isfinite(pf.x)) and np.array_equal(pf.x_post, pf.x_prior)
    pf.predict()
    pf.update(obs[0])
    assert np.all(np.isfinite(pf.x))
    # counted every time, where Python shows the warning once a line: a run says how often it happened
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf.batch_filter([obs[1], [1e200, 1e200], obs[2], [1e200, 1e200]])
    assert pf.diagnostics["kept_prediction"] == 3


def test_a_particle_filter_update_left_on_about_one_particle_is_counted_and_warned():
    """A likelihood far sharper than the predicted spread leaves the weight on one particle: the
    pixel-likelihood filter on the moving sprite did so at 99 of 100 steps, and nothing said so
    (its covariance is the spread of one particle)."""
    from kbfilter.filters.classical import DEGENERATE_ESS

    sharp = kb.systems.LinearGaussian(F=[[0.9]], H=[[1.0]], Q=[[1.0]], R=[[1e-6]])
    states, obs = sharp.simulate(20, rng=0)
    pf = ParticleFilter(sharp, n_particles=50, rng=0).initialize(np.zeros(1), np.eye(1))
    ess = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for z in obs:
            pf.predict()
            pf.update(z)
            ess.append(pf.ess)
    degenerate = sum(e < DEGENERATE_ESS for e in ess)
    assert degenerate >= 15 and pf.diagnostics["degenerate"] == degenerate
    assert sum("fewer than 2 effective particles" in str(w.message) for w in caught) == degenerate
    # a likelihood as wide as the prediction leaves the weights spread: nothing to count
    wide = kb.systems.LinearGaussian(F=[[0.9]], H=[[1.0]], Q=[[1.0]], R=[[1.0]])
    pf = ParticleFilter(wide, n_particles=500, rng=0).initialize(np.zeros(1), np.eye(1))
    pf.batch_filter(wide.simulate(20, rng=0)[1])
    assert pf.diagnostics["degenerate"] == 0


def test_an_observation_no_model_explains_keeps_the_model_probabilities_and_is_counted(rotation):
    system, _, (_, obs) = rotation
    imm = kb.filters.InteractingMultipleModel([system, system], switch=0.2).initialize(np.zeros(2), np.eye(2))
    imm.predict()
    imm.update(obs[0])
    assert imm.diagnostics == {"kept_model_probabilities": 0}
    imm.predict()
    mu = imm.mu.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's, squaring the residual
        with pytest.warns(kb.NumericalWarning, match="no model gives the observation a finite likelihood"):
            imm.update([1e200, 1e200])
    assert np.array_equal(imm.mu, mu) and imm.diagnostics == {"kept_model_probabilities": 1}


def test_a_feature_map_that_cannot_serve_the_observation_kernel_is_named(rotation):
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import FunctionTransformer

    system, (X, Z), (_, test_obs) = rotation
    # before: scikit-learn's own message, naming nothing of ours; the kernel's "kernel_z: X: ..."
    # errors about rows it never saw; an AxisError; and a NaN likelihood or a collapsed belief
    cases = [(PCA(5), r"features: PCA failed on the training observations \(n_components=5"),
             (FunctionTransformer(lambda z: z * np.nan), "features: the feature map gave NaN or infinite values"),
             (FunctionTransformer(lambda z: z[:1]), r"features: expected .* one row per observation, shape \(300, "
                                                    r"n_features\), got shape \(1, 2\)"),
             (FunctionTransformer(lambda z: z[:, 0]), r"features: expected .* got shape \(300,\)")]
    for features, message in cases:
        for make in (lambda: kb.KernelBayesFilter(features=features),
                     lambda: kb.KernelMonteCarloFilter(system, n_particles=20, features=features)):
            with pytest.raises(ValueError, match=message):
                make().fit(X, Z)
    logarithm = FunctionTransformer(lambda z: np.log(z + 10.0))
    for approximation in ("exact", "local"):
        kbf = kb.KernelBayesFilter(features=logarithm, approximation=approximation).fit(X, Z)
        kbf.predict()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's, from the log
            for call in (lambda: kbf.update([-20.0, 0.0]), lambda: kbf.log_likelihood_of([[-20.0, 0.0]])):
                with pytest.raises(ValueError, match="z: the feature map gave NaN or infinite values for this"):
                    call()
        kbf.update(test_obs[0])
        assert np.all(np.isfinite(kbf.x))
        # in a run, before the first step: by its index, with the belief where it was
        zs = [test_obs[0], None, [-20.0, 0.0], test_obs[1]]
        kmc = kb.KernelMonteCarloFilter(system, n_particles=20, features=logarithm, random_state=0).fit(X, Z)
        runs = [kbf.batch_filter, kbf.smooth, kmc.batch_filter]
        if approximation == "exact":
            runs.append(lambda zs: kb.kernel_smoother(kbf, np.full((len(zs), len(X)), 1.0 / len(X)), zs))
        for run in runs:
            owner = getattr(run, "__self__", kbf)
            before = owner.x.copy()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                with pytest.raises(ValueError, match=r"zs\[2\]: the feature map gave NaN or infinite values"):
                    run(zs)
            np.testing.assert_array_equal(owner.x, before)
        # past the first block the run is mapped in
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(ValueError, match=r"zs\[299\]: the feature map gave NaN"):
                kbf.batch_filter([test_obs[0]] * 299 + [[-20.0, 0.0]])
    # more of the log, mapped by the fitted map
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match="features: the feature map gave NaN or infinite values"):
            kbf.partial_fit(X, Z - 30.0)


def test_arguments_that_fell_through_to_dependencies_are_value_errors_naming_them(rotation):
    system, (X, Z), _ = rotation
    cases = [
        ("random_state: expected None", lambda: kb.KernelBayesFilter(approximation="rff", random_state="seed").fit(X, Z)),
        ("random_state: expected None", lambda: kb.KernelMonteCarloFilter(system, random_state="seed").fit(X, Z)),
        ("rng: expected None", lambda: ParticleFilter(system, rng="seed")),
        ("features: expected 'auto', None or a scikit-learn transformer",
         lambda: kb.KernelBayesFilter(features=3).fit(X, Z)),
        ("kernel_x: bandwidth: expected scale x bandwidth between",
         lambda: kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(1e-300)).fit(X, Z)),
        # the kNN transition's state kernel was refused as the conditional embedding's kernel_in
        ("kernel_x: transition='knn' needs a radial kernel .* got RandomFourierKernel",
         lambda: kb.KernelBayesFilter(transition="knn", kernel_x=kb.RandomFourierKernel(rank=20)).fit(X, Z)),
        ("kernel_x: approximation='local' needs a radial kernel .* got LinearKernel",
         lambda: kb.KernelBayesFilter(approximation="local", kernel_x=kb.LinearKernel()).fit(X, Z)),
        ("n_jobs: expected a positive number", lambda: kb.tune_filter(kb.KernelBayesFilter(), X, Z, n_jobs=0,
                                                                       validation_length=50, progress=False)),
        # the class for the instance fell through to a TypeError about default_grid's arguments
        (r"filter: expected a filter, got the class KernelBayesFilter; pass an instance, e.g. KernelBayesFilter\(\)",
         lambda: kb.tune_filter(kb.KernelBayesFilter, X, Z, progress=False)),
        ("filter: expected a filter estimator", lambda: kb.tune_filter(object(), X, Z, progress=False)),
        (r"lower validation_length \(1000\) or n_folds \(1\)",
         lambda: kb.tune_filter(kb.KernelBayesFilter(), X, Z, validation_length=1000, progress=False)),
        # the first block that did not fit was named as the number of blocks (n_folds (3) for 10 here)
        (r"expected at least n_folds x validation_length \+ 3 = 1003 steps, .* or n_folds \(10\)",
         lambda: kb.tune_filter(kb.KernelBayesFilter(), X, Z, validation_length=100, n_folds=10, progress=False)),
    ]
    for message, call in cases:
        with pytest.raises(ValueError, match=message):
            call()
