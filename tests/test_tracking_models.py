"""The tracking engineer's models: a range-bearing radar, the coordinated turn, and their IMM."""

import sys

import numpy as np
import pytest
from filterpy.kalman import IMMEstimator
from scipy.stats import multivariate_normal

from kbfilter.filters import ExtendedKalman, InteractingMultipleModel, LearnedMotionFilter, ParticleFilter, \
    UnscentedKalman
from kbfilter.systems import ConstantVelocity, CoordinatedTurn, PositionFixes, RangeBearing, finite_difference_jacobian
from kbfilter.systems.base import predicted_measurement

RADAR = RangeBearing(site=(1000.0, -500.0), range_noise=20.0, bearing_noise=0.005)


def _rmse(means, states):
    return float(np.sqrt(np.mean(np.sum((means[:, :2] - states[:, :2]) ** 2, axis=1))))


def test_the_radar_measures_range_and_bearing_clockwise_from_north():
    site = np.array([1000.0, -500.0])
    points = site + np.array([[0.0, 300.0], [300.0, 0.0], [0.0, -300.0], [-300.0, 0.0]])
    np.testing.assert_allclose(RADAR.observe_mean(points), [[300, 0], [300, np.pi / 2], [300, np.pi], [300, -np.pi / 2]],
                               atol=1e-12)
    # the position a first observation says inverts it, and its covariance is the Jacobian's image of R
    for p in points:
        mean, cov = RADAR.position_belief(RADAR.observe_mean(p[None])[0])
        np.testing.assert_allclose(mean, p, atol=1e-9)
        J = np.linalg.inv(RADAR.position_jacobian(p))
        np.testing.assert_allclose(cov, J @ RADAR.observation_cov @ J.T, rtol=1e-9, atol=1e-9)


def test_the_radar_jacobian_loglik_and_residual_are_the_closed_forms():
    p = np.array([1450.0, 700.0])
    np.testing.assert_allclose(RADAR.position_jacobian(p), finite_difference_jacobian(RADAR.observe_mean, p),
                               rtol=1e-7)
    # across the bearing's wrap: pi - 0.01 and -pi + 0.01 are 0.02 apart, not 2 pi - 0.02
    np.testing.assert_allclose(RADAR.residual(np.array([5.0, -np.pi + 0.01]), np.array([4.0, np.pi - 0.01])),
                               [1.0, 0.02], atol=1e-12)
    z = np.array([1300.0, -np.pi + 0.002])
    X = np.array([[1000.0 - 10.0, -500.0 - 1290.0], [1000.0 + 40.0, -500.0 - 1310.0]])
    expected = [multivariate_normal(np.zeros(2), RADAR.observation_cov).logpdf(RADAR.residual(z, m))
                for m in RADAR.observe_mean(X)]
    np.testing.assert_allclose(RADAR.observation_loglik(z, X), expected, rtol=1e-12)
    # the circular mean of bearings on both sides of the wrap is near pi, not near 0
    assert abs(abs(RADAR.average(np.array([[1.0, np.pi - 0.1], [3.0, -np.pi + 0.1]]), np.array([0.5, 0.5]))[1])
               - np.pi) < 1e-12
    # and so is a predicted measurement of a bare radar: its own average and residual, not numpy's
    # (a plain mean of those bearings is near 0, and their spread about it near pi^2)
    mean, spread, residuals = predicted_measurement(RADAR, X, np.array([0.5, 0.5]))
    assert abs(abs(mean[1]) - np.pi) < 0.05 and spread[1, 1] < 1e-3 and np.all(np.abs(residuals[:, 1]) < 0.05)


def test_the_kalman_filters_follow_a_target_across_the_radars_bearing_wrap():
    # a straight run westwards south of the site: the bearing jumps from -pi to pi halfway
    cv = ConstantVelocity(step=1.0, accel=0.05, sensor=RADAR, speed=30.0)
    t = np.arange(120.0)
    states = np.column_stack([1600.0 - 10.0 * t, np.full_like(t, -2500.0), np.full_like(t, -10.0), np.zeros_like(t)])
    zs = RADAR.observe(states, rng=0)
    assert np.any(zs[:, 1] > 3.0) and np.any(zs[:, 1] < -3.0)
    for filt in (ExtendedKalman(cv), UnscentedKalman(cv)):
        means = filt.batch_filter(zs)[0]
        # range noise 20 m and bearing noise 0.005 rad x 2 km = 10 m: tracked to about that
        assert _rmse(means[20:], states[20:]) < 20.0, type(filt).__name__
    pf_means = ParticleFilter(cv, n_particles=2000, rng=0).batch_filter(zs)[0]
    assert _rmse(pf_means[20:], states[20:]) < 25.0


def test_the_coordinated_turn_is_constant_velocity_without_a_turn_and_a_circle_with_one():
    ct = CoordinatedTurn(step=2.0, accel=0.1, turn_noise=0.01)
    cv = ConstantVelocity(step=2.0, accel=0.1)
    x = np.array([[10.0, -20.0, 3.0, 4.0]])
    for w in (0.0, 1e-12, -1e-12):
        np.testing.assert_allclose(ct.transition_mean(np.c_[x, w])[0, :4], cv.transition_mean(x)[0], atol=1e-9)
    np.testing.assert_allclose(CoordinatedTurn(2.0, turning=False).transition_mean(np.c_[x, 0.3]),
                               np.c_[cv.transition_mean(x), 0.0])
    # a target on a circle of radius 50 m about the origin at 5 m/s: omega = 0.1 rad/s, stays on it
    state = np.array([[50.0, 0.0, 0.0, 5.0, 0.1]])
    for k in range(1, 40):
        state = ct.transition_mean(state)
        angle = 0.1 * 2.0 * k
        np.testing.assert_allclose(state[0, :2], 50.0 * np.array([np.cos(angle), np.sin(angle)]), atol=1e-9)
        np.testing.assert_allclose(state[0, 2:4], 5.0 * np.array([-np.sin(angle), np.cos(angle)]), atol=1e-9)


def test_the_turn_noise_is_chosen_on_training_tracks_by_the_stated_rule():
    t = np.arange(200.0)
    circle = np.column_stack([50 * np.cos(0.1 * t), 50 * np.sin(0.1 * t), -5 * np.sin(0.1 * t), 5 * np.cos(0.1 * t)])
    at_rest = np.zeros((30, 4))
    fitted = CoordinatedTurn.fitted([circle, at_rest], step=1.0)
    assert fitted.turn_noise < 1e-6 + 1e-9     # a constant turn rate does not change; the resting track has none
    rng = np.random.default_rng(0)
    rates = 0.1 + np.cumsum(0.02 * rng.standard_normal(300))
    headings = np.cumsum(rates)
    wandering = np.column_stack([np.zeros(300), np.zeros(300), 5 * np.sin(headings), 5 * np.cos(headings)])
    noise = CoordinatedTurn.fitted([wandering], step=1.0).turn_noise
    assert noise == pytest.approx(np.sqrt(np.mean(np.diff(rates[1:]) ** 2)), rel=1e-6)


def test_noises_fitted_on_tracks_that_cannot_give_them_are_refused_by_name():
    rng = np.random.default_rng(1)
    track = np.cumsum(rng.normal(size=(60, 4)), axis=0)
    straight = np.column_stack([5.0 * np.arange(60.0), np.zeros(60), np.full(60, 5.0), np.zeros(60)])
    for model in (ConstantVelocity, CoordinatedTurn):
        # one array is one track, as a list of it is
        assert model.fitted(track, step=2.0).accel == model.fitted([track], step=2.0).accel
        # velocities that never change: an acceleration noise of 0, refused as accel=0 the user never gave
        with pytest.raises(ValueError, match="tracks: no velocity changes from one row to the next"):
            model.fitted([straight, np.zeros((20, 4))], step=2.0)
        for tracks, message in [([], "tracks: expected at least one training track, got none"),
                                ([track, track[:1]], r"tracks\[1\]: expected at least 2 samples"),
                                ([track[:, :3]], r"tracks\[0\]: expected 4 columns"),
                                (3.0, r"tracks: expected a list of \(n_i, 4\) arrays")]:
            with pytest.raises(ValueError, match=message):
                model.fitted(tracks, step=2.0)


def _manoeuvre(rng):
    """Straight north, a left turn of 90 degrees at 0.1 rad/s, straight west again: 1-second steps."""
    speed, rows = 10.0, []
    x = np.array([0.0, 0.0, 0.0, speed, 0.0])
    ct = CoordinatedTurn(step=1.0, accel=0.01, turn_noise=1e-4)
    for k in range(120):
        x[4] = 0.1 if 40 <= k < 56 else 0.0
        x = ct.transition_mean(x[None])[0]
        rows.append(x.copy())
    states = np.array(rows)
    return states, PositionFixes(3.0).observe(states, rng=rng)


def test_the_imm_of_straight_and_turning_models_tracks_a_manoeuvre_and_knows_which_it_is_in():
    states, zs = _manoeuvre(0)
    sensor = PositionFixes(3.0)
    straight = CoordinatedTurn(1.0, 0.05, 0.02, sensor, speed=20.0, turning=False)
    turning = CoordinatedTurn(1.0, 0.05, 0.02, sensor, speed=20.0)
    imm = InteractingMultipleModel([straight, turning], switch=0.05)
    probabilities = []
    means = []
    for t, z in enumerate(zs):
        if t == 0:
            means.append(imm.batch_filter(zs[:1])[0][0])
        else:
            imm.predict()
            imm.update(z)
            means.append(imm.x.copy())
        probabilities.append(imm.mu[1])
    means = np.array(means)
    only_straight = ExtendedKalman(straight).batch_filter(zs)[0]
    only_turning = ExtendedKalman(turning).batch_filter(zs)[0]
    assert _rmse(means[10:], states[10:]) < _rmse(only_straight[10:], states[10:])
    assert _rmse(means[10:], states[10:]) < 1.1 * _rmse(only_turning[10:], states[10:])
    assert np.mean(probabilities[46:56]) > 0.5 > np.mean(probabilities[90:])


def test_the_imm_is_filterpys_recursion_and_a_missing_measurement_leaves_its_model_probabilities_predicted():
    states, zs = _manoeuvre(1)
    sensor = PositionFixes(3.0)
    models = [CoordinatedTurn(1.0, 0.05, 0.02, sensor, speed=20.0, turning=t) for t in (False, True)]
    x0, P0 = models[0].initial_belief(zs[0])
    ours = InteractingMultipleModel(models, switch=0.05).initialize(x0, P0)
    reference = IMMEstimator([ExtendedKalman(m).initialize(x0, P0) for m in models], np.array([0.5, 0.5]), ours.M)
    for z in zs[1:40]:
        for filt in (ours, reference):
            filt.predict()
            filt.update(z)
        np.testing.assert_allclose(ours.x, reference.x, atol=1e-8)
        np.testing.assert_allclose(ours.P, reference.P, atol=1e-8)
        np.testing.assert_allclose(ours.mu, reference.mu, atol=1e-12)
    ours.predict()
    predicted = ours.mu.copy()
    ours.update(None)
    np.testing.assert_array_equal(ours.mu, predicted)
    assert ours.log_likelihood is None
    np.testing.assert_array_equal(ours.x_post, ours.x_prior)


def test_the_imms_innovation_is_that_of_its_predicted_mixture_of_the_models_observations():
    states, _ = _manoeuvre(2)
    zs = RADAR.observe(states, rng=2)
    models = [CoordinatedTurn(1.0, 0.05, 0.02, RADAR, speed=20.0, turning=t) for t in (False, True)]
    imm = InteractingMultipleModel(models, switch=0.05)
    imm.batch_filter(zs[:50])
    assert imm.mahalanobis is not None
    imm.predict()
    c = imm.mu.copy()  # the predicted model probabilities
    imm.update(zs[50])
    # brute force: draws of the predicted observation from the mixture of the models' Gaussians
    rng = np.random.default_rng(0)
    picks = rng.choice(2, size=400_000, p=c)
    draws = np.empty((len(picks), 2))
    for j, f in enumerate(imm.filters):
        predicted = zs[50] - f.y
        draws[picks == j] = rng.multivariate_normal(predicted, f.S, size=int(np.sum(picks == j)))
    y = zs[50] - draws.mean(axis=0)
    assert np.all(np.abs(imm.y - y) < 5 * np.sqrt(np.diag(imm.S) / len(draws))), (imm.y, y)
    np.testing.assert_allclose(imm.S, np.cov(draws.T), rtol=0.02)
    assert imm.mahalanobis == pytest.approx(np.sqrt(imm.y @ np.linalg.solve(imm.S, imm.y)))
    # one model twice is that model's Kalman filter
    model = models[1]
    twice = InteractingMultipleModel([model, model]).initialize(*model.initial_belief(zs[0]))
    single = ExtendedKalman(model).initialize(*model.initial_belief(zs[0]))
    for z in zs[1:30]:
        for filt in (twice, single):
            filt.predict()
            filt.update(z)
        np.testing.assert_allclose(twice.y, single.y, atol=1e-9)
        np.testing.assert_allclose(twice.S, single.S, rtol=1e-9, atol=1e-9 * np.abs(single.S).max())


def test_no_filter_reports_a_previous_steps_innovation_after_a_missing_observation():
    # filterpy's EKF and UKF keep the last update's y, S and log-likelihood through update(None),
    # so a run with dropouts counted them twice; the particle filter's log-likelihood was kept too
    states, zs = _manoeuvre(3)
    model = CoordinatedTurn(1.0, 0.05, 0.02, PositionFixes(3.0), speed=20.0)
    x0, P0 = model.initial_belief(zs[0])
    for filt in (ExtendedKalman(model), UnscentedKalman(model), ParticleFilter(model, n_particles=500, rng=0),
                 InteractingMultipleModel([model, CoordinatedTurn(1.0, 0.05, 0.02, PositionFixes(3.0), speed=20.0,
                                                                  turning=False)])):
        filt.initialize(x0, P0)
        assert filt.log_likelihood is None and filt.y is None, type(filt).__name__
        filt.predict()
        filt.update(zs[1])
        assert np.isfinite(filt.log_likelihood) and filt.y.shape == (2,) and filt.mahalanobis > 0
        filt.predict()
        filt.update(None)
        assert filt.log_likelihood is None and filt.y is None and filt.S is None and filt.mahalanobis is None, \
            type(filt).__name__


def test_the_particle_filters_have_filterpys_likelihood_as_the_kalman_filters_do():
    # the particle filter and the learned-motion filter kept a log_likelihood and no likelihood, so code
    # written against a Kalman filter's likelihood failed on them (the IMM's would be filterpy's per-model
    # array: it keeps mu)
    cv = ConstantVelocity(step=1.0, accel=0.5, sensor=PositionFixes(3.0), speed=10.0)
    tracks, fixes = cv.simulate(300, rng=0)
    for filt in (ExtendedKalman(cv), ParticleFilter(cv, n_particles=300, rng=0),
                 LearnedMotionFilter(cv, inputs=(2, 3), n_particles=300, random_state=0).fit(tracks, fixes)):
        filt.batch_filter(fixes[:2])
        assert filt.likelihood == max(np.exp(filt.log_likelihood), sys.float_info.min) > 0, type(filt).__name__
        # a fix far out: a log-likelihood below what exp can represent, floored as filterpy floors it
        filt.predict()
        filt.update(fixes[2] + 1e6)
        assert filt.likelihood == sys.float_info.min, type(filt).__name__
        filt.predict()
        filt.update(None)
        assert filt.log_likelihood is None and filt.likelihood is None, type(filt).__name__


def test_a_bearing_error_beyond_what_a_gaussian_on_a_wrapped_angle_describes_is_refused_as_likely_degrees():
    assert RangeBearing(bearing_noise=np.pi / 4).bearing_noise == np.pi / 4
    with pytest.raises(ValueError, match=r"bearing_noise: expected a standard deviation in radians, at most pi/4 "
                                         r"\(45 degrees\), got 2; was it given in degrees\?"):
        RangeBearing(bearing_noise=2.0)


def test_the_imm_refuses_what_it_cannot_mix():
    with pytest.raises(ValueError, match="systems: expected two or more models"):
        InteractingMultipleModel([CoordinatedTurn()])
    # the usual pair says how to write it
    with pytest.raises(ValueError, match=r"systems: expected models with one state and observation size, .*"
                                         r"CoordinatedTurn\(\.\.\., turning=False\)"):
        InteractingMultipleModel([CoordinatedTurn(), ConstantVelocity()])
    for switch in (1.0, 1.5):  # one message above and at 1
        with pytest.raises(ValueError, match=r"^switch: expected a probability in \(0, 1\), got"):
            InteractingMultipleModel([CoordinatedTurn(), CoordinatedTurn(turning=False)], switch=switch)
    with pytest.raises(ValueError, match="kind"):
        InteractingMultipleModel([CoordinatedTurn(), CoordinatedTurn(turning=False)], kind="pf")
    # every model weighs the one observation: a radar's range and bearing are not a position fix,
    # nor is a radar elsewhere the same radar (the models' probabilities would mean nothing)
    fixes, radar = PositionFixes(3.0), RangeBearing((0.0, 0.0))
    elsewhere = RangeBearing((500.0, 0.0))
    for first, other, named in [(fixes, radar, r"\(PositionFixes\) and systems\[1\] \(RangeBearing\)"),
                                (radar, elsewhere, r"\(RangeBearing\) and systems\[1\] \(RangeBearing\)")]:
        with pytest.raises(ValueError, match=f"systems: expected models that observe a state alike .*{named}"):
            InteractingMultipleModel([CoordinatedTurn(sensor=first), CoordinatedTurn(sensor=other, turning=False)])
    # the noises may differ
    noisier = CoordinatedTurn(sensor=PositionFixes(30.0), turning=False)
    InteractingMultipleModel([CoordinatedTurn(sensor=fixes), noisier])
    # a model of one's own whose observation is NaN, or refused, at the comparison's states is not told apart
    # from itself
    class Root(CoordinatedTurn):
        def observe_mean(self, X):
            return np.sqrt(np.asarray(X)[:, :2])

    class NonNegative(CoordinatedTurn):
        def observe_mean(self, X):
            if np.any(np.asarray(X) < 0):
                raise ValueError("X: expected non-negative states")
            return np.asarray(X)[:, :2]

    for cls in (Root, NonNegative):
        assert len(InteractingMultipleModel([cls(), cls(turning=False)]).filters) == 2
    with pytest.raises(RuntimeError, match="no belief yet"):
        InteractingMultipleModel([CoordinatedTurn(), CoordinatedTurn(turning=False)]).predict()
    # one model where a list was expected, and a list holding something else, are named
    with pytest.raises(ValueError, match="systems: expected a list of two or more models, got CoordinatedTurn"):
        InteractingMultipleModel(CoordinatedTurn())
    with pytest.raises(ValueError, match=r"systems\[1\]: expected a kbfilter System, got str"):
        InteractingMultipleModel([CoordinatedTurn(), "turning"])
    # the start the user gave is named as they gave it
    with pytest.raises(ValueError, match="x0: expected length 5"):
        InteractingMultipleModel([CoordinatedTurn(), CoordinatedTurn(turning=False)]).initialize(np.zeros(4), np.eye(5))


def test_roughening_jitters_each_coordinate_by_the_stated_spread():
    from kbfilter.filters.particles import ParticleBelief

    rng = np.random.default_rng(0)
    particles = np.column_stack([rng.uniform(0, 10, 20000), rng.uniform(0, 1, 20000)])
    belief = ParticleBelief(particles.copy())
    belief.roughen(0.2, np.random.default_rng(1))
    moved = belief.particles - particles
    expected = 0.2 * np.ptp(particles, axis=0) * 20000 ** (-1 / 2)
    np.testing.assert_allclose(moved.std(axis=0), expected, rtol=0.03)
    assert np.all(np.abs(moved.mean(axis=0)) < 4 * expected / np.sqrt(20000))


def test_the_learned_motion_filter_gates_radar_observations_with_the_wrapped_bearing():
    from kbfilter import LearnedMotionFilter

    cv = ConstantVelocity(step=1.0, accel=0.05, sensor=RADAR, speed=30.0)
    t = np.arange(120.0)
    track = np.column_stack([1600.0 - 10.0 * t, np.full_like(t, -2500.0), np.full_like(t, -10.0), np.zeros_like(t)])
    training = [track + [0.0, 300.0 * k, 0.0, 0.0] for k in range(1, 4)]
    lmf = LearnedMotionFilter(cv, inputs=(2, 3), n_particles=500, random_state=0).fit(training, [t[:, :2] for t in
                                                                                                 training])
    means = lmf.batch_filter(RADAR.observe(track, rng=0))[0]
    # the bearing jumps from -pi to pi halfway: a residual taken without wrapping would call the track lost
    assert lmf.diagnostics["reacquired"] == 0
    assert _rmse(means[20:], track[20:]) < 30.0


@pytest.mark.parametrize("model", [ConstantVelocity(step=10.0, accel=0.2, sensor=PositionFixes(4.0)),
                                   CoordinatedTurn(step=10.0, accel=0.2, turn_noise=0.01, sensor=PositionFixes(4.0))])
def test_two_fixes_say_the_velocity_between_them_with_the_covariance_of_their_difference(model):
    mean, cov = model.two_point_belief([0.0, 0.0], [200.0, -100.0], steps=2)     # 20 s apart
    np.testing.assert_allclose(mean[:4], [200.0, -100.0, 10.0, -5.0])
    R = 16.0 * np.eye(2)
    np.testing.assert_allclose(cov[:2, :2], R)
    np.testing.assert_allclose(cov[:2, 2:4], R / 20.0)
    np.testing.assert_allclose(cov[2:4, 2:4], 2 * R / 400.0 + (0.2 * 20.0) ** 2 * np.eye(2))
    one = model.initial_belief([200.0, -100.0])      # what one fix says of everything else is kept
    np.testing.assert_allclose(mean[4:], one[0][4:])
    np.testing.assert_allclose(cov[4:, 4:], one[1][4:, 4:])
    np.linalg.cholesky(cov)


def test_two_radar_observations_say_the_velocity_between_the_positions_they_mean():
    radar = RangeBearing((0.0, 0.0), 20.0, 0.002)
    model = ConstantVelocity(step=10.0, accel=0.5, sensor=radar)
    a, b = np.array([[1e4, 0.0, 0, 0]]), np.array([[1e4 + 50.0, 120.0, 0, 0]])
    mean, cov = model.two_point_belief(radar.observe_mean(a)[0], radar.observe_mean(b)[0])
    np.testing.assert_allclose(mean, [1e4 + 50.0, 120.0, 5.0, 12.0], atol=1e-6)
    Ca, Cb = radar.position_belief(radar.observe_mean(a)[0])[1], radar.position_belief(radar.observe_mean(b)[0])[1]
    np.testing.assert_allclose(cov[2:, 2:], (Ca + Cb) / 100.0 + 25.0 * np.eye(2))
    with pytest.raises(ValueError, match="steps"):
        model.two_point_belief([0.0, 1e4], [0.0, 1e4], steps=0)


@pytest.mark.parametrize("make, named", [(lambda: ConstantVelocity(speed=1e300), "speed"),
                                         (lambda: CoordinatedTurn(turn=1e300), "turn"),
                                         (lambda: ConstantVelocity(step=1e90, accel=1e90), "step, accel"),
                                         (lambda: PositionFixes(noise=1e200), "noise"),
                                         (lambda: RangeBearing(range_noise=1e200), "range_noise")])
def test_a_tracking_model_whose_covariances_would_overflow_is_refused_by_name(make, named):
    with pytest.raises(ValueError, match=f"^{named}:"):
        make()
    # the largest admitted values still give finite covariances
    cv = ConstantVelocity(speed=1e100)
    assert np.all(np.isfinite(cv.initial_belief(np.zeros(2))[1]))


def test_a_noise_whose_precision_would_overflow_is_refused_by_name():
    """A fix noise of 1e-200 was admitted, and the likelihood of every fix was NaN."""
    for make, named in [(lambda: PositionFixes(noise=1e-200), "noise"),
                        (lambda: RangeBearing(bearing_noise=1e-200), "bearing_noise"),
                        (lambda: ConstantVelocity(accel=1e-101), "accel")]:
        with pytest.raises(ValueError, match=f"^{named}: expected a positive number at least 1e-100"):
            make()
    # the smallest admitted noise still gives finite log-likelihoods, near the state and far from it
    fixes = PositionFixes(noise=1e-100)
    loglik = fixes.observation_loglik(np.zeros(2), np.array([[0.0, 0.0], [0.0, 1e-100], [5.0, 0.0]]))
    assert np.isfinite(loglik).all() and loglik[2] < -1e200
    assert loglik[0] - loglik[1] == pytest.approx(0.5)   # one standard deviation off


def test_a_bad_rng_is_named_rng_where_the_argument_is_rng():
    # check_rng's default name is random_state, which these signatures do not have
    from kbfilter.filters.motion import LearnedMotion
    from kbfilter.systems import LinearGaussianSensor, dropouts

    X = ConstantVelocity(step=1.0, accel=0.5, speed=10.0).simulate(30, rng=0, burn_in=0)[0]
    calls = [lambda rng: PositionFixes(noise=5.0).observe(X, rng=rng),
             lambda rng: RangeBearing(site=(0.0, 0.0)).observe(X, rng=rng),
             lambda rng: LinearGaussianSensor(np.eye(2, 4), np.zeros(2), np.eye(2), np.zeros(4), np.eye(4)).observe(
                 X, rng=rng),
             lambda rng: dropouts(list(X[:, :2]), rng=rng),
             lambda rng: LearnedMotion(n_neighbors=10).fit(X).sample_transition(X[:2], rng=rng)]
    for call in calls:
        with pytest.raises(ValueError, match="^rng: expected None, a non-negative int"):
            call("seed")
        call(0)  # and a seed works
