import re
import warnings

import numpy as np
import pytest
from filterpy.common import Saver
from filterpy.kalman import KalmanFilter
from sklearn.exceptions import NotFittedError

import kbfilter as kb
from kbfilter.filters import ExtendedKalman, KernelBayesFilter, KernelMonteCarloFilter, ParticleFilter, UnscentedKalman
from kbfilter.systems import LinearGaussian, Oscillation, Rotation

LINEAR = LinearGaussian(F=[[0.8, 0.2], [-0.2, 0.8]], H=np.eye(2), Q=0.1 * np.eye(2), R=0.3 * np.eye(2))


def exact_kalman(system, zs, x0, P0):
    """filterpy's linear Kalman filter from ``N(x0, P0)``: the means and each step's log-likelihood."""
    kf = KalmanFilter(system.dim_x, system.dim_z)
    kf.F, kf.H, kf.Q, kf.R = system.F, system.H, system.Q, system.R
    kf.x, kf.P = np.array(x0, dtype=float), np.array(P0, dtype=float)
    means, logliks = [], []
    for z in zs:
        kf.predict()
        kf.update(z)
        means.append(kf.x.copy())
        logliks.append(kf.log_likelihood)
    return np.array(means), np.array(logliks)


def distance_to_kalman(T, seed):
    rng = np.random.default_rng(seed)
    states, obs = LINEAR.simulate(T, rng)
    test_states, test_obs = LINEAR.simulate(300, rng)
    exact = exact_kalman(LINEAR, test_obs, np.zeros(2), LINEAR.stationary_cov)[0]
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(states, obs)
    means = kbf.batch_filter(test_obs)[0]
    return np.mean(np.sum((means - exact) ** 2, axis=1)), np.mean(np.sum((exact - test_states) ** 2, axis=1))


def test_kbf_approaches_exact_kalman_filter_as_training_grows():
    small = np.mean([distance_to_kalman(100, s)[0] for s in range(2)])
    large, kalman_mse = np.mean([distance_to_kalman(1500, s) for s in range(2)], axis=0)
    assert large < 0.2 * small
    # stated tolerance: within 10% of the Kalman filter's own error, in mean squared distance
    assert large < 0.1 * kalman_mse


def test_ekf_and_ukf_are_exact_on_a_linear_gaussian_system():
    rng = np.random.default_rng(0)
    _, obs = LINEAR.simulate(100, rng)
    exact = exact_kalman(LINEAR, obs[1:], *LINEAR.initial_belief(obs[0]))[0]
    for filt in (ExtendedKalman(LINEAR), UnscentedKalman(LINEAR)):
        means = filt.batch_filter(obs)[0]
        np.testing.assert_allclose(means[0], LINEAR.initial_belief(obs[0])[0])
        np.testing.assert_allclose(means[1:], exact, atol=1e-10)
    pf = ParticleFilter(LINEAR, n_particles=20000, rng=1).batch_filter(obs)[0]
    assert np.mean(np.sum((pf[1:] - exact) ** 2, axis=1)) < 2e-3


def test_the_ukf_takes_other_sigma_points_and_refuses_impossible_ones_by_name():
    rng = np.random.default_rng(0)
    _, obs = LINEAR.simulate(60, rng)
    exact = exact_kalman(LINEAR, obs[1:], *LINEAR.initial_belief(obs[0]))[0]
    # exact on a linear-Gaussian system whatever the (valid) spread of the points
    for alpha, beta, kappa in [(1e-3, 2.0, 0.0), (0.5, 0.0, 1.0), (1.0, 2.0, -1.5)]:
        means = UnscentedKalman(LINEAR, alpha=alpha, beta=beta, kappa=kappa).batch_filter(obs)[0]
        np.testing.assert_allclose(means[1:], exact, atol=1e-8)
    # before: a ZeroDivisionError, a LinAlgError from the sigma points, numpy's "infs or NaNs", a TypeError
    for kwargs, message in [(dict(alpha=0.0), "alpha: expected a positive finite number, got 0.0"),
                            (dict(kappa=-10.0), "kappa: expected more than -dim_x = -2"),
                            (dict(kappa=-2.0), "kappa: expected more than -dim_x = -2"),
                            (dict(beta=np.nan), "beta: expected a finite number, got nan"),
                            (dict(alpha="a"), "alpha: expected a positive number, got 'a'"),
                            (dict(alpha=1e-200), r"alpha: expected alpha\^2 \(dim_x \+ kappa\) to be a positive")]:
        with pytest.raises(ValueError, match=message):
            UnscentedKalman(LINEAR, **kwargs)


def test_a_noise_free_sensor_is_followed_exactly_or_refused_by_name():
    # R = 0: the Kalman posterior is the observation itself, with zero covariance; the UKF's sigma
    # points of that round-off covariance need a jitter the old rule (scaled by P itself) made 0
    system = LinearGaussian(0.5 * np.eye(2), np.eye(2), np.eye(2), np.zeros((2, 2)))
    _, obs = system.simulate(30, rng=0)
    np.testing.assert_allclose(ExtendedKalman(system).batch_filter(obs)[0], obs, atol=1e-12)
    ukf = UnscentedKalman(system)
    with pytest.warns(kb.NumericalWarning, match="symmetrised with jitter"):
        means = ukf.batch_filter(obs)[0]
    np.testing.assert_allclose(means, obs, atol=1e-6)
    assert ukf.diagnostics["jitter"] > 0
    # a particle filter weighs its particles by the observation density, which does not exist
    with pytest.raises(ValueError, match="^observation_cov: the observation noise covariance is singular"):
        ParticleFilter(system, rng=0).batch_filter(obs)
    partly = LinearGaussian(0.5 * np.eye(2), np.eye(2), np.eye(2), np.diag([1.0, 0.0]))
    with pytest.raises(ValueError, match="^observation_cov: .* singular"):
        ParticleFilter(partly, rng=0).batch_filter(partly.simulate(5, rng=0)[1])


def test_a_nearly_noise_free_sensor_after_a_wide_prior_keeps_the_ukf_running():
    # one fix with 1e-6 m errors gives the velocity a variance of 1e4: the second update's round-off
    # (about 1e-16 of the 1e6 m^2 prior) leaves a covariance whose negative eigenvalues (-5e-10) no
    # jitter of its own scale (1e-13) lifts; filterpy's Cholesky failed ("1-th leading minor")
    system = kb.systems.ConstantVelocity(accel=1e-9, sensor=kb.systems.PositionFixes(noise=1e-6))
    states, obs = system.simulate(30, rng=0)
    ukf = UnscentedKalman(system)
    with pytest.warns(kb.NumericalWarning, match="symmetrised with jitter"):
        means = ukf.batch_filter(obs)[0]
    assert ukf.diagnostics["jitter"] > 0
    # the extended Kalman filter is the exact Kalman filter here (a linear model); the UKF's sigma
    # points at 16 orders of magnitude between variances lose its first velocity update, not more
    exact = ExtendedKalman(system).batch_filter(obs)[0]
    np.testing.assert_allclose(means[2:], exact[2:], atol=1e-5)
    with pytest.warns(kb.NumericalWarning) as record:
        smoothed = UnscentedKalman(system).smooth(obs)[0]
    # at this line, though filterpy's smoother is what asks for the inverse of a singular covariance
    assert {w.filename for w in record} == {__file__}
    np.testing.assert_allclose(smoothed, ExtendedKalman(system).smooth(obs)[0], atol=1e-3)


@pytest.mark.parametrize("params, fix_noise, found", [
    # the velocity's variance 1e240 against the position's 1e1: no jittered P of float64 has a Cholesky factor
    ({"step": 4.3e26, "accel": 1.1e45, "speed": 0.39}, 6.2, "the covariance P has eigenvalues from .* to .*"),
    # the prediction's P overflows (filterpy then drew sigma points from inf: scipy's "array must not
    # contain infs or NaNs")
    ({"step": 8.4e63, "accel": 52.8, "speed": 3.0e60}, 2.0e-84, "the covariance P overflowed")])
def test_a_model_beyond_float64_stops_the_ukf_with_a_message_that_says_so(params, fix_noise, found):
    system = kb.systems.ConstantVelocity(sensor=kb.systems.PositionFixes(noise=fix_noise), **params)
    with warnings.catch_warnings():
        # numpy's check of the process noise, whose variances span 1e128, before its draw
        warnings.filterwarnings("ignore", "covariance is not symmetric positive-semidefinite", RuntimeWarning)
        _, obs = system.simulate(20, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)  # the jitter rule's, tried first
        with pytest.raises(np.linalg.LinAlgError, match=f"^UnscentedKalman: no sigma points can be drawn: {found}, "
                                                        f"even after the jitter rule; .* ExtendedKalman and "
                                                        f"ParticleFilter take no square root of P"):
            UnscentedKalman(system).batch_filter(obs)
        # as the message says: the EKF's algebra runs
        assert np.all(np.isfinite(ExtendedKalman(system).batch_filter(obs)[1]))


def test_a_component_certain_and_seen_without_noise_is_conditioned_through_the_pseudo_inverse():
    # the second component has no process noise, so it stays at 0, and it is observed without noise:
    # the innovation covariance is singular (numpy's "Singular matrix" before, from the first belief
    # on); the first component must be filtered and smoothed as if it were alone
    system = LinearGaussian(np.diag([0.9, 0.5]), np.eye(2), np.diag([0.1, 0.0]), np.diag([0.1, 0.0]))
    states, obs = system.simulate(40, rng=0)
    assert np.all(states[:, 1] == 0)
    alone = LinearGaussian([[0.9]], [[1.0]], [[0.1]], [[0.1]])
    filtered = ExtendedKalman(alone).batch_filter(obs[:, :1])[0][:, 0]
    smoothed = ExtendedKalman(alone).smooth(obs[:, :1])[0][:, 0]
    for cls, atol in ((ExtendedKalman, 1e-12), (UnscentedKalman, 1e-6)):
        filt = cls(system)
        with pytest.warns(kb.NumericalWarning):
            means, covs = filt.batch_filter(obs)[:2]
        np.testing.assert_allclose(means[:, 0], filtered, atol=atol)
        np.testing.assert_allclose(means[:, 1], 0.0, atol=atol)
        assert np.all(np.isfinite(covs)) and np.all(np.abs(covs[:, 1, 1]) < atol)
        with pytest.warns(kb.NumericalWarning):
            means = cls(system).smooth(obs)[0]  # batch_filter continues a run: a new filter
        np.testing.assert_allclose(means[:, 0], smoothed, atol=atol)
        np.testing.assert_allclose(means[:, 1], 0.0, atol=atol)
    ekf = ExtendedKalman(system)
    with pytest.warns(kb.NumericalWarning, match="^ExtendedKalman: the innovation covariance S is singular"):
        ekf.batch_filter(obs)
    # every update after the first (the first belief is the system's exact conditional)
    assert ekf.diagnostics["pseudo_inverse"] == len(obs) - 1
    np.testing.assert_allclose(system.initial_belief(obs[0])[0], [alone.initial_belief(obs[0, :1])[0][0], 0.0])


def test_default_jacobians_are_central_differences_of_the_means():
    # Oscillation has closed-form Jacobians; the base class's finite differences must agree
    from kbfilter.systems import System, finite_difference_jacobian

    system = Oscillation()
    for x in ([0.7, -0.4], [3.0, 1e3]):
        np.testing.assert_allclose(System.transition_jacobian(system, np.array(x)), system.transition_jacobian(
            np.array(x)), rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(System.observation_jacobian(system, np.array(x)), system.observation_jacobian(
            np.array(x)), rtol=1e-7, atol=1e-8)
    J = finite_difference_jacobian(lambda X: np.column_stack([X[:, 0] ** 3, np.exp(X[:, 1])]), [2.0, -1.0])
    np.testing.assert_allclose(J, [[12.0, 0.0], [0.0, np.exp(-1.0)]], rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="x: contains NaN"):
        finite_difference_jacobian(lambda X: X, [np.nan, 0.0])
    # one value a point given as a 1-D array was broadcast into a (2, 2) matrix, not the (1, 2) Jacobian
    with pytest.raises(ValueError, match=r"mean: expected an array of shape \(4, m\) .* got shape \(4,\)"):
        finite_difference_jacobian(lambda X: np.hypot(X[:, 0], X[:, 1]), [3.0, 4.0])
    np.testing.assert_allclose(finite_difference_jacobian(lambda X: np.hypot(X[:, 0], X[:, 1])[:, None], [3.0, 4.0]),
                               [[0.6, 0.8]], rtol=1e-9)


@pytest.mark.parametrize("F, Q, R, message", [
    ([[0.5, 0.1]], [[0.1]], [[0.2]], r"F: expected a square transition matrix, got shape \(1, 2\)"),
    ([[0.5]], [[-0.1]], [[0.2]], "Q: expected a positive semi-definite covariance"),
    ([[0.5]], [[0.1], [0.1]], [[0.2]], r"Q: expected a covariance of shape \(1, 1\)"),
    ([[0.5]], [[0.1]], [[0.2, 0.0], [0.0, 0.2]], r"R: expected a covariance of shape \(1, 1\), got shape \(2, 2\)"),
])
def test_a_linear_gaussian_system_refuses_matrices_that_are_not_its_model_by_name(F, Q, R, message):
    with pytest.raises(ValueError, match=message):
        LinearGaussian(F=F, H=[[1.0]], Q=Q, R=R)


def test_ekf_jacobian_matches_finite_differences():
    system = Oscillation()
    x = np.array([0.7, -0.4])
    eps = 1e-6
    numeric = np.column_stack([(system.transition_mean(x + eps * e) - system.transition_mean(x - eps * e))[0] / (2 * eps)
                               for e in np.eye(2)])
    np.testing.assert_allclose(system.transition_jacobian(x), numeric, atol=1e-6)


@pytest.fixture(scope="module")
def rotation_data():
    system = Rotation()
    rng = np.random.default_rng(3)
    return system.simulate(300, rng), system.simulate(60, rng)


@pytest.mark.parametrize("params", [{}, {"rule": "original"}, {"transition": "knn", "n_neighbors": 30},
                                    {"estimate": "mode"}, {"estimate": "raw_mean"}])
def test_batch_filter_equals_predict_update_loop(rotation_data, params):
    (states, obs), (_, test_obs) = rotation_data
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3, **params).fit(states, obs)
    means, covs, means_p, covs_p = kbf.batch_filter(test_obs)
    kbf.reset()
    for t, z in enumerate(test_obs):
        kbf.predict()
        np.testing.assert_array_equal(kbf.x_prior, means_p[t])
        kbf.update(z)
        np.testing.assert_array_equal(kbf.x, means[t])
        np.testing.assert_array_equal(kbf.P, covs[t])
    assert covs.shape == (60, 2, 2) and np.all(np.linalg.eigvalsh(covs) >= -1e-12)


def test_update_none_keeps_the_prior(rotation_data):
    (states, obs), (_, test_obs) = rotation_data
    kbf = KernelBayesFilter().fit(states, obs)
    kbf.predict()
    kbf.update(test_obs[0])
    kbf.predict()
    prior_w, prior_x, prior_P = kbf.weights_prior.copy(), kbf.x_prior.copy(), kbf.P_prior.copy()
    kbf.update(None)
    np.testing.assert_array_equal(kbf.weights, prior_w)
    np.testing.assert_array_equal(kbf.x_post, prior_x)
    np.testing.assert_array_equal(kbf.P_post, prior_P)
    zs = [test_obs[0], None, test_obs[2]]
    means, _, means_p, _ = kbf.reset().batch_filter(zs)
    np.testing.assert_array_equal(means[1], means_p[1])
    # a run held as an array (read from a table) cannot hold None: a NaN row is refused, and the
    # way the error gives is the list above
    table = test_obs[:3].copy()
    table[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"^zs\[1\]: contains NaN or infinite values; a missing measurement is None: "
                                         r"for a run held as an array, pass \[None if np.isnan"):
        kbf.reset().batch_filter(table)
    recipe = [None if np.isnan(z).any() else z for z in table]
    np.testing.assert_array_equal(kbf.reset().batch_filter(recipe)[0], means)


def test_sequences_given_as_a_list_never_link_across_the_boundary():
    system = Rotation()
    rng = np.random.default_rng(4)
    (x1, z1), (x2, z2) = system.simulate(80, rng), system.simulate(70, rng)
    kbf = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit([x1, x2], [z1, z2])
    assert 79 not in kbf.predecessors_ and 80 not in kbf.successors_
    assert len(kbf.predecessors_) == 79 + 69
    # the first states of both sequences have no predecessor: a prediction never puts weight on them
    for filt in (kbf, KernelBayesFilter(transition="knn", n_neighbors=10).fit([x1, x2], [z1, z2])):
        filt.predict()
        assert filt.weights_prior[0] == 0 and filt.weights_prior[80] == 0
        assert np.count_nonzero(filt.weights_prior) > 100
    # the same data as one sequence does link 79 -> 80
    one = KernelBayesFilter(reg_prior=1e-3, reg_update=1e-3).fit(np.vstack([x1, x2]), np.vstack([z1, z2]))
    assert 79 in one.predecessors_


def test_a_log_appended_row_by_row_is_not_read_as_sequences_of_scalar_states():
    # a loop appending each step's state array makes a list of 1-D arrays, which the list rule read as
    # that many sequences of scalar states: the fit went through (a 1-D filter of 2-step "sequences")
    # and only batch_filter failed, on the observations' length
    states, obs = Rotation().simulate(120, rng=0)
    message = (r"states: a list of 120 one-dimensional arrays of length 2 reads as 120 sequences of 2 scalar states "
               r"each, .* pass np.array\(states\) \(shape \(120, 2\)\)")
    with pytest.raises(ValueError, match=message):
        KernelBayesFilter().fit(list(states), list(obs))
    with pytest.raises(ValueError, match=message):
        kb.LearnedMotionFilter().fit(list(states), list(obs))
    # as one array it is one sequence; few long scalar sequences, or scalar ones as columns, stay several
    KernelBayesFilter().fit(np.array(list(states)), np.array(list(obs)))
    scalar = [states[:60, 0], states[60:, 0]]
    assert KernelBayesFilter().fit(scalar, [obs[:60], obs[60:]]).n_features_in_ == 1
    columns = [states[i : i + 10, :1] for i in range(0, 120, 10)]
    assert KernelBayesFilter().fit(columns, [obs[i : i + 10] for i in range(0, 120, 10)]).n_features_in_ == 1


def test_ten_thousand_steps_stay_finite():
    system = Oscillation()
    rng = np.random.default_rng(5)
    states, obs = system.simulate(150, rng)
    _, long_obs = system.simulate(10_000, rng)
    kbf = KernelBayesFilter(scale=0.25, reg_prior=1e-5, reg_update=1e-6).fit(states, obs)
    means, covs, _, _ = kbf.batch_filter(long_obs)
    assert np.all(np.isfinite(means)) and np.all(np.isfinite(covs))
    assert kbf.weights.sum() == pytest.approx(1.0)


def test_user_prior_moves_the_initial_estimate(rotation_data):
    (states, obs), _ = rotation_data
    kbf = KernelBayesFilter(reg_prior=1e-3).fit(states, obs)
    uniform = kbf.x.copy()
    kbf.reset(prior=np.random.default_rng(0).normal([1.0, 0.0], 0.1, size=(50, 2)))
    assert np.linalg.norm(kbf.x - [1.0, 0.0]) < 0.3 < np.linalg.norm(uniform - [1.0, 0.0])


@pytest.mark.parametrize("make", [lambda: KernelBayesFilter(), lambda: KernelBayesFilter(approximation="local"),
                                  lambda: kb.KernelMonteCarloFilter(Rotation(), n_particles=40, random_state=0),
                                  lambda: kb.LearnedMotionFilter(n_particles=40, random_state=0)])
def test_one_known_state_is_a_prior_of_one_sample(rotation_data, make):
    # a state of shape (dim_x,) was read as dim_x samples of a scalar: "expected 2 columns, got 1"
    (states, obs), (_, test_obs) = rotation_data
    filt = make().fit(states[:200], obs[:200])
    start = states[7]
    for prior in (start, list(start), start[None, :]):
        filt.reset(prior=prior)
        x0 = filt.x.copy()
        runs = [filt.batch_filter(test_obs[:5])[0]]
        filt.reset(prior=start[None, :])
        np.testing.assert_array_equal(filt.x, x0)
        runs.append(filt.batch_filter(test_obs[:5])[0])
        np.testing.assert_array_equal(*runs)
    with pytest.raises(ValueError, match=r"prior: expected samples of the state, an \(n, 2\) array, or one state of "
                                         r"length 2; got shape \(3,\)"):
        filt.reset(prior=[1.0, 2.0, 3.0])
    if hasattr(filt, "n_particles"):  # the particles are n_particles however many samples the prior has
        for prior in (start, states[:5], states[:100]):
            assert filt.reset(prior=prior).particles.shape == (40, 2)
            filt.predict()
            filt.update(test_obs[0])
            assert filt.particles.shape == (40, 2)


def test_works_inside_a_filterpy_loop_with_saver(rotation_data):
    (states, obs), (_, test_obs) = rotation_data
    kbf = KernelBayesFilter().fit(states, obs)
    saver = Saver(kbf)
    for z in test_obs[:10]:
        kbf.predict()
        kbf.update(z)
        saver.save()
    saver.to_array()
    assert saver.x.shape == (10, 2) and saver.P.shape == (10, 2, 2)


def test_every_filter_works_inside_a_filterpy_loop_with_saver(rotation_data):
    # Saver reads every property: the particle filter's rng_state read a generator it does not
    # have (its own is rng) and raised an AttributeError
    (states, obs), (_, test_obs) = rotation_data
    system = Rotation()
    filters = [KernelBayesFilter().fit(states, obs),
               KernelMonteCarloFilter(system, n_particles=100, random_state=0).fit(states, obs),
               ParticleFilter(system, n_particles=100, rng=0).initialize(*system.initial_belief(test_obs[0])),
               ExtendedKalman(system).initialize(*system.initial_belief(test_obs[0])),
               UnscentedKalman(system).initialize(*system.initial_belief(test_obs[0])),
               # to_array failed on its reacquisition gate (a tuple of a number and a matrix) and on
               # its recent observations (one more each step)
               kb.LearnedMotionFilter(n_particles=100, random_state=0).fit(states, obs),
               kb.filters.InteractingMultipleModel([system, system]).initialize(*system.initial_belief(test_obs[0])),
               # its window of frames grew through the first steps, which to_array could not stack
               kb.filters.WindowRegressor(random_state=0).fit(states, obs)]
    for filt in filters:
        saver = Saver(filt)
        for z in test_obs[1:6]:
            filt.predict()
            filt.update(z)
            saver.save()
        saver.to_array()
        assert saver.x.shape == (5, 2), type(filt).__name__
        assert not hasattr(filt, "mahalanobis") or saver.mahalanobis.shape == (5,), type(filt).__name__
        np.testing.assert_array_equal(saver.x[-1], filt.x)


def test_batch_filter_takes_filterpys_saver_and_records_each_step(rotation_data):
    (states, obs), (_, test_obs) = rotation_data
    system = Rotation()
    for filt in (KernelBayesFilter().fit(states, obs), ExtendedKalman(system),
                 kb.LearnedMotionFilter(n_particles=100, random_state=0).fit(states, obs)):
        # the EKF and the learned-motion filter start from test_obs[0], a step with no innovation,
        # whose y and S (and K) are None
        saver = Saver(filt, ignore=("y", "S", "K"))
        means = filt.batch_filter(test_obs[:8], saver=saver)[0]
        saver.to_array()
        np.testing.assert_array_equal(saver.x, means)
        assert saver.P.shape == (8, 2, 2) and len(saver.mahalanobis) == 8, type(filt).__name__
    with pytest.raises(ValueError, match="saver: expected a filterpy Saver"):
        KernelBayesFilter().fit(states, obs).batch_filter(test_obs[:3], saver=[])


def test_the_deprecated_particle_weights_warn_when_read_and_not_when_saver_records_the_filter(rotation_data):
    # Saver reads every property each step: the deprecated alias warned a user who never wrote it
    (_, _), (_, test_obs) = rotation_data
    system = Rotation()
    pf = ParticleFilter(system, n_particles=100, rng=0).initialize(*system.initial_belief(test_obs[0]))
    saver = Saver(pf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for z in test_obs[1:4]:
            pf.predict()
            pf.update(z)
            saver.save()
    with pytest.warns(FutureWarning, match="ParticleFilter.weights is deprecated"):
        np.testing.assert_array_equal(pf.weights, pf.particle_weights)
    with pytest.raises(AttributeError, match="cannot be assigned"):
        pf.weights = np.full(100, 0.01)


@pytest.mark.parametrize(
    "states_mod, obs_mod, match",
    [
        (lambda x: x[:-1], None, "same number of samples"),
        (None, lambda z: z[:, :1], None),  # one-dimensional observations are fine
        (lambda x: np.where(np.arange(x.size).reshape(x.shape) == 3, np.nan, x), None, "states: contains NaN"),
        (lambda x: x[:2], lambda z: z[:2], "at least 3 training steps"),
        (lambda x: x[:1], lambda z: z[:1], "states: expected at least 2 samples"),
    ],
)
def test_fit_bad_input(rotation_data, states_mod, obs_mod, match):
    (states, obs), _ = rotation_data
    states = states_mod(states) if states_mod else states
    obs = obs_mod(obs) if obs_mod else obs
    if match is None:
        KernelBayesFilter().fit(states, obs)
        return
    with pytest.raises(ValueError, match=match):
        KernelBayesFilter().fit(states, obs)


def test_update_bad_input(rotation_data):
    (states, obs), _ = rotation_data
    kbf = KernelBayesFilter().fit(states, obs)
    with pytest.raises(ValueError, match="z: expected length 2"):
        kbf.update([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="z: contains NaN"):
        kbf.update([np.nan, 0.0])
    with pytest.raises(ValueError, match="rule"):
        KernelBayesFilter(rule="kalman").fit(states, obs)
    with pytest.raises(ValueError, match="states and observations"):
        KernelBayesFilter().fit([states], obs)


def test_tune_filter_picks_the_best_validation_point_and_never_sees_test_data(rotation_data):
    (states, obs), _ = rotation_data
    grid = {"scale": (0.5, 1.0, 2.0), "reg_prior": (1e-4, 1e-2), "reg_update": (1e-4, 1e-1)}
    full = kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, validation_length=100,
                          progress=False, search="grid", max_extensions=0)
    assert len(full.search_table_) == 12
    best = min(full.search_table_, key=lambda r: r["mse"])
    assert full.best_params_ == {k: best[k] for k in grid}
    # the refit uses all training data
    assert full.n_train_ == len(states)
    coordinate = kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, validation_length=100,
                                progress=False, max_extensions=0)
    assert len(coordinate.search_table_) <= 12
    assert min(r["mse"] for r in coordinate.search_table_) >= best["mse"]
    with pytest.raises(ValueError, match="param_grid"):
        kb.tune_filter(KernelBayesFilter(), states, obs, param_grid={"bandwidth": (1.0,)}, progress=False)
    # a grid of the wrong shape is refused before any fit: a lone value, a string, no values, pairs
    for grid, expected in [({"scale": 0.5}, "param_grid['scale']: expected a list of candidate values, got 0.5"),
                           ({"scale": "0.5"}, "param_grid['scale']: expected a list of candidate values, got '0.5'"),
                           ({"scale": ()}, "param_grid['scale']: expected a list of candidate values, got an empty"),
                           # a repeat is a typo for another value (1e-3 for 1e-4): it would be tried twice
                           ({"reg_prior": (1e-3, 1e-2, 1e-3)},
                            "param_grid['reg_prior']: expected distinct candidate values, got 0.001 twice"),
                           ({"scale": (1, 1.0)},
                            "param_grid['scale']: expected distinct candidate values, got 1.0 twice"),
                           ([("scale", (1.0,))], "param_grid: expected a dict"), ({}, "param_grid: expected a dict")]:
        with pytest.raises(ValueError, match=re.escape(expected)):
            kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, progress=False)
    with pytest.raises(ValueError, match="validation_length"):
        kb.tune_filter(KernelBayesFilter(), states, obs, validation_length=299, progress=False)
    with pytest.raises(ValueError, match="progress: expected True or False, got 'no'"):
        kb.tune_filter(KernelBayesFilter(), states, obs, progress="no")


def test_blocked_validation_folds_hold_out_consecutive_blocks(rotation_data):
    from kbfilter.tuning import validation_mse, validation_split

    (states, obs), _ = rotation_data
    T = len(states)
    (train_x, _), (val_x, _) = validation_split(states, obs, 50, fold=0)
    assert len(train_x) == 1 and np.array_equal(val_x, states[-50:])
    (train_x, train_z), (val_x, _) = validation_split(states, obs, 50, fold=2)
    # the block before the last two is held out; the steps around it are two separate sequences
    assert np.array_equal(val_x, states[T - 150:T - 100])
    assert [len(x) for x in train_x] == [T - 150, 100]
    assert np.array_equal(np.vstack(train_x), np.delete(states, np.s_[T - 150:T - 100], axis=0))
    # the tuned score is the mean of the per-block validation MSEs
    grid = {"scale": (1.0,), "reg_prior": (1e-2,), "reg_update": (1e-2,)}
    tuned = kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, validation_length=50, n_folds=3,
                           progress=False)
    per_fold = [validation_mse(KernelBayesFilter(), {"scale": 1.0, "reg_prior": 1e-2, "reg_update": 1e-2},
                               *validation_split(states, obs, 50, fold)) for fold in range(3)]
    assert tuned.search_table_[0]["mse"] == pytest.approx(np.mean(per_fold), rel=1e-12)
    with pytest.raises(ValueError, match="validation_length"):
        kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, validation_length=100,
                       n_folds=T // 100, progress=False)


def test_a_log_shorter_than_400_steps_is_tuned_on_its_last_half_by_default():
    states, obs = kb.systems.Rotation().simulate(150, rng=3)
    grid = {"scale": (0.5, 1.0), "reg_prior": (1e-2,), "reg_update": (1e-3, 1e-1)}
    # before: 200 steps were held out whatever the log's length, and a 150-step log was refused
    for n_folds, held_out in [(1, 75), (2, 73)]:
        given = kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, validation_length=held_out,
                               n_folds=n_folds, progress=False, max_extensions=0)
        default = kb.tune_filter(KernelBayesFilter(), states, obs, param_grid=grid, n_folds=n_folds,
                                 progress=False, max_extensions=0)
        assert default.search_table_ == given.search_table_
    from kbfilter.tuning import default_validation_length

    # of a list of runs, the last is held out from
    assert default_validation_length(1000) == 200 and default_validation_length(150) == 75
    default = kb.tune_filter(KernelBayesFilter(), [states[:40], states], [obs[:40], obs], param_grid=grid,
                             progress=False, max_extensions=0)
    given = kb.tune_filter(KernelBayesFilter(), [states[:40], states], [obs[:40], obs], param_grid=grid,
                           validation_length=75, progress=False, max_extensions=0)
    assert default.search_table_ == given.search_table_
    with pytest.raises(ValueError, match=re.escape("states (the last training sequence): expected at least "
                                                   "n_folds + 3 = 6 steps")):
        kb.tune_filter(KernelBayesFilter(), states[:5], obs[:5], param_grid=grid, n_folds=3, progress=False)


def test_a_short_last_sequence_is_named_as_what_limits_the_held_out_block():
    states, obs = kb.systems.Rotation().simulate(300, rng=3)
    grid = {"scale": (0.5, 1.0), "reg_prior": (1e-2,), "reg_update": (1e-3,)}
    # a log cut at its gaps may end in a short piece: the block comes from it, and a warning says so
    with pytest.warns(UserWarning, match=r"^tune_filter: the last training sequence has 50 steps, so the held-out "
                                         r"block is 25 steps; put a longer sequence last \(one has 250\)"):
        short = kb.tune_filter(KernelBayesFilter(), [states[:250], states[250:]], [obs[:250], obs[250:]],
                               param_grid=grid, progress=False, max_extensions=0)
    given = kb.tune_filter(KernelBayesFilter(), [states[:250], states[250:]], [obs[:250], obs[250:]],
                           param_grid=grid, validation_length=25, progress=False, max_extensions=0)
    assert short.search_table_ == given.search_table_
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kb.tune_filter(KernelBayesFilter(), [states[:50], states[50:]], [obs[:50], obs[50:]], param_grid=grid,
                       progress=False, max_extensions=0)
    # one too short for any block is refused, with the same advice
    for given in [{}, {"validation_length": 100}]:
        with pytest.raises(ValueError, match=r"^states \(the last training sequence\): expected at least .* got 3; "
                                             r".*so put a longer one last$"):
            kb.tune_filter(KernelBayesFilter(), [states[:297], states[297:]], [obs[:297], obs[297:]],
                           param_grid=grid, progress=False, **given)


def test_repeated_validation_runs_average_a_monte_carlo_filter_over_seeds(rotation_data):
    from kbfilter.tuning import validation_mse, validation_split

    (states, obs), _ = rotation_data
    params = {"scale": 1.0, "reg_prior": 1e-2, "reg_update": 1e-2}
    grid = {k: (v,) for k, v in params.items()}
    template = kb.KernelMonteCarloFilter(Rotation(), n_particles=50, resample="ratio",
                                         random_state=np.random.default_rng(5))
    before = template.random_state.bit_generator.state
    tuned = kb.tune_filter(template, states, obs, param_grid=grid, validation_length=50, n_repeats=3,
                           progress=False)
    assert template.random_state.bit_generator.state == before  # the template's Generator is not advanced
    seeds = np.random.default_rng(5).integers(2**63, size=3)
    split = validation_split(states, obs, 50)
    runs = [validation_mse(template, dict(params, random_state=int(s)), *split) for s in seeds]
    assert len(set(runs)) == 3  # the runs are different draws
    assert tuned.search_table_[0]["mse"] == pytest.approx(np.mean(runs), rel=1e-12)
    # the refitted filter keeps (a copy of) the template's own random_state, not a drawn seed
    assert isinstance(tuned.random_state, np.random.Generator) and tuned.random_state is not template.random_state
    with pytest.raises(ValueError, match="n_repeats: NearestImage draws no random numbers"):
        kb.tune_filter(kb.filters.NearestImage(), states, obs, param_grid={"features": (None,)}, n_repeats=2,
                       progress=False)
    with pytest.raises(ValueError, match="n_repeats"):
        kb.tune_filter(template, states, obs, param_grid=grid, n_repeats=0, progress=False)


def test_a_system_missing_part_of_its_model_says_which_class_and_method():
    from kbfilter.systems import System

    class Incomplete(System):
        dim_x = dim_z = 1
        process_cov = np.eye(1)

    with pytest.raises(NotImplementedError, match=r"Incomplete\.initial_state: this system does not define"):
        Incomplete().simulate(5, rng=0)
    with pytest.raises(NotImplementedError, match=r"Incomplete\.transition_mean"):
        Incomplete().sample_transition(np.zeros((3, 1)), np.random.default_rng(0))
    # the Jacobians default to finite differences of the means, so the mean is what is missing
    with pytest.raises(NotImplementedError, match=r"Incomplete\.observe_mean"):
        Incomplete().observation_jacobian(np.zeros(1))


class _Drift(kb.systems.System):
    """A user's system: a damped drift seen through its first coordinate."""
    dim_x, dim_z = 2, 1
    process_cov, observation_cov = 0.01 * np.eye(2), np.array([[0.1]])

    def transition_mean(self, X):
        return np.column_stack([X[:, 0] + 0.1 * X[:, 1], 0.99 * X[:, 1]])

    def observe_mean(self, X):
        return X[:, :1]

    def initial_state(self, rng):
        return rng.normal(size=2)

    def initial_belief(self, z0):
        return np.array([z0[0], 0.0]), np.eye(2)


@pytest.mark.parametrize("attr, value", [("dim_x", None), ("dim_x", 2.5), ("dim_x", "2"), ("dim_z", None),
                                         ("dim_z", True)])
def test_a_system_without_whole_dimensions_is_named_before_it_is_used(attr, value):
    """A subclass that forgot dim_z, or set dim_x to 2.5, failed with a TypeError about None deep
    inside numpy: the simulation and every filter on the true model name the class and attribute."""
    system = type("MySystem", (_Drift,), {attr: value})()
    _, zs = _Drift().simulate(5, rng=0)
    message = rf"MySystem\.{attr}: expected an integer, got {re.escape(repr(value))}$"
    with pytest.raises(ValueError, match=message):
        system.simulate(5, rng=0)
    for make in (kb.filters.ExtendedKalman, kb.filters.UnscentedKalman, kb.filters.ParticleFilter):
        with pytest.raises(ValueError, match=message):
            make(system).batch_filter(zs)


def test_an_initial_state_is_checked_and_may_be_a_list():
    listed = type("Listed", (_Drift,), {"initial_state": lambda self, rng: rng.normal(size=2).tolist()})()
    states, _ = listed.simulate(5, rng=0)
    np.testing.assert_array_equal(states, _Drift().simulate(5, rng=0)[0])
    longer = type("Longer", (_Drift,), {"initial_state": lambda self, rng: rng.normal(size=3)})()
    with pytest.raises(ValueError, match=r"Longer\.initial_state: expected length 2, got 3"):
        longer.simulate(5, rng=0)
    with pytest.raises(ValueError, match=r"Longer\.initial_state: expected length 2, got 3"):
        kb.filters.ParticleFilter(longer, n_particles=10, rng=0).initialize_stationary()


def test_a_system_draws_its_noise_from_the_covariance_it_holds_at_the_draw():
    """The draws are numpy's multivariate_normal (the same standard normals) for whatever covariance
    the system holds when it draws, even one changed in place between two draws."""
    system, X = _Drift(), np.arange(10.0).reshape(5, 2)
    system.process_cov = np.array([[0.02, 0.01], [0.01, 0.03]])
    for cov in ([[0.02, 0.01], [0.01, 0.03]], [[0.5, -0.2], [-0.2, 0.4]], [[0.02, 0.01], [0.01, 0.03]]):
        system.process_cov[:] = cov  # the same array, other values
        drawn = system.sample_transition(X, np.random.default_rng(4))
        expected = system.transition_mean(X) + np.random.default_rng(4).multivariate_normal(np.zeros(2), cov, size=5)
        np.testing.assert_allclose(drawn, expected, rtol=1e-12, atol=1e-15)
    observed = system.sample_observation(X, np.random.default_rng(2))
    np.testing.assert_allclose(observed, X[:, :1] + np.sqrt(0.1) * np.random.default_rng(2).standard_normal((5, 1)),
                               rtol=1e-12)
    # a covariance that is not positive semi-definite is refused by name (numpy warned and drew anyway)
    system.process_cov = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match=r"_Drift\.process_cov: expected a positive semi-definite covariance"):
        system.sample_transition(X, np.random.default_rng(0))


class _FlatObservation(_Drift):
    def observe_mean(self, X):
        return X[:, 0]  # one value a state, but 1-D: numpy would broadcast it against the noise


class _ShortTransition(_Drift):
    def transition_mean(self, X):
        return X[:, :1]


class _WrongNoise(_Drift):
    process_cov = np.eye(3)


class _Diverging(_Drift):
    def transition_mean(self, X):
        return np.where(X > 0.5, np.inf, 2.0 * X)  # as an overflow would be


class _NegativeNoise(_Drift):
    process_cov = np.diag([0.01, -0.01])


class _ComplexObservation(_Drift):
    def observe_mean(self, X):
        return X[:, :1] + 1j * X[:, 1:]  # numpy's cast would drop the imaginary part with only a warning


class _TextTransition(_Drift):
    def transition_mean(self, X):
        return X.astype(str)  # numeric text: numpy's cast would read it as numbers


class _UnknownNoise(_Drift):
    observation_cov = np.array([[np.nan]])


class _ComplexNoise(_Drift):
    process_cov = np.diag([0.01, 0.01]) + 0.01j  # its real part was taken, with only numpy's warning


@pytest.mark.parametrize("system, message", [
    (_FlatObservation(), r"_FlatObservation\.observe_mean: expected an array of shape \(\d+, 1\) for \d+ state\(s\), "
                         r"one row a state, got shape \(\d+,\)"),
    (_ShortTransition(), r"_ShortTransition\.transition_mean: expected an array of shape \(\d+, 2\) .* got shape "
                         r"\(\d+, 1\)"),
    (_WrongNoise(), r"_WrongNoise\.process_cov: expected an array of shape \(2, 2\), got shape \(3, 3\)"),
    # values no model can have: numpy's silent NaNs (or a draw from a negative variance) before
    (_Diverging(), r"_Diverging\.transition_mean: expected finite values, got NaN or infinite ones for "),
    (_NegativeNoise(), r"_NegativeNoise\.process_cov: expected a positive semi-definite covariance matrix; its "
                       r"smallest eigenvalue is -0\.01"),
    (_UnknownNoise(), r"_UnknownNoise\.observation_cov: contains NaN or infinite values"),
    (_ComplexObservation(), r"_ComplexObservation\.observe_mean: expected real values, got an array of dtype "
                            r"complex128"),
    (_TextTransition(), r"_TextTransition\.transition_mean: expected real values, got an array of dtype <U"),
    (_ComplexNoise(), r"_ComplexNoise\.process_cov: expected a \(2, 2\) array of real numbers, got ndarray of dtype "
                      r"complex128"),
])
def test_a_users_system_whose_model_has_the_wrong_shape_or_values_is_named_not_broadcast(system, message):
    zs = _Drift().simulate(20, rng=1)[1]
    with pytest.raises(ValueError, match=message):
        system.simulate(20, rng=0)
    for cls in (kb.filters.ExtendedKalman, kb.filters.UnscentedKalman, kb.filters.ParticleFilter):
        with pytest.raises(ValueError, match=message):
            cls(system).batch_filter(zs)
    # the same system with the right shapes runs, and the Kalman filters agree on this linear model
    ekf = kb.filters.ExtendedKalman(_Drift()).batch_filter(zs)[0]
    np.testing.assert_allclose(kb.filters.UnscentedKalman(_Drift()).batch_filter(zs)[0], ekf, rtol=1e-8, atol=1e-10)


def test_a_users_initial_belief_of_the_wrong_size_is_named():
    class WrongBelief(_Drift):
        def initial_belief(self, z0):
            return np.zeros(3), np.eye(2)

    class NoPair(_Drift):
        def initial_belief(self, z0):
            return np.zeros(2)

    zs = _Drift().simulate(5, rng=1)[1]
    for cls in (kb.filters.ExtendedKalman, kb.filters.UnscentedKalman, kb.filters.ParticleFilter):
        with pytest.raises(ValueError, match=r"^WrongBelief\.initial_belief: the mean: expected length 2, got 3"):
            cls(WrongBelief()).batch_filter(zs)
        with pytest.raises(ValueError, match=r"^NoPair\.initial_belief: expected a pair \(mean, cov\), got ndarray"):
            cls(NoPair()).batch_filter(zs)


def test_window_regressor_is_reproducible_and_works_on_low_dimensional_observations():
    from kbfilter.filters import WindowRegressor

    states, obs = kb.systems.MovingSprite().simulate(120, rng=0)
    runs = [WindowRegressor(max_iter=20).fit(states, obs).batch_filter(obs[:10])[0] for _ in range(2)]
    np.testing.assert_array_equal(runs[0], runs[1])  # same random_state, same numbers
    states, obs = Oscillation().simulate(120, rng=0)  # 2 features: fewer than the default 30 components
    assert WindowRegressor(max_iter=20).fit(states, obs).batch_filter(obs[:10])[0].shape == (10, 2)
    # before any frame it says the mean training state, in the states' units (it said the origin,
    # a kilometre off for states a kilometre from it)
    far = states + 1000.0
    means = WindowRegressor(max_iter=20).fit(far, obs).batch_filter([None, None] + list(obs[:3]))[0]
    np.testing.assert_allclose(means[:2], [far.mean(axis=0)] * 2, rtol=1e-12)


@pytest.mark.parametrize("param, value, match", [
    ("hidden_layer_sizes", "ab", "a non-empty tuple of layer widths"),   # numpy's UFuncTypeError inside scikit-learn
    ("hidden_layer_sizes", 5, "a non-empty tuple of layer widths"),      # a TypeError
    ("hidden_layer_sizes", (64, 0), "an integer >= 1"),
    ("features", "pca", "None or a scikit-learn transformer"),  # a TypeError from clone
    ("alpha", -1.0, "a non-negative finite number"), ("max_iter", 0, "an integer >= 1"),
    ("random_state", "x", "an integer"), ("window", 0, "an integer >= 1")])
def test_window_regressor_names_a_bad_hyperparameter_before_it_fits(param, value, match):
    from kbfilter.filters import WindowRegressor

    reg = WindowRegressor(**{param: value})
    with pytest.raises(ValueError, match=f"{param}: expected {match}"):
        reg.check_params()
    with pytest.raises(ValueError, match=f"{param}: expected {match}"):
        reg.fit(*Oscillation().simulate(50, rng=0))


def test_window_regressor_on_a_one_dimensional_state_reports_its_residual_variance():
    from kbfilter.filters import WindowRegressor

    system = kb.systems.LinearGaussian(F=[[0.9]], H=[[1.0]], Q=[[0.1]], R=[[0.2]])
    states, obs = system.simulate(200, rng=0)
    reg = WindowRegressor(window=1, max_iter=100).fit(states, obs)
    # with a window of one frame, filtering the training run regresses each training input again
    means, covs, _, _ = reg.batch_filter(obs)
    assert means.shape == (200, 1) and covs.shape == (200, 1, 1)
    np.testing.assert_allclose(covs[-1], [[np.var(states[:, 0] - means[:, 0], ddof=1)]], rtol=1e-10)
    with pytest.raises(ValueError, match=r"us\[0\]: this filter takes no control"):
        reg.batch_filter(obs[:3], us=[[1.0]] * 3)


def test_window_regressor_counts_an_estimate_that_leaves_the_training_states_box(tmp_path):
    """Frames unlike the training ones made the network extrapolate without a word (an observation
    of 1e300 gave an estimate near 1e299): the estimate is checked against the training states'
    widened box, as a kernel filter's is, counted and warned about once until reset."""
    from kbfilter.filters import WindowRegressor
    from kbfilter.filters.base import OUTSIDE_MARGIN
    from kbfilter.filters.window import WindowNetwork

    states, obs = Oscillation().simulate(300, rng=0)
    reg = WindowRegressor(window=3, max_iter=50).fit(states, obs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NumericalWarning)  # the test run stays inside: no warning
        means = reg.batch_filter(obs[:50])[0]
    assert reg.diagnostics["outside_training"] == 0
    low, high = states.min(axis=0), states.max(axis=0)
    margin = OUTSIDE_MARGIN * (high - low)
    assert np.all((means >= low - margin) & (means <= high + margin))
    reg.reset()
    with pytest.warns(kb.NumericalWarning, match="WindowRegressor: the estimate left the training states' bounding box"):
        reg.update(np.array([1e3, 1e3]))
    assert np.any((reg.x < low - margin) | (reg.x > high + margin))
    reg.update(np.array([1e3, 1e3]))
    assert reg.diagnostics["outside_training"] == 2
    assert reg.reset().diagnostics["outside_training"] == 0
    # the box is saved with the network; a network without one (a file from before) checks none
    back = WindowRegressor.load(reg.save(tmp_path / "window.npz"))
    back.update(np.array([1e3, 1e3]))
    assert back.diagnostics["outside_training"] == 1
    net = reg.model_
    bare = WindowNetwork(net.space, net.input_scale, net.weights, net.biases, net.target_mean, net.target_scale,
                         net.residual_cov)
    assert bare.box is None
    with pytest.raises(ValueError, match="state_range: expected the smallest and the largest training state values"):
        WindowNetwork(net.space, net.input_scale, net.weights, net.biases, net.target_mean, net.target_scale,
                      net.residual_cov, net.state_range[::-1])


def test_saver_records_200_steps_without_copying_the_fitted_model():
    import tracemalloc

    system = Oscillation()
    states, obs = system.simulate(1000, rng=0)
    kbf = KernelBayesFilter().fit(states, obs)
    _, test_obs = system.simulate(200, rng=1)
    xs = []
    tracemalloc.start()
    try:
        saver = Saver(kbf)
        for z in test_obs:
            kbf.predict()
            kbf.update(z)
            saver.save()
            xs.append(kbf.x.copy())
        added = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # a step's belief is two weight vectors over T = 1,000 states (16 kB); the model is 3 T x T
    # matrices (24 MB), which a deep copy per step would make 4.8 GB
    assert added < 30e6
    saver.to_array()
    np.testing.assert_array_equal(saver.x, np.array(xs))
    assert all(model is kbf.model_ for model in saver.model_)


def test_copies_of_a_filter_share_the_model_and_keep_their_own_belief(rotation_data):
    import copy

    (states, obs), (_, test_obs) = rotation_data
    kbf = KernelBayesFilter().fit(states, obs)
    twin = copy.deepcopy(kbf)
    assert twin.model_ is kbf.model_
    kbf.predict()
    kbf.update(test_obs[0])
    assert not np.array_equal(twin.weights, kbf.weights)
    np.testing.assert_array_equal(twin.reset().batch_filter(test_obs)[0], kbf.reset().batch_filter(test_obs)[0])


@pytest.mark.parametrize("cls", [ExtendedKalman, UnscentedKalman])
def test_gaussian_baselines_have_filterpys_surface(cls):
    _, obs = LINEAR.simulate(40, rng=0)
    means, logliks = exact_kalman(LINEAR, obs[1:], *LINEAR.initial_belief(obs[0]))
    filt = cls(LINEAR)
    with pytest.raises(RuntimeError, match="no belief yet; call initialize"):
        filt.predict()
    filt.x, filt.P = LINEAR.initial_belief(obs[0])   # assignable, as in filterpy
    for t, z in enumerate(obs[1:]):
        filt.predict()
        filt.update(z)
        np.testing.assert_allclose(filt.x, means[t], atol=1e-10)
        np.testing.assert_allclose(filt.log_likelihood, logliks[t], atol=1e-9)
    assert filt.K.shape == (2, 2) and filt.y.shape == (2,) and filt.S.shape == (2, 2)
    np.testing.assert_array_equal(filt.Q, LINEAR.Q)
    # R for one step only, as filterpy's update(z, R)
    other = cls(LINEAR).initialize(filt.x, filt.P)
    filt.predict()
    filt.update(obs[0], R=4 * LINEAR.R)
    other.R = 4 * LINEAR.R
    other.predict()
    other.update(obs[0])
    np.testing.assert_allclose(filt.x, other.x, atol=1e-12)
    np.testing.assert_array_equal(filt.R, LINEAR.R)
    with pytest.raises(ValueError, match="u: LinearGaussian takes no control input"):
        filt.predict(u=np.ones(2))
    with pytest.raises(ValueError, match=r"R: expected a covariance of shape \(2, 2\), got shape \(3, 3\)"):
        filt.update(obs[0], R=np.eye(3))
    # filterpy reads a number as that variance times the identity; said rather than guessed (the
    # message spoke of an array of samples and features before)
    with pytest.raises(ValueError, match=r"^R: expected a covariance of shape \(2, 2\), got shape \(\) \(a "
                                         r"variance v on every coordinate is v \* np.eye\(2\)\)"):
        filt.update(obs[0], R=0.5)
    with pytest.raises(ValueError, match=r"^Q: expected a covariance of shape \(2, 2\), got shape \(2,\)$"):
        filt.Q = np.ones(2)
    with pytest.raises(ValueError, match="x: expected"):
        filt.x = np.zeros(3)


def test_x_p_q_and_r_of_a_belief_that_is_not_their_gaussian_are_not_assigned():
    # filterpy sets the belief when x is assigned; a filter whose belief is weights over training
    # states, particles or a mixture took the assignment and went on from its old belief
    states, obs = Oscillation().simulate(200, rng=0)
    filters = {"reset(prior=...)": [kb.KernelBayesFilter().fit(states, obs),
                                    kb.KernelMonteCarloFilter(motion=Oscillation(), random_state=0).fit(states, obs)],
               "initialize(x0, P0)": [ParticleFilter(Oscillation(), n_particles=200, rng=0),
                                      kb.filters.InteractingMultipleModel([Oscillation(), Rotation()])],
               "reset()": [kb.filters.NearestImage().fit(states, obs)]}
    nnpf = kb.filters.NearestNeighbourParticleFilter(motion=Oscillation(), n_particles=50, random_state=0)
    with pytest.raises(AttributeError, match=r"^particles: .* reset\(\) draws them afresh$"):
        nnpf.fit(states, obs).particles = np.zeros((50, 2))
    for how, group in filters.items():
        for filt in group:
            filt.batch_filter(obs[:5])
            x, P = filt.x.copy(), filt.P.copy()
            for name, value in (("x", np.zeros(2)), ("P", np.eye(2))):
                message = rf"^{name}: {type(filt).__name__}'s estimate .*{re.escape(how)}"
                with pytest.raises(AttributeError, match=message):
                    setattr(filt, name, value)
            np.testing.assert_array_equal(filt.x, x)
            np.testing.assert_array_equal(filt.P, P)
            # a particle filter's particles neither: assigned alone they would keep the old weights and estimate
            if hasattr(filt, "particles"):
                setting = re.escape(how.replace("...", "samples"))
                with pytest.raises(AttributeError, match=rf"^particles: {type(filt).__name__}'s particles are its "
                                                         rf"belief, .*set them with {setting}"):
                    filt.particles = np.zeros_like(filt.particles)
            # nor do they hold a noise covariance: a filterpy user's R went unused
            for name in ("Q", "R"):
                with pytest.raises(AttributeError, match=rf"^{name}: {type(filt).__name__} takes its noise from "):
                    setattr(filt, name, np.eye(2))
                assert not hasattr(filt, name)
    # the kernel Bayes filter's weights are set by reset(weights=...), which checks them: assigned,
    # a wrong length failed in numpy's matmul at the next step, the local path lost its support
    # ('NoneType' object has no attribute 'size'), and x kept the old belief's mean
    for approximation in ("exact", "local"):
        kbf = kb.KernelBayesFilter(approximation=approximation).fit(states, obs)
        kbf.batch_filter(obs[:5])
        before = kbf.weights.copy()
        with pytest.raises(AttributeError, match=r"^weights: set the belief with reset\(weights=\.\.\.\)"):
            kbf.weights = np.full(len(states), 1.0 / len(states))
        with pytest.raises(ValueError, match="read-only"):  # nor in place: the array is the belief
            kbf.weights[0] = 5.0
        np.testing.assert_array_equal(kbf.weights, before)
        one = np.zeros(len(states))
        one[10] = 1.0
        np.testing.assert_allclose(kbf.reset(weights=one).x, states[10])
        # given where samples go, they are refused with the call that takes them (they had been told
        # only that their shape was not a sample's)
        with pytest.raises(ValueError, match=rf"got {len(states)} values, one a training state: .* reset\(weights="):
            kbf.reset(one)
        # the predicted weights stay assignable (a prior built by hand) but are checked, and the
        # next update starts from them on either path: a hand-made copy gives the same update
        kbf.predict()
        prior = kbf.weights_prior.copy()
        # all zeros is no belief: the local path failed at the next step, the others estimated the origin
        wrong = ((prior[:-1], f"expected length {len(states)}"), (np.full(len(states), np.nan), "contains NaN"),
                 (np.zeros(len(states)), "expected weights with a nonzero entry, got all zeros"))
        for bad, expected in wrong:
            with pytest.raises(ValueError, match=rf"^weights_prior: {expected}"):
                kbf.weights_prior = bad
        np.testing.assert_array_equal(kbf.weights_prior, prior)
        kbf.update(obs[5])
        posterior = kbf.weights.copy()
        kbf.reset(weights=one).predict()
        kbf.weights_prior = list(prior)
        kbf.update(obs[5])
        np.testing.assert_allclose(kbf.weights, posterior, rtol=1e-12, atol=1e-15)
    # the Kalman filters' belief is N(x, P): assigning sets it, and they take Q and R
    ekf = ExtendedKalman(Oscillation())
    ekf.x, ekf.P = np.ones(2), np.eye(2)
    assert ekf.initialized and np.array_equal(ekf.x, np.ones(2))
    ekf.R = 2 * np.eye(2)
    np.testing.assert_array_equal(ekf.R, 2 * np.eye(2))
    # with a scalar state weights and samples have one shape: values that look like weights are read
    # as samples, as documented, and the user is told where weights go
    ar1 = LinearGaussian([[0.9]], [[1.0]], [[0.1]], [[0.2]])
    x1, z1 = ar1.simulate(100, rng=0)
    kbf = kb.KernelBayesFilter().fit(x1, z1)
    with pytest.warns(UserWarning, match=r"prior: 100 non-negative values summing to 1, .* reset\(weights=\.\.\.\)"):
        kbf.reset(kbf.weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        kbf.reset(weights=kbf.weights)
        kbf.reset(x1[:, 0])  # samples of the state


@pytest.mark.parametrize("make", [lambda: ExtendedKalman(Oscillation()), lambda: UnscentedKalman(Oscillation()),
                                  lambda: ParticleFilter(Oscillation(), n_particles=200, rng=0)])
def test_baselines_pickle_and_continue_identically(make):
    import pickle

    _, obs = Oscillation().simulate(30, rng=2)
    filt = make()
    filt.batch_filter(obs[:15])
    twin = pickle.loads(pickle.dumps(filt))
    np.testing.assert_array_equal(twin.batch_filter(obs[15:])[0], filt.batch_filter(obs[15:])[0])


def test_particle_filter_log_likelihood_estimates_the_exact_one():
    _, obs = LINEAR.simulate(60, rng=4)
    _, logliks = exact_kalman(LINEAR, obs[1:], *LINEAR.initial_belief(obs[0]))
    pf = ParticleFilter(LINEAR, n_particles=5000, rng=0)
    pf.initialize(*LINEAR.initial_belief(obs[0]))
    estimate = []
    for z in obs[1:]:
        pf.predict()
        pf.update(z)
        estimate.append(pf.log_likelihood)
    # the log of an unbiased likelihood estimate: off by O(steps / n_particles) in total
    assert abs(np.sum(estimate) - np.sum(logliks)) < 0.5
    np.testing.assert_allclose(estimate, logliks, atol=0.15)


def test_particle_filter_resamples_only_below_its_ess_threshold():
    _, obs = LINEAR.simulate(100, rng=5)
    exact, _ = exact_kalman(LINEAR, obs[1:], *LINEAR.initial_belief(obs[0]))
    counts, errors = {}, {}
    for threshold in (1.0, 0.5):
        pf = ParticleFilter(LINEAR, n_particles=3000, rng=1, ess_threshold=threshold)
        pf.initialize(*LINEAR.initial_belief(obs[0]))
        resampled, means = 0, []
        for z in obs[1:]:
            pf.predict()
            pf.update(z)
            resampled += pf.resampled
            assert pf.resampled == (threshold == 1.0 or pf.ess < threshold * 3000)
            means.append(pf.x)
        counts[threshold], errors[threshold] = resampled, np.mean(np.sum((np.array(means) - exact) ** 2, axis=1))
    assert counts[1.0] == 99 and counts[0.5] < 99
    assert errors[0.5] < 5e-3 and errors[1.0] < 5e-3
    with pytest.raises(RuntimeError, match="no particles yet"):
        ParticleFilter(LINEAR).predict()
    with pytest.raises(ValueError, match="ess_threshold: expected a fraction"):
        ParticleFilter(LINEAR, ess_threshold=2)


def test_gaussian_filters_take_a_known_control_and_equal_the_kalman_filter():
    system = kb.systems.ControlledLinearGaussian(F=LINEAR.F, B=[[1.0, 0.0], [0.5, 0.3]], H=LINEAR.H, Q=LINEAR.Q,
                                                 R=LINEAR.R, control_scale=0.5)
    states, controls, obs = system.simulate(60, rng=3)
    kf = KalmanFilter(dim_x=2, dim_z=2, dim_u=2)
    kf.F, kf.B, kf.H, kf.Q, kf.R = system.F, system.B, system.H, system.Q, system.R
    kf.x, kf.P = np.zeros((2, 1)), system.stationary_cov.copy()
    exact = []
    for u, z in zip(controls, obs):
        kf.predict(u=u[:, None])
        kf.update(z[:, None])
        exact.append(kf.x[:, 0].copy())
    for cls in (ExtendedKalman, UnscentedKalman):
        filt = cls(system).initialize(np.zeros(2), system.stationary_cov)
        means = filt.batch_filter(obs, us=controls)[0]
        np.testing.assert_allclose(means, exact, atol=1e-9)
        with pytest.raises(ValueError, match="u: ControlledLinearGaussian's motion needs a control"):
            filt.predict()
        with pytest.raises(ValueError, match=r"u: expected a control of shape \(2,\), got shape \(3,\)"):
            filt.predict(u=[1.0, 2.0, 3.0])
    # the system's own motion, given a complex control, kept its real part with only numpy's warning
    with pytest.raises(ValueError, match="u: expected real control values, got an array of dtype complex128"):
        system.transition_mean(states[:3], u=[1.0 + 1j, 2.0])
    # the particle filter with the same model: close to the exact means
    pf = ParticleFilter(system, n_particles=4000, rng=0).initialize(np.zeros(2), system.stationary_cov)
    means = pf.batch_filter(obs, us=controls)[0]
    # measured: 0.0018 of the Kalman filter's own MSE
    assert np.mean((means - exact) ** 2) < 0.01 * np.mean((np.array(exact) - states) ** 2)


class _Unicycle(kb.systems.System):
    """Position and heading, moved by a control (speed, turn rate); its position fixed."""

    dim_x, dim_z, dim_u, obs_shape = 3, 2, 2, (2,)
    process_cov = np.diag([0.05, 0.05, 0.02]) ** 2
    observation_cov = 0.25 * np.eye(2)

    def transition_mean(self, X, u=None):
        speed, turn = np.broadcast_to(u, (len(X), 2)).T
        return np.column_stack([X[:, 0] + speed * np.cos(X[:, 2]), X[:, 1] + speed * np.sin(X[:, 2]), X[:, 2] + turn])

    def observe_mean(self, X):
        return X[:, :2]


def test_the_ekf_linearises_a_controlled_transition_under_its_control():
    """A unicycle's heading moves its position by the speed it is given: the EKF's Jacobian must be
    taken under the step's control (it was taken without one, and the prediction's covariance
    never carried the heading's uncertainty into the position)."""
    system = _Unicycle()
    x0, P0, u = np.array([1.0, 2.0, 0.3]), np.diag([0.2, 0.1, 0.05]), np.array([1.5, 0.1])
    ekf = ExtendedKalman(system).initialize(x0, P0)
    ekf.predict(u)
    speed, heading = u[0], x0[2]
    F = np.array([[1.0, 0.0, -speed * np.sin(heading)], [0.0, 1.0, speed * np.cos(heading)], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(ekf.x, system.transition_mean(x0[None], u)[0], atol=1e-12)
    np.testing.assert_allclose(ekf.P, F @ P0 @ F.T + system.process_cov, atol=1e-8)
    # a closed-form Jacobian written without the control is called without it; one that is no
    # (dim_x, dim_x) array of finite values is named
    class Constant(_Unicycle):
        def transition_jacobian(self, x):
            return np.eye(3)

    ekf = ExtendedKalman(Constant()).initialize(x0, P0)
    ekf.predict(u)
    np.testing.assert_allclose(ekf.P, P0 + system.process_cov, atol=1e-12)

    class Flat(_Unicycle):
        def transition_jacobian(self, x, u=None):
            return np.ones(3)

    with pytest.raises(ValueError, match=r"^Flat.transition_jacobian: expected a finite array of shape \(3, 3\), got "
                                         r"shape \(3,\)$"):
        ExtendedKalman(Flat()).initialize(x0, P0).predict(u)

    class Blind(_Unicycle):
        def observation_jacobian(self, x):
            return np.full((2, 3), np.nan)

    with pytest.raises(ValueError, match=r"^Blind.observation_jacobian: expected a finite array of shape \(2, 3\), "
                                         r"got NaN or infinite values$"):
        ExtendedKalman(Blind()).initialize(x0, P0).update([1.0, 2.0])

    class Complex(_Unicycle):
        def transition_jacobian(self, x, u=None):
            return np.eye(3) + 1j * np.eye(3)

    with pytest.raises(ValueError, match=r"^Complex.transition_jacobian: expected real values, got an array of dtype "
                                         r"complex128$"):
        ExtendedKalman(Complex()).initialize(x0, P0).predict(u)


def test_a_controlled_system_of_ones_own_is_simulated_by_a_policy_and_filtered_with_its_controls():
    class Driven(_Unicycle):
        def initial_state(self, rng):
            return np.zeros(3)

    system = Driven()
    # System.simulate drives no control: it had handed the model u=None (a TypeError inside it)
    with pytest.raises(ValueError, match=r"^Driven.simulate: a controlled system \(dim_u = 2\) is driven by controls; "
                                         r"simulate it with kbfilter.systems.controlled_run"):
        system.simulate(10, rng=0)
    turn = lambda x, rng: np.array([0.5, 0.1 * np.sign(np.sin(x[2]) + 0.5)])  # noqa: E731
    states, controls, obs = kb.systems.controlled_run(system, 80, turn, rng=0, burn_in=5)
    again = kb.systems.controlled_run(system, 80, turn, rng=0, burn_in=5)
    assert all(np.array_equal(a, b) for a, b in zip((states, controls, obs), again))
    assert states.shape == (80, 3) and controls.shape == (80, 2) and obs.shape == (80, 2)
    # each control is the policy's at the state before it
    np.testing.assert_array_equal(controls[1:], [turn(x, None) for x in states[:-1]])
    ekf = ExtendedKalman(system).initialize(states[0], 0.01 * np.eye(3))
    means = ekf.batch_filter(obs[1:], us=controls[1:])[0]
    assert np.mean(np.sum((means[:, :2] - states[1:, :2]) ** 2, axis=1)) < 0.5 * np.mean(
        np.sum((obs[1:] - states[1:, :2]) ** 2, axis=1))
    # a step without its control is refused for every filter of the model (None had gone into the
    # model's arithmetic: "unsupported operand type(s) for *: 'NoneType' and 'float'")
    for filt in (ExtendedKalman(system), UnscentedKalman(system), ParticleFilter(system, n_particles=20, rng=0)):
        with pytest.raises(ValueError, match=r"^u: Driven's motion needs a control of shape \(2,\) at every step; "
                                             r"got None$"):
            filt.initialize(states[0], 0.01 * np.eye(3)).predict()
    # a policy's control of the wrong length would have broadcast into the model
    with pytest.raises(ValueError, match=r"^policy\(x, rng\) at step 0: expected a control of shape \(2,\), got "
                                         r"shape \(1,\)$"):
        kb.systems.controlled_run(system, 5, lambda x, rng: np.array([0.5]))
    with pytest.raises(ValueError, match=r"^policy: expected a callable policy\(x, rng\) giving each step's control, "
                                         r"got ndarray$"):
        kb.systems.controlled_run(system, 5, np.array([0.5, 0.1]))


def test_a_noise_covariance_written_as_a_method_is_named():
    class Methods(_Unicycle):
        def process_cov(self):
            return np.eye(3)

    with pytest.raises(ValueError, match=r"^Methods.process_cov: expected a \(3, 3\) array \(a class attribute, "
                                         r"one set in __init__, or a property\), got a method$"):
        ExtendedKalman(Methods())


def test_batch_filter_continues_from_the_current_belief_and_reset_starts_afresh():
    states, obs = kb.systems.Rotation().simulate(300, rng=0)
    kbf = kb.KernelBayesFilter().fit(states[:250], obs[:250])
    first = kbf.batch_filter(obs[250:260])[0]
    continued = kbf.batch_filter(obs[250:260])[0]           # starts where the first run ended
    again = kbf.reset().batch_filter(obs[250:260])[0]
    np.testing.assert_array_equal(again, first)
    assert not np.allclose(continued[0], first[0])


def test_the_oscillation_takes_a_whole_number_of_oscillations_a_turn():
    assert kb.systems.Oscillation(M=3.0).M == 3
    with pytest.raises(ValueError, match="M: expected a whole number of oscillations a turn, got 2.5"):
        kb.systems.Oscillation(M=2.5)
    # with a whole M the radius is a function of the point: the same either side of theta = +-pi
    system = kb.systems.Oscillation(M=3)
    np.testing.assert_allclose(system.transition_mean([[-1.0, 1e-12]]), system.transition_mean([[-1.0, -1e-12]]),
                               atol=1e-9)


def test_a_particle_count_set_after_fit_is_checked_by_name_when_the_particles_are_drawn(rotation_data):
    # reset drew n_particles=0 particles and numpy's "at least 1 samples, got n_samples=0" came
    # back, or a window of 0 steps was called "window"
    (states, obs), _ = rotation_data
    system = Rotation()
    for filt, name, bad in ((KernelMonteCarloFilter(system, n_particles=50, random_state=0), "n_particles", 0),
                            (kb.filters.NearestNeighbourParticleFilter(system, n_particles=50, random_state=0),
                             "n_particles", 0),
                            (kb.LearnedMotionFilter(n_particles=50, random_state=0), "n_particles", 0),
                            (kb.LearnedMotionFilter(n_particles=50, random_state=0), "reacquire_window", 0)):
        filt.fit(states, obs).set_params(**{name: bad})
        with pytest.raises(ValueError, match=rf"^{name}: expected an integer >= "):
            filt.reset()



def test_the_control_dimension_is_a_learned_attribute():
    states, obs = kb.systems.Rotation().simulate(80, rng=0)
    us = np.random.default_rng(1).normal(size=(80, 2))
    assert kb.KernelBayesFilter().fit(states, obs).dim_u_ is None
    assert kb.KernelBayesFilter().fit(states, obs, controls=us).dim_u_ == 2
    with pytest.raises(NotFittedError, match="dim_u_"):
        kb.KernelBayesFilter().dim_u_
