"""Learned motion that transfers, and the tracking models it is compared with."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import chisquare, multivariate_normal

import kbfilter as kb
from kbfilter.filters import LearnedMotion, LearnedMotionFilter
from kbfilter.systems import ConstantVelocity, LinearGaussianSensor, PositionFixes, RangeBearing, dropouts

CV = ConstantVelocity(step=1.0, accel=0.5, sensor=PositionFixes(3.0), speed=10.0)


@pytest.fixture(scope="module")
def cv_data():
    train = [CV.simulate(300, rng=s, burn_in=0)[0] for s in range(10)]
    test_states, test_obs = CV.simulate(200, rng=99, burn_in=0)
    return train, test_states, test_obs


def _mse(means, states, skip=20):
    return float(np.mean(np.sum((means[skip:, :2] - states[skip:, :2]) ** 2, axis=1)))


def test_the_linear_part_is_exact_on_linear_steps_and_carries_anywhere():
    A = np.array([[0.0, 1.0], [-0.1, 0.0]])  # steps are A x: no noise, so every offset is zero
    x = np.zeros((200, 2))
    x[0] = [1.0, 0.0]
    for t in range(199):
        x[t + 1] = x[t] + A @ x[t] * 0.1
    motion = LearnedMotion(n_neighbors=5).fit(x)
    np.testing.assert_allclose(motion.coef_[1:], 0.1 * A.T, atol=1e-12)
    np.testing.assert_allclose(motion.offsets_, 0.0, atol=1e-12)
    far = np.array([[1e4, -3e3]])
    np.testing.assert_allclose(motion.sample_transition(far, rng=0), far + 0.1 * far @ A.T, rtol=1e-12)
    np.testing.assert_allclose(motion.mean_step(far), 0.1 * far @ A.T, rtol=1e-12)


def test_the_learned_mean_step_of_constant_velocity_is_the_velocity(cv_data):
    train, _, _ = cv_data
    motion = LearnedMotion(inputs=(2, 3)).fit(train)
    v = np.array([[0, 0, 3.0, -2.0], [5e5, 5e5, -1.0, 4.0]])
    # position moves by the velocity, velocity by nothing on average; noise averages to within
    # a few of its standard errors (0.5 / sqrt(30) for the velocity, 0.25 / sqrt(30) for the position)
    np.testing.assert_allclose(motion.mean_step(v), np.column_stack([v[:, 2:], np.zeros((2, 2))]), atol=0.35)
    draws = motion.sample_transition(np.repeat(v[:1], 4000, axis=0), rng=1) - v[:1]
    np.testing.assert_allclose(draws.std(axis=0), [0.25, 0.25, 0.5, 0.5], rtol=0.2)


def test_on_a_linear_gaussian_system_the_learned_motion_approaches_the_kalman_filter(cv_data):
    train, test_states, test_obs = cv_data
    kalman = _mse(kb.filters.ExtendedKalman(CV).batch_filter(test_obs)[0], test_states)
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [x[:, :2] for x in train])
    learned = _mse(lmf.batch_filter(test_obs)[0], test_states)
    assert learned < 1.5 * kalman, (learned, kalman)
    # and the same seed gives the same numbers
    again = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [x[:, :2] for x in train])
    np.testing.assert_array_equal(lmf.reset().batch_filter(test_obs)[0], again.batch_filter(test_obs)[0])


def test_the_learned_sensor_is_the_least_squares_fit_and_its_first_belief_the_kalman_update(cv_data):
    train, _, _ = cv_data
    fixes = [CV.sensor.observe(x, rng=i) for i, x in enumerate(train)]
    sensor = LinearGaussianSensor.fitted(train, fixes)
    X, Z = np.vstack(train), np.vstack(fixes)
    design = np.hstack([np.ones((len(X), 1)), X])
    coef, rss = np.linalg.lstsq(design, Z, rcond=None)[:2]
    np.testing.assert_allclose(sensor.H, coef[1:].T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sensor.offset, coef[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.diag(sensor.R), rss / (len(X) - 5), rtol=1e-10)
    # the truth, within sampling error (3,000 fixes with 3 m errors: a variance to about 3 %, a
    # velocity's coefficient to about 0.02)
    np.testing.assert_allclose(sensor.H, np.hstack([np.eye(2), np.zeros((2, 2))]), atol=0.06)
    np.testing.assert_allclose(sensor.R, 9.0 * np.eye(2), atol=0.9)
    # its log-density is the Gaussian's, and its first belief the training states' Gaussian updated by z0
    z0 = X[0, :2] + [1.0, -2.0]
    np.testing.assert_allclose(sensor.observation_loglik(z0, X[:5]), multivariate_normal(
        mean=np.zeros(2), cov=sensor.R).logpdf(z0 - sensor.observe_mean(X[:5])), rtol=1e-12)
    prior = np.diag(X.var(axis=0, ddof=1))
    joint = np.block([[prior, prior @ sensor.H.T], [sensor.H @ prior, sensor.H @ prior @ sensor.H.T + sensor.R]])
    gain = joint[:4, 4:] @ np.linalg.inv(joint[4:, 4:])
    mean, cov = sensor.initial_belief(z0)
    np.testing.assert_allclose(mean, X.mean(axis=0) + gain @ (z0 - X.mean(axis=0) @ sensor.H.T - sensor.offset),
                               rtol=1e-8)
    np.testing.assert_allclose(cov, joint[:4, :4] - gain @ joint[4:, :4], rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="exact linear function"):
        LinearGaussianSensor.fitted(train, [x[:, :2] for x in train])
    # fixes in units where the noise is 1e-150: its precision would overflow, and the filter fail at its
    # first step with a NaN prior, or at fit on the gate's precision, an argument the user never gave
    tiny = [1e-150 * (x[:, :2] + np.random.default_rng(i).normal(size=(len(x), 2))) for i, x in enumerate(train)]
    with pytest.raises(ValueError, match=r"^observations: the residuals of the linear fit spread by only \S+e-15[01] "):
        LinearGaussianSensor.fitted(train, tiny)
    with pytest.raises(ValueError, match=r"^sensor.observation_cov: its inverse overflows"):
        kb.LearnedMotionFilter(kb.systems.LinearGaussianSensor(sensor.H, sensor.offset, 1e-310 * np.eye(2), mean, cov))\
            .fit(train, tiny)
    with pytest.raises(ValueError, match="R: expected a positive definite"):
        LinearGaussianSensor(sensor.H, sensor.offset, -sensor.R, mean, cov)


def test_a_sensor_that_cannot_be_learned_is_refused_before_the_fit(cv_data):
    """Images, and observations of more dimensions than the residuals of the log can span, are
    named before any regression: both had ended, seconds later, in a noise "with no spread"."""
    train, _, _ = cv_data
    short = train[0][:30]
    wide = np.random.default_rng(0).normal(size=(30, 26))   # 26 + 4 + 1 unknowns > 30 pairs
    with pytest.raises(ValueError, match=r"^observations: learning the noise covariance of 26-dimensional "
                                         r"observations needs at least 31 training pairs .* got 30"):
        LinearGaussianSensor.fitted(short, wide)
    LinearGaussianSensor.fitted(short, wide[:, :25])        # the residuals span 25 directions: enough
    images = np.random.default_rng(1).normal(size=(30, 4, 4))
    with pytest.raises(ValueError, match=r"^observations: a linear sensor is learned from vectors, got observations "
                                         r"of shape \(4, 4\); give the filter a sensor model"):
        LearnedMotionFilter(random_state=0).fit(short, images)


class _Faulty:
    """A user's sensor whose log likelihood is PositionFixes' own, spoiled by ``spoil``."""

    def __init__(self, spoil):
        self.spoil, self.fixes = spoil, PositionFixes(3.0)

    def observation_loglik(self, z, X):
        return self.spoil(self.fixes.observation_loglik(z, X))

    def observe_mean(self, X):
        return self.fixes.observe_mean(X)


@pytest.mark.parametrize("spoil, message", [
    (lambda v: float(v[0]), r"expected an array of shape \(\d+,\) .* got shape \(\)"),
    (lambda v: v[:-1], r"expected an array of shape \((\d+),\) .* got shape \(\d+,\)"),
    (lambda v: v + 0j, r"expected real log likelihoods, got an array of dtype complex128"),
    (lambda v: np.where(np.arange(v.size) == 3, np.nan, v), r"expected finite log likelihoods .* got nan at 1 of"),
    (lambda v: np.where(np.arange(v.size) == 3, np.inf, v), r"expected finite log likelihoods .* got inf at 1 of"),
])
def test_a_sensor_whose_log_likelihood_is_no_log_density_is_named(cv_data, spoil, message):
    """A complex log likelihood reached the estimates; one NaN left every update without a
    likelihood and the filter on its predictions, a number failed inside numpy."""
    train, _, test_obs = cv_data
    learned = LearnedMotionFilter(sensor=_Faulty(spoil), n_particles=50, random_state=0).fit(train[:2], [x[:, :2] for x in train[:2]])
    with pytest.raises(ValueError, match=r"_Faulty\.observation_loglik: " + message):
        learned.batch_filter(test_obs[:5])
    system = type("Faulty", (kb.systems.System,), {"dim_x": 4, "dim_z": 2, "observation_loglik":
                                                   lambda self, z, X: spoil(PositionFixes(3.0).observation_loglik(z, X)),
                                                   "initial_belief": lambda self, z0: (np.r_[z0, 0, 0], np.eye(4))})()
    pf = kb.filters.ParticleFilter(system, n_particles=50, rng=0)
    pf.initialize(np.zeros(4), np.eye(4))
    with pytest.raises(ValueError, match=r"Faulty\.observation_loglik: " + message):
        pf.update(test_obs[0])
    # -inf everywhere is a legitimate answer: no particle explains the observation
    impossible = LearnedMotionFilter(sensor=_Faulty(lambda v: np.full(v.shape, -np.inf)), n_particles=50,
                                     random_state=0).fit(train[:2], [x[:, :2] for x in train[:2]])
    with pytest.warns(kb.NumericalWarning, match="no particle gives the observation a finite likelihood"):
        impossible.batch_filter(test_obs[:3])


def test_given_no_sensor_the_filter_learns_one_that_carries_over_with_the_motion(cv_data, tmp_path):
    """With the sensor learned too, the filter still approaches the Kalman filter that knows the
    model, and follows a track 36 km from every training track."""
    train, test_states, test_obs = cv_data
    fixes = [CV.sensor.observe(x, rng=i) for i, x in enumerate(train)]
    kalman = _mse(kb.filters.ExtendedKalman(CV).batch_filter(test_obs)[0], test_states)
    lmf = LearnedMotionFilter(inputs=(2, 3), random_state=0).fit(train, fixes)
    assert isinstance(lmf.sensor_, LinearGaussianSensor) and lmf.sensor is None
    assert _mse(lmf.batch_filter(test_obs)[0], test_states) < 1.5 * kalman
    far = test_states + [2e4, -3e4, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)  # (a restart, should the first fixes need one)
        assert _mse(lmf.batch_filter(CV.sensor.observe(far, rng=5))[0], far) < 50.0
    lmf.batch_filter(test_obs[:50])
    back = kb.LearnedMotionFilter.load(lmf.save(tmp_path / "learned_sensor.npz"))
    np.testing.assert_array_equal(back.batch_filter(test_obs[50:])[0], lmf.batch_filter(test_obs[50:])[0])


#: fixes sharper than the motion is certain (its position steps spread by about 0.25)
SHARP = ConstantVelocity(step=1.0, accel=0.5, sensor=PositionFixes(0.2), speed=10.0)


def _one_state_predicted(cv_data, n, proposal):
    """A guided or bootstrap filter whose particles all sit on one state, after one prediction."""
    train, test_states, _ = cv_data
    lmf = LearnedMotionFilter(SHARP, inputs=(2, 3), n_particles=n, proposal=proposal, reacquire=None,
                              random_state=0).fit(train, [x[:, :2] for x in train])
    lmf.reset(prior=np.repeat(test_states[:1], n, axis=0))
    lmf.predict()
    return lmf, lmf.motion_.candidates(test_states[:1])[0]


def test_the_guided_update_draws_each_candidate_in_proportion_to_its_likelihood(cv_data):
    """From one state the learned law is a uniform mixture of its neighbours' candidates: the
    guided update moves the particles onto them in proportion to the likelihood of ``z``, and the
    observation's log-likelihood is the log of their mean likelihood, exactly."""
    n = 20000
    lmf, candidates = _one_state_predicted(cv_data, n, "guided")
    z = candidates[:, :2].mean(axis=0) + [0.2, -0.1]
    lik = np.exp(SHARP.observation_loglik(z, candidates))
    lmf.update(z)
    assert np.isclose(lmf.log_likelihood, np.log(lik.mean()), rtol=0, atol=1e-12)
    # every particle is a candidate, drawn as often as its likelihood says (chi-square test)
    # (to round-off: a product over many rows may round otherwise than over one)
    hits = np.all(np.isclose(lmf.belief.particles[:, None, :], candidates[None], rtol=0, atol=1e-9), axis=2)
    assert np.all(hits.sum(axis=1) == 1)
    expected = n * lik / lik.sum()
    observed = hits.argmax(axis=1)
    counts = np.bincount(observed, minlength=len(candidates))
    keep = expected > 5  # the test's validity: enough expected draws in each cell
    p_value = chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum()).pvalue
    assert p_value > 1e-3, (counts, expected)
    # a uniform choice among the candidates would fail it
    assert lik.max() / lik.min() > 10


def test_the_bootstrap_likelihood_estimates_the_guided_one_without_bias(cv_data):
    """Both proposals filter the same model: over seeds, the likelihood the bootstrap filter
    estimates from its random draws averages to the one the guided filter computes."""
    _, test_states, _ = cv_data
    guided, candidates = _one_state_predicted(cv_data, 50, "guided")
    z = candidates[:, :2].mean(axis=0) + [0.2, -0.1]
    guided.update(z)
    boot, _ = _one_state_predicted(cv_data, 50, "bootstrap")
    estimates = []
    for seed in range(400):
        boot.set_params(random_state=seed).reset(prior=np.repeat(test_states[:1], 50, axis=0))
        boot.predict()
        boot.update(z)
        estimates.append(np.exp(boot.log_likelihood))
    estimates = np.array(estimates)
    standard_error = estimates.std() / np.sqrt(len(estimates))
    assert abs(estimates.mean() - np.exp(guided.log_likelihood)) < 4 * standard_error
    assert estimates.std() > 0  # the bootstrap's estimate is random, the guided one is not


def test_a_learned_motion_filter_saved_between_prediction_and_update_continues_the_run(cv_data, tmp_path):
    train, test_states, test_obs = cv_data
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [x[:, :2] for x in train])
    lmf.batch_filter(test_obs[:20])
    lmf.predict()
    back = kb.LearnedMotionFilter.load(lmf.save(tmp_path / "between.npz"))
    for f in (lmf, back):
        f.update(test_obs[20])
    np.testing.assert_array_equal(back.x, lmf.x)
    np.testing.assert_array_equal(back.batch_filter(test_obs[21:40])[0], lmf.batch_filter(test_obs[21:40])[0])


def test_one_fix_far_from_the_track_is_an_outlier_until_reacquire_after_in_a_row_say_otherwise(cv_data, tmp_path):
    train, test_states, test_obs = cv_data
    obs = [x[:, :2] for x in train]

    def run(reacquire_after, zs):
        filt = LearnedMotionFilter(CV, n_particles=200, random_state=0, reacquire_after=reacquire_after).fit(train, obs)
        return filt, filt.batch_filter(zs)[0][:, :2]

    truth = test_states[:80, :2]
    glitch = list(test_obs[:80])
    glitch[40] = glitch[40] + 500.0
    # restarting at the first: the bad fix throws the track hundreds of metres off
    filt, means = run(1, glitch)
    assert filt.diagnostics["reacquired"] >= 1 and np.linalg.norm(means[40] - truth[40]) > 100.0
    # two in a row needed: it is left out, the prediction kept, and counted
    filt, means = run(2, glitch)
    assert filt.diagnostics["outlier"] == 1 and filt.diagnostics["reacquired"] == 0
    assert np.max(np.linalg.norm(means[38:] - truth[38:], axis=1)) < 15.0
    # a target that has really jumped (the fixes stay 500 m off, a missed one between them) is
    # followed there after the second
    jumped = [None if t == 41 else z + 500.0 if t >= 40 else z for t, z in enumerate(test_obs[:80])]
    filt, means = run(2, jumped)
    assert filt.diagnostics["outlier"] >= 1 and filt.diagnostics["reacquired"] >= 1
    assert np.mean(np.linalg.norm(means[60:] - (truth[60:] + 500.0), axis=1)) < 15.0
    # the row of outliers so far is part of a saved run
    filt = LearnedMotionFilter(CV, n_particles=200, random_state=0, reacquire_after=3).fit(train, obs)
    filt.batch_filter(jumped[:41])
    back = kb.LearnedMotionFilter.load(filt.save(tmp_path / "row.npz"))
    np.testing.assert_array_equal(back.batch_filter(jumped[41:])[0], filt.batch_filter(jumped[41:])[0])
    with pytest.raises(ValueError, match="reacquire_after: expected an integer >= 1, got 0"):
        LearnedMotionFilter(CV, reacquire_after=0).fit(train, obs)


def test_a_track_where_the_log_never_went_is_followed_by_learned_motion_and_lost_by_the_kernel_bayes_filter(cv_data):
    train, test_states, _ = cv_data
    far = test_states + [2e4, -3e4, 0.0, 0.0]
    obs = CV.sensor.observe(far, rng=5)
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [x[:, :2] for x in train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kbf = kb.KernelBayesFilter().fit(train, [x[:, :2] for x in train])
        kbf_mse = _mse(kbf.batch_filter(obs)[0], far)
    assert _mse(lmf.batch_filter(obs)[0], far) < 50.0 < 1e6 < kbf_mse


def test_missing_fixes_are_bridged_by_the_motion(cv_data):
    train, test_states, test_obs = cv_data
    zs, missing = dropouts(test_obs, rng=3, rate=0.05, length=(5, 10))
    assert missing.any() and not missing[0]
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [x[:, :2] for x in train])
    means = lmf.batch_filter(zs)[0]
    kalman = kb.filters.ExtendedKalman(CV).batch_filter(zs)[0]
    inside = lambda m: float(np.mean(np.sum((m[missing, :2] - test_states[missing, :2]) ** 2, axis=1)))
    assert inside(means) < 3 * inside(kalman)


def test_tune_filter_tunes_the_learned_motion_filter_on_its_own_grid(cv_data):
    train, _, _ = cv_data
    template = LearnedMotionFilter(CV, inputs=(2, 3), n_particles=200, random_state=0)
    tuned = kb.tune_filter(template, train, [x[:, :2] for x in train], validation_length=100, progress=False,
                           max_extensions=0)
    assert set(tuned.best_params_) == {"n_neighbors"}
    assert len(tuned.search_table_) >= 3 and all(np.isfinite(r["mse"]) for r in tuned.search_table_)


def test_a_grid_of_lists_or_arrays_is_searched_as_one_of_tuples(cv_data):
    # the inputs are column lists: tune_filter stopped at "unhashable type: 'list'", and arrays at numpy's
    # "operands could not be broadcast together"
    train, _, _ = cv_data
    template = LearnedMotionFilter(CV, n_particles=100, random_state=0)
    obs = [x[:, :2] for x in train[:3]]
    tables = {}
    for kind, search in [(tuple, "coordinate"), (list, "coordinate"), (np.array, "grid")]:
        tuned = kb.tune_filter(template, train[:3], obs, param_grid={"inputs": [kind([2, 3]), kind([0, 1, 2, 3])],
                                                                     "n_neighbors": [10, 30]},
                               validation_length=60, progress=False, search=search)
        assert isinstance(tuned.best_params_["inputs"], type(kind([2, 3])))
        tables[kind] = sorted((tuple(int(c) for c in r["inputs"]), r["n_neighbors"], r["mse"])
                              for r in tuned.search_table_)
    assert tables[list] == tables[tuple]
    assert set(tables[np.array]) >= set(tables[tuple]) and len(tables[np.array]) == 4


def _neighbour_offsets(motion, X):
    """The recorded offsets of each row's neighbours, found by brute force on the standardised
    inputs."""
    inputs = motion.scaler_.transform(X[:, list(motion.inputs)])
    train = motion.scaler_.transform(motion.inputs_)
    nearest = np.argsort(((inputs[:, None, :] - train[None]) ** 2).sum(axis=2), axis=1, kind="stable")
    return motion.offsets_[nearest[:, :motion.n_neighbors]]


def test_the_neighbours_mean_offset_is_kept_shrunk_or_dropped_as_local_mean_says(cv_data):
    train, _, _ = cv_data
    X = np.array([[0, 0, 3.0, -2.0], [10.0, -4.0, 0.5, 0.5], [5e5, 5e5, -1.0, 4.0]])
    fitted = {m: LearnedMotion(inputs=(2, 3), n_neighbors=20, local_mean=m).fit(train)
              for m in ("recorded", "shrunk", "none")}
    offsets = _neighbour_offsets(fitted["recorded"], X)
    linear = fitted["recorded"].coef_[0] + X[:, 2:] @ fitted["recorded"].coef_[1:]
    m, var = offsets.mean(axis=1), offsets.var(axis=1)
    kept = np.maximum(0.0, 1 - var / (20 * m**2))  # James-Stein, a coordinate at a time
    for name, mean in (("recorded", m), ("shrunk", kept * m), ("none", 0 * m)):
        np.testing.assert_allclose(fitted[name].mean_step(X), linear + mean, rtol=1e-10, atol=1e-12)
        candidates = fitted[name].candidates(X)
        # the same neighbours and the recorded spread about the mean, whatever is done with the mean
        np.testing.assert_allclose(candidates - candidates.mean(axis=1, keepdims=True),
                                   offsets - m[:, None], atol=1e-9)
    # on constant velocity there is no drift to learn: what the neighbours' mean says is noise,
    # which shrinking mostly drops
    assert np.all(np.abs(kept * m) <= np.abs(m)) and np.sum(np.abs(kept * m)) < 0.5 * np.sum(np.abs(m))


def test_a_drift_that_stands_out_of_the_noise_is_kept_by_the_shrunk_mean():
    # steps that depend on the state non-linearly (the linear part cannot say it), with little noise
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, 2000)
    pairs = [np.array([[a], [a + 0.5 * np.sin(2 * a) + 0.01 * e]]) for a, e in zip(x, rng.standard_normal(2000))]
    fitted = {m: LearnedMotion(n_neighbors=10, local_mean=m).fit(pairs) for m in ("recorded", "shrunk", "none")}
    X = np.array([[-2.0], [-0.7], [0.8], [2.2]])
    truth = 0.5 * np.sin(2 * X)
    np.testing.assert_allclose(fitted["shrunk"].mean_step(X), fitted["recorded"].mean_step(X), rtol=1e-2)
    np.testing.assert_allclose(fitted["shrunk"].mean_step(X), truth, atol=0.02)
    assert np.max(np.abs(fitted["none"].mean_step(X) - truth)) > 0.2


def test_learned_motion_refuses_what_it_cannot_use(cv_data):
    train, _, test_obs = cv_data
    obs = [x[:, :2] for x in train]
    with pytest.raises(ValueError, match="sensor: expected a sensor model"):
        LearnedMotionFilter(object()).fit(train, obs)
    with pytest.raises(ValueError, match="inputs: expected distinct column indices below 4"):
        LearnedMotionFilter(CV, inputs=(2, 7)).fit(train, obs)
    with pytest.raises(ValueError, match="controls"):
        LearnedMotionFilter(CV).fit(train, obs, controls=[np.zeros((300, 1))] * 10)
    with pytest.raises(ValueError, match="n_neighbors: expected at most .*; pass a smaller n_neighbors or a "
                                         "longer log"):
        LearnedMotion(n_neighbors=10_000).fit(train)
    # the filter says so too, before its memory check (which had refused 10**8 neighbours as 37 GB)
    steps = sum(len(x) - 1 for x in train)
    with pytest.raises(ValueError, match=rf"^n_neighbors: expected at most the {steps} training steps, got 100000000"):
        LearnedMotionFilter(CV, n_neighbors=10**8).fit(train, obs)
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), n_particles=50, random_state=0).fit(train, obs)
    with pytest.raises(ValueError, match=r"z: expected length 2, got shape \(3,\)"):
        lmf.update([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="u: LearnedMotion learns no control"):
        lmf.predict(u=[1.0])
    for bad in (0.0, 1.5, "x"):
        with pytest.raises(ValueError, match="degenerate_ess"):
            LearnedMotionFilter(CV, degenerate_ess=bad).fit(train, obs)
    with pytest.raises(ValueError, match="local_mean: expected one of"):
        LearnedMotionFilter(CV, local_mean="mean").fit(train, obs)


@pytest.mark.parametrize("sensor", [CV, PositionFixes(3.0), RangeBearing()])
def test_learned_motion_refuses_states_or_observations_its_sensor_cannot_read(cv_data, sensor):
    # they fitted, then failed at the first update with numpy's broadcasting message, or ran
    # with a one-column state read as a position
    train, _, _ = cv_data
    obs = [x[:, :2] for x in train]
    with pytest.raises(ValueError, match=r"observations: expected observations of the sensor's shape \(2,\), "
                                         r"got \(3,\)"):
        LearnedMotionFilter(sensor).fit(train, [x[:, :3] for x in train])
    with pytest.raises(ValueError, match="^states: .*sensor.* 1"):
        LearnedMotionFilter(sensor).fit([x[:, :1] for x in train], obs)
    with pytest.raises(ValueError, match="X: expected states with east and north"):
        sensor.observe_mean(np.zeros((5, 1)))  # what a filter calls on its particles at every step


class _FlatJacobian(PositionFixes):
    def observation_jacobian(self, x):
        return np.ones(3)


class _ComplexJacobian(PositionFixes):
    def observation_jacobian(self, x):
        return np.eye(2, 4) + 1j


class _ShortBelief(PositionFixes):
    def initial_belief(self, z0):
        return np.zeros(3), np.eye(3)


class _UnknownTwoPointBelief(PositionFixes):
    observation_jacobian = None  # not linearisable: a restart is from the last two fixes

    def initial_belief(self, z0):
        return np.r_[z0, 0.0, 0.0], np.diag([9.0, 9.0, 100.0, 100.0])

    def two_point_belief(self, z_a, z_b, steps):
        return np.full(4, np.nan), np.eye(4)


@pytest.mark.parametrize("sensor, message", [
    # numpy's matmul error about core dimensions, unnamed
    (_FlatJacobian(3.0), r"_FlatJacobian\.observation_jacobian: expected a finite array of shape \(2, 4\), got "
                         r"shape \(1, 3\)"),
    # the complex Jacobian reached the prior's check, named "prior[0]"
    (_ComplexJacobian(3.0), r"_ComplexJacobian\.observation_jacobian: expected real values"),
    (_ShortBelief(3.0), r"_ShortBelief\.initial_belief: the mean: expected length 4, got 3"),
    (_UnknownTwoPointBelief(3.0), r"_UnknownTwoPointBelief\.two_point_belief: the mean: contains NaN"),
])
def test_a_sensors_own_methods_are_named_when_what_they_return_cannot_be_used(cv_data, sensor, message):
    """The learned-motion filter reads a sensor's Jacobian (a degenerate or lost track's update)
    and its beliefs (the first step, a restart) where a track needs them; what they return is
    checked there, with the sensor's method named."""
    train, _, test_obs = cv_data
    zs = list(test_obs[:80])
    zs[40] = zs[40] + 500.0  # outside every particle's gate: the track restarts from the sensor
    filt = LearnedMotionFilter(sensor, n_particles=200, degenerate_ess=0.5, random_state=0)
    filt.fit(train, [x[:, :2] for x in train])
    with pytest.raises(ValueError, match=message):
        filt.batch_filter(zs)
    # the sensor it derives from runs the same track
    plain = LearnedMotionFilter(PositionFixes(3.0), n_particles=200, degenerate_ess=0.5, random_state=0)
    assert np.all(np.isfinite(plain.fit(train, [x[:, :2] for x in train]).batch_filter(zs)[0]))


def test_particle_filters_refuse_training_states_of_another_dimension_than_their_motions():
    system = kb.systems.Oscillation()
    states, obs = system.simulate(100, rng=0)
    for filt in (kb.KernelMonteCarloFilter(system), kb.filters.NearestNeighbourParticleFilter(system)):
        with pytest.raises(ValueError, match=r"states: expected 2 columns, the states of the motion \(Oscillation"):
            filt.fit(states[:, :1], obs)
    # a callable motion declares no dimension: its states are its own
    motion = lambda X, u, rng: X + 0.01 * rng.standard_normal(X.shape)  # noqa: E731
    kb.KernelMonteCarloFilter(motion, n_particles=50, random_state=0).fit(states[:, :1], obs).batch_filter(obs[:5])


def _spread_then_fixed(cv_data, n, **params):
    """A filter whose particles spread over 50 m before a 3 m fix: a few carry the weight."""
    train, test_states, _ = cv_data
    lmf = LearnedMotionFilter(**{"sensor": CV, **params}, inputs=(2, 3), n_particles=n, random_state=0)
    lmf.fit(train, [x[:, :2] for x in train]).reset(prior=(test_states[0], np.diag([50.0**2, 50.0**2, 1.0, 1.0])))
    before, weights = lmf.particles.copy(), lmf.particle_weights.copy()
    lmf.predict()
    z = test_states[1, :2] + [5.0, -5.0]
    lmf.update(z)
    return lmf, before, weights, z


def test_an_update_the_particles_cannot_represent_is_the_kalman_update_of_the_prediction(cv_data):
    """When a fix leaves fewer than ``degenerate_ess`` of the particles effective, the posterior
    is the Kalman update (fixes are linear) of the prediction's mean and covariance over every
    candidate, and the particles are drawn from it."""
    n = 20000
    lmf, before, weights, z = _spread_then_fixed(cv_data, n)
    assert lmf.diagnostics["degenerate"] == 1
    # the prediction by hand: every candidate of every particle, sharing its particle's weight
    C = lmf.motion_.candidates(before)
    k = C.shape[1]
    C, w = C.reshape(-1, 4), np.repeat(weights / k, k)
    m = w @ C
    S0 = ((C - m) * w[:, None]).T @ (C - m)
    H = np.hstack([np.eye(2), np.zeros((2, 2))])
    K = S0 @ H.T @ np.linalg.inv(H @ S0 @ H.T + 9.0 * np.eye(2))
    mean, cov = m + K @ (z - H @ m), (np.eye(4) - K @ H) @ S0
    # the particles are n draws from it: their mean within four standard errors, their covariance
    # within 5 % (the standard error of a variance from 20,000 draws is 1 %)
    np.testing.assert_array_less(np.abs(lmf.x - mean), 4 * np.sqrt(np.diag(cov) / n))
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(lmf.P - cov) / np.outer(sd, sd), 0.05)
    assert np.all(np.diag(cov)[:2] < 9.0)  # sharper than the fix: the prediction says something too
    # the bootstrap proposal takes the same rule; without it, or with a sensor that cannot be
    # linearised, the few particles are kept
    for params, taken in (({"proposal": "bootstrap"}, 1), ({"degenerate_ess": None}, 0),
                          ({"sensor": _Without(CV, "observation_jacobian")}, 0)):
        other = _spread_then_fixed(cv_data, 1000, **params)[0]
        assert other.diagnostics["degenerate"] == taken, params


def test_a_component_two_fixes_see_without_noise_is_conditioned_through_the_pseudo_inverse():
    """Two fixes of one component with noise far below the belief's spread make the covariance of
    the predicted observation singular to working precision: the linearised update (a restart, the
    rule for degenerate updates) and ``mahalanobis`` go through its pseudo-inverse, as the Kalman
    filters do, and the filter counts it (it had raised numpy's LinAlgError)."""
    rng = np.random.default_rng(0)
    X = np.cumsum(0.1 * rng.normal(size=(300, 2)), axis=0)
    H = np.array([[1.0, 0.0], [1.0, 0.0]])
    sensor = LinearGaussianSensor(H=H, offset=np.zeros(2), R=1e-30 * np.eye(2), prior_mean=np.zeros(2),
                                  prior_cov=np.eye(2))
    lmf = LearnedMotionFilter(sensor, n_particles=100, random_state=0).fit(X, X @ H.T)
    with pytest.warns(kb.NumericalWarning, match="singular to working precision; conditioned through its pseudo"):
        means = lmf.reset().batch_filter(X[:40] @ H.T)[0]
    assert lmf.diagnostics["pseudo_inverse"] > 0
    # the seen component is followed to the fixes' precision; the unseen one stays finite
    np.testing.assert_allclose(means[:, 0], X[:40, 0], atol=1e-6)
    assert np.all(np.isfinite(means)) and np.isfinite(lmf.mahalanobis)


# -- the hand-written model --------------------------------------------------------------------------
def test_the_constant_velocity_kalman_filter_is_the_least_squares_line_through_the_fixes():
    # no process noise and a flat first belief: the filter's estimate at t is the straight line fitted
    # by least squares to the fixes up to t, evaluated at t (a closed form)
    model = ConstantVelocity(step=2.0, accel=1e-9, sensor=PositionFixes(4.0), speed=1e7)
    t = 2.0 * np.arange(30)
    truth = np.column_stack([100 + 7 * t, -50 - 3 * t, np.full(30, 7.0), np.full(30, -3.0)])
    fixes = model.sensor.observe(truth, rng=0)
    means = kb.filters.ExtendedKalman(model).batch_filter(fixes)[0]
    for k in (5, 12, 29):
        design = np.column_stack([np.ones(k + 1), t[:k + 1]])
        coef = np.linalg.lstsq(design, fixes[:k + 1], rcond=None)[0]
        np.testing.assert_allclose(means[k, :2], coef[0] + coef[1] * t[k], atol=1e-3)
        np.testing.assert_allclose(means[k, 2:], coef[1], atol=1e-3)


def test_the_acceleration_is_chosen_on_training_tracks_by_the_stated_rule():
    rng = np.random.default_rng(0)
    v = np.cumsum(0.3 * rng.standard_normal((500, 2)), axis=0)
    track = np.hstack([np.cumsum(v, axis=0) * 5.0, v])
    model = ConstantVelocity.fitted([track], step=5.0)
    assert model.accel == pytest.approx(np.sqrt(np.mean(np.diff(v, axis=0) ** 2)) / 5.0)
    np.testing.assert_allclose(model.transition_mean([[0, 0, 1.0, 2.0]]), [[5.0, 10.0, 1.0, 2.0]])


def test_dropouts_keep_the_first_fix_and_last_as_long_as_asked():
    zs, missing = dropouts(np.zeros((2000, 2)), rng=7, rate=0.05, length=(3, 6))
    assert zs[0] is not None and all((z is None) == m for z, m in zip(zs, missing))
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, missing.astype(int), 0])))[::2]
    assert runs[:-1].min() >= 3 and runs[:-1].max() <= 6  # the last may be cut by the end
    again = dropouts(np.zeros((2000, 2)), rng=7, rate=0.05, length=(3, 6))[1]
    np.testing.assert_array_equal(missing, again)
    with pytest.raises(ValueError, match="length"):
        dropouts(np.zeros((10, 2)), length=(5, 2))
    for bad in (2.0, -0.1):
        with pytest.raises(ValueError, match=r"rate: expected a (probability in \[0, 1\]|non-negative finite number)"):
            dropouts(np.zeros((10, 2)), rate=bad)
    # rate 0 leaves every fix in, as the tracks benchmark's --gap-rate 0 asks (it was refused from inside the run)
    assert not dropouts(np.zeros((50, 2)), rng=0, rate=0.0)[1].any()
    with pytest.raises(ValueError, match=r"length: expected \(shortest, longest\), got 5"):
        dropouts(np.zeros((10, 2)), length=5)


def test_a_lost_track_is_reacquired_from_the_sensor_and_counted(cv_data):
    train, test_states, test_obs = cv_data
    jumped = test_states.copy()
    jumped[100:, :2] += [5e3, 0.0]                     # the target reappears 5 km away
    obs = CV.sensor.observe(jumped, rng=2)
    fixes = [x[:, :2] for x in train]
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, fixes)
    with pytest.warns(kb.NumericalWarning, match="outside the gate of every particle"):
        means = lmf.batch_filter(obs)[0]
    assert lmf.diagnostics["reacquired"] >= 1
    assert _mse(means[110:], jumped[110:], skip=0) < 100.0
    stuck = LearnedMotionFilter(CV, inputs=(2, 3), reacquire=None, degenerate_ess=None, random_state=0)
    stuck.fit(train, fixes)
    assert _mse(stuck.batch_filter(obs)[0][110:], jumped[110:], skip=0) > 1e4
    assert stuck.diagnostics["reacquired"] == 0
    for q in (1.0, 2.0):
        with pytest.raises(ValueError, match=r"^reacquire: expected a probability in \(0, 1\) or None, got"):
            LearnedMotionFilter(CV, reacquire=q).fit(train, fixes)


class _Without:
    """A tracking model without some of its methods (e.g. the two-point belief: a lost track
    restarts at rest)."""

    def __init__(self, model, *hidden):
        self.model, self.hidden = model, hidden

    def __getattr__(self, name):
        if name in self.hidden:
            raise AttributeError(name)
        return getattr(self.model, name)


def test_a_vehicle_faster_than_the_log_is_reacquired_with_the_speed_its_recent_fixes_say():
    slow = ConstantVelocity(step=10.0, accel=0.05, sensor=PositionFixes(10.0), speed=2.0)
    train = [slow.simulate(200, rng=s, burn_in=0)[0] for s in range(5)]
    fast = np.column_stack([np.zeros(30), 180.0 * np.arange(30), np.zeros(30), np.full(30, 18.0)])  # 18 m/s north
    zs = list(slow.sensor.observe(fast, rng=1))
    zs[20:25] = [None] * 5                                                  # then five fixes missing
    fixes = [x[:, :2] for x in train]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        lmf = LearnedMotionFilter(slow, inputs=(2, 3), random_state=0).fit(train, fixes)
        means = lmf.batch_filter(zs)[0]
        at_rest = LearnedMotionFilter(_Without(slow, "two_point_belief", "observation_jacobian"), inputs=(2, 3),
                                      random_state=0).fit(train, fixes)
        means_at_rest = at_rest.batch_filter(zs)[0]
        # a sensor with a Jacobian, learned or given, restarts through the motion's linear part
        # whether it has a two-point belief or not; one without, from its two-point belief
        fixes = [slow.sensor.observe(x, rng=s) for s, x in enumerate(train)]
        restarted = [LearnedMotionFilter(sensor, inputs=(2, 3), random_state=0).fit(train, fixes)
                     for sensor in (None, _Without(slow, "two_point_belief"), _Without(slow, "observation_jacobian"))]
        means_restarted = [f.batch_filter(zs)[0] for f in restarted]
    # restarted from the recent fixes, the particles carry the vehicle's speed, keep it, and
    # bridge the missing fixes
    assert lmf.diagnostics["reacquired"] <= 2
    np.testing.assert_allclose(means[-1, 3], 18.0, atol=2.0)
    assert np.sqrt(_mse(means[20:25], fast[20:25], skip=0)) < 60.0
    for f, m in zip(restarted, means_restarted):
        assert f.diagnostics["reacquired"] <= 2
        np.testing.assert_allclose(m[-1, 3], 18.0, atol=2.0)
        assert np.sqrt(_mse(m[20:25], fast[20:25], skip=0)) < 60.0
    # restarted at rest, they are lost at every fix and stand still through the gap
    assert at_rest.diagnostics["reacquired"] >= 20
    assert abs(means_at_rest[-1, 3]) < 5.0
    assert np.sqrt(_mse(means_at_rest[20:25], fast[20:25], skip=0)) > 300.0


def _kalman_of_fixes(lmf, fixes, ages, prior=None):
    """The Kalman filter of position fixes (oldest first, ``ages`` steps before the last) through
    the learned motion's linear part, by hand: from the sensor's first belief at the oldest, or
    from ``prior`` before it."""
    F, c, Q = lmf.motion_.linear_part()
    H, R = np.hstack([np.eye(2), np.zeros((2, 2))]), lmf.sensor_.observation_cov
    if prior is None:
        (mean, cov), steps = lmf.sensor_.initial_belief(fixes[0]), -np.diff(ages)
        fixes = fixes[1:]
    else:
        (mean, cov), steps = prior, -np.diff(ages, prepend=ages[0])
    for z, n in zip(fixes, steps):
        for _ in range(n):
            mean, cov = F @ mean + c, F @ cov @ F.T + Q
        K = cov @ H.T @ np.linalg.inv(H @ cov @ H.T + R)
        mean, cov = mean + K @ (z - H @ mean), (np.eye(4) - K @ H) @ cov
    return mean, cov


@pytest.mark.parametrize("window", [1, 3])
def test_a_lost_track_restarts_from_the_kalman_filter_of_the_fixes_of_the_last_window_steps(window):
    """Every reacquisition draws the particles from the Kalman filter of the fixes of the last
    ``reacquire_window`` steps and this one (the last fix however old, when none is that recent)."""
    slow = ConstantVelocity(step=10.0, accel=0.05, sensor=PositionFixes(3.0), speed=2.0)
    train = [slow.simulate(200, rng=s, burn_in=0)[0] for s in range(5)]
    v = np.r_[np.zeros(10), np.full(20, 18.0)]                       # at rest, then 18 m/s north
    truth = np.column_stack([np.zeros(30), np.r_[0.0, np.cumsum(10.0 * v[:-1])], np.zeros(30), v])
    zs = list(slow.sensor.observe(truth, rng=1))
    zs[20:25] = [None] * 5
    n = 20000
    lmf = LearnedMotionFilter(slow, inputs=(2, 3), n_particles=n, reacquire_window=window, random_state=0)
    lmf.fit(train, [x[:, :2] for x in train])
    checked, seen = 0, [0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        lmf.batch_filter(zs[:1])                   # starts from the sensor's belief at the first fix
        for t, z in enumerate(zs[1:], 1):
            lmf.predict()
            before = lmf.diagnostics.get("reacquired", 0)
            lmf.update(z)
            if z is None:
                continue
            seen.append(t)
            if lmf.diagnostics.get("reacquired", 0) == before:
                continue
            ages = t - np.array(seen)
            recent = ages <= window
            recent[-2:] = True
            mean, cov = _kalman_of_fixes(lmf, np.array([zs[s] for s in np.array(seen)[recent]]), ages[recent])
            np.testing.assert_array_less(np.abs(lmf.x - mean), 4 * np.sqrt(np.diag(cov) / n))
            sd = np.sqrt(np.diag(cov))
            np.testing.assert_array_less(np.abs(lmf.P - cov) / np.outer(sd, sd), 0.05)
            checked += 1
    assert checked >= 1
    with pytest.raises(ValueError, match="reacquire_window"):
        LearnedMotionFilter(slow, reacquire_window=0).fit(train, [x[:, :2] for x in train])


@pytest.mark.parametrize("sensor, bound", [
    (PositionFixes(3.0), 10.0), (RangeBearing(site=(0.0, -2000.0), range_noise=3.0, bearing_noise=0.002), 20.0)])
def test_a_bare_sensor_restarts_a_lost_track_from_the_spread_of_the_training_states(sensor, bound):
    """A sensor with no belief of its own (no ``initial_belief``) restarts from each state
    coordinate's training mean and variance, independently, updated by the recent observations
    (for fixes, the Kalman filter by hand; a radar without a Jacobian is linearised by finite
    differences), and follows a track far from every training state. It had been counted lost
    at every fix, hundreds of metres off."""
    model = ConstantVelocity(step=1.0, accel=0.5, sensor=sensor, speed=10.0)
    rng = np.random.default_rng(3)
    train = [model.simulate(200, rng=rng, burn_in=0)[0] for _ in range(5)]
    states = model.simulate(100, rng=rng, burn_in=0)[0] + [3e3, 1e3, 0.0, 0.0]
    zs = sensor.observe(states, rng=4)
    obs = [sensor.observe(x, rng=0) for x in train]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        lmf = LearnedMotionFilter(sensor, inputs=(2, 3), n_particles=300, random_state=0).fit(train, obs)
        means = lmf.batch_filter(zs)[0]
    assert set(lmf.diagnostics) <= {"reacquired", "degenerate"} and 1 <= lmf.diagnostics["reacquired"] <= 3
    assert np.sqrt(_mse(means, states, skip=10)) < bound
    if isinstance(sensor, PositionFixes):
        n = 20000
        lmf = LearnedMotionFilter(sensor, inputs=(2, 3), n_particles=n, random_state=0).fit(train, obs)
        with pytest.warns(kb.NumericalWarning, match="drew the particles afresh"):
            lmf.update(zs[0])
        X = lmf.states_
        mean, cov = _kalman_of_fixes(lmf, zs[:1], np.zeros(1, dtype=int), (X.mean(axis=0), np.diag(X.var(axis=0))))
        np.testing.assert_array_less(np.abs(lmf.x - mean), 4 * np.sqrt(np.diag(cov) / n))
        sd = np.sqrt(np.diag(cov))
        np.testing.assert_array_less(np.abs(lmf.P - cov) / np.outer(sd, sd), 0.05)


def test_a_restart_under_a_radar_is_the_mode_of_the_posterior_not_one_linearisation():
    """Under a radar, a restart's update is the iterated extended Kalman update: its mean is the
    posterior's mode (found here by a general-purpose optimiser), its covariance the inverse
    Gauss-Newton Hessian there, where a single linearisation at the predicted position lands
    hundreds of metres off."""
    radar = RangeBearing(site=(0.0, 0.0), range_noise=10.0, bearing_noise=0.002)
    model = ConstantVelocity(step=10.0, accel=0.5, sensor=radar, speed=20.0)
    train = [model.simulate(200, rng=s, burn_in=0)[0] + [0.0, 8000.0, 0.0, 0.0] for s in range(5)]
    track = model.simulate(30, rng=9, burn_in=0)[0] + [0.0, 8000.0, 0.0, 0.0]
    track[15:, :2] += [3000.0, 0.0]                             # reappears 3 km east at step 15
    zs = list(radar.observe(track, rng=3))
    n = 20000
    lmf = LearnedMotionFilter(model, inputs=(2, 3), n_particles=n, reacquire_window=1, random_state=0)
    lmf.fit(train, [radar.observe(x, rng=s) for s, x in enumerate(train)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        lmf.batch_filter(zs[:15])
        before = lmf.diagnostics.get("reacquired", 0)
        lmf.predict()
        lmf.update(zs[15])
    assert lmf.diagnostics["reacquired"] == before + 1
    # the prior of the restart: the sensor's belief at the fix before, one step of the linear part
    F, c, Q = lmf.motion_.linear_part()
    m, P = model.initial_belief(zs[14])
    m, P = F @ m + c, F @ P @ F.T + Q
    P_inv, R_inv = np.linalg.inv(P), np.linalg.inv(model.observation_cov)

    def neg_log_posterior(x):
        r = model.observation_residual(zs[15], model.observe_mean(x[None])[0])
        return 0.5 * (x - m) @ P_inv @ (x - m) + 0.5 * r @ R_inv @ r

    mode = minimize(neg_log_posterior, m, method="BFGS", options={"gtol": 1e-10}).x
    mode = minimize(neg_log_posterior, mode, method="Nelder-Mead",
                    options={"xatol": 1e-6, "fatol": 1e-12, "maxiter": 20000}).x
    H = model.observation_jacobian(mode)
    cov = np.linalg.inv(P_inv + H.T @ R_inv @ H)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(lmf.x - mode), 4 * sd / np.sqrt(n))
    np.testing.assert_array_less(np.abs(lmf.P - cov) / np.outer(sd, sd), 0.05)
    # one linearisation at the prior's mean
    H = model.observation_jacobian(m)
    ekf = m + P @ H.T @ np.linalg.solve(H @ P @ H.T + model.observation_cov,
                                        model.observation_residual(zs[15], model.observe_mean(m[None])[0]))
    assert np.hypot(*(ekf - mode)[:2]) > 100.0


def test_a_learned_motion_filter_saved_before_or_after_fit_comes_back_and_continues_the_run(cv_data, tmp_path):
    train, test_states, test_obs = cv_data
    fixes = [x[:, :2] for x in train]
    unfitted = kb.LearnedMotionFilter.load(kb.LearnedMotionFilter(CV, inputs=(2, 3), random_state=0)
                                           .save(tmp_path / "unfitted.npz"))
    assert unfitted.get_params()["inputs"] == (2, 3)
    lmf = unfitted.fit(train, fixes)
    lmf.batch_filter(test_obs[:50])
    back = kb.LearnedMotionFilter.load(lmf.save(tmp_path / "fitted.npz"))
    # the track jumps 5 km three steps on: the restart draws on the fixes from before the save too
    later = test_obs[50:].copy()
    later[3:] += [5e3, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        np.testing.assert_array_equal(back.batch_filter(later)[0], lmf.batch_filter(later)[0])
    assert back.diagnostics["reacquired"] == lmf.diagnostics["reacquired"] >= 1
    with pytest.raises(ValueError, match="cannot save an object of type"):
        kb.LearnedMotionFilter(_Without(CV, "two_point_belief")).fit(train, fixes).save(tmp_path / "user.npz")


def test_a_copy_shares_the_fitted_motion_and_runs_on_by_itself(cv_data):
    import copy

    train, _, test_obs = cv_data
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), n_particles=200, random_state=4).fit(train, [t[:, :2] for t in train])
    lmf.batch_filter(test_obs[:20])
    twin = copy.deepcopy(lmf)
    assert twin.motion_ is lmf.motion_ and twin.sensor_ is lmf.sensor_ and twin.states_ is lmf.states_
    particles, rng_state = lmf.particles.copy(), lmf.rng_state
    ahead = [(twin.predict(), twin.update(z), twin.x.copy())[-1] for z in test_obs[20:30]]
    np.testing.assert_array_equal(lmf.particles, particles)  # the copy's steps left the filter alone
    assert lmf.rng_state == rng_state
    for z, x in zip(test_obs[20:30], ahead):  # and the filter, stepped the same way, gives the same numbers
        lmf.predict()
        lmf.update(z)
        np.testing.assert_array_equal(lmf.x, x)


def test_a_gaussian_prior_whose_covariance_is_no_covariance_is_refused(cv_data):
    train, _, _ = cv_data
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), n_particles=50, random_state=0).fit(train, [x[:, :2] for x in train])
    with pytest.raises(ValueError, match=r"prior\[1\]: expected a positive semi-definite covariance"):
        lmf.reset(prior=(np.zeros(4), -np.eye(4)))
    # a semi-definite one is a prior (a known velocity, say)
    lmf.reset(prior=(np.zeros(4), np.diag([1.0, 1.0, 0.0, 0.0])))
    np.testing.assert_array_equal(lmf.belief.particles[:, 2:], 0.0)


def test_filterpy_saver_keeps_each_step_of_the_belief_and_not_the_log():
    # filterpy's Saver deep-copies the filter's attributes every step: it copied the training log,
    # the learned motion and its neighbour index each time (2.9 MB a step here), and kept each
    # step's candidates alive through the innovation (another 1.2 MB)
    import tracemalloc

    from filterpy.common import Saver

    train = [CV.simulate(2000, rng=s, burn_in=0)[0] for s in range(10)]
    test_states, test_obs = CV.simulate(30, rng=99, burn_in=0)
    lmf = LearnedMotionFilter(CV, inputs=(2, 3), random_state=0).fit(train, [t[:, :2] for t in train])
    lmf.reset(prior=test_states[0])
    saver = Saver(lmf)
    tracemalloc.start()
    try:
        for z in test_obs[1:]:
            lmf.predict()
            lmf.update(z)
            saver.save()
        per_step = tracemalloc.get_traced_memory()[0] / len(test_obs[1:])
    finally:
        tracemalloc.stop()
    saver.to_array()
    assert saver.x.shape == (29, 4) and saver.S.shape == (29, 2, 2)
    assert per_step < lmf.states_.nbytes / 3, per_step

