import numpy as np
import pytest

import kbfilter as kb
from kbfilter.features import GaussianBlur, LearnedFeatures, RandomFourierFeatures
from kbfilter.filters import ParticleFilter, WindowRegressor
from kbfilter.systems import CameraOrientation, MovingSprite


def test_rendering_is_deterministic_per_seed():
    for system in (MovingSprite(), CameraOrientation()):
        a = system.simulate(5, rng=3)
        b = system.simulate(5, rng=3)
        c = system.simulate(5, rng=4)
        assert np.array_equal(a[1], b[1]) and not np.array_equal(a[1], c[1])
    assert np.array_equal(CameraOrientation(panorama_seed=1).panorama, CameraOrientation(panorama_seed=1).panorama)
    assert not np.array_equal(CameraOrientation(panorama_seed=1).panorama, CameraOrientation(panorama_seed=2).panorama)


def test_sprite_intensity_weighted_centre_tracks_the_rendered_position():
    system = MovingSprite()
    positions = np.random.default_rng(0).uniform(-1.1, 1.1, size=(20, 2))
    images = system.render(positions)
    centres = (np.arange(64) + 0.5) / 64 * 3.0 - 1.5
    mass = images.sum(axis=(1, 2))
    cx = (images.sum(axis=1) * centres[None, :]).sum(axis=1) / mass
    cy = (images.sum(axis=2) * centres[::-1][None, :]).sum(axis=1) / mass
    np.testing.assert_allclose(np.column_stack([cx, cy]), positions, atol=0.01)
    assert 60 < mass.mean() < 90  # about pi * 6 * 4 pixels


def test_sprite_pixel_coordinates_are_the_image_centre_of_mass():
    system = MovingSprite()
    positions = np.random.default_rng(5).uniform(-1.1, 1.1, size=(10, 2))
    images = system.render(positions)
    mass = images.sum(axis=(1, 2))
    cols = (images.sum(axis=1) * np.arange(64)).sum(axis=1) / mass
    rows = (images.sum(axis=2) * np.arange(64)).sum(axis=1) / mass
    np.testing.assert_allclose(system.pixel_coordinates(positions), np.column_stack([cols, rows]), atol=0.2)


def test_camera_pixel_coordinates_find_a_direction_in_the_view():
    system = CameraOrientation()
    view = 6.2                                  # near 2 pi: the offset must wrap
    for k in (-20, -3, 0, 7, 23):
        direction = view + k * 2 * np.pi / system.panorama_width
        state, latent = [[np.cos(direction), np.sin(direction)]], [[np.cos(view), np.sin(view)]]
        col = system.pixel_coordinates(state, latent)[0, 0]
        assert col == pytest.approx(system.width / 2 + k, abs=1e-6)
        # what the view shows in that column is what a view at the direction shows in its centre
        np.testing.assert_allclose(system.render([view])[0][:, int(round(col))],
                                   system.render([direction])[0][:, system.width // 2], atol=1e-6)


def test_camera_view_is_continuous_across_two_pi():
    system = CameraOrientation()
    eps = 1e-4
    below, above = system.render([2 * np.pi - eps, eps])
    assert np.max(np.abs(below - above)) < 0.02
    # and a whole field of view away it is a different picture
    far = system.render([np.pi / 3])[0]
    assert np.mean(np.abs(far - above)) > 0.05
    # angles differing by 2 pi give the same view
    np.testing.assert_allclose(system.render([0.3])[0], system.render([0.3 + 2 * np.pi])[0], atol=1e-9)


def test_pixel_loglik_prefers_the_true_position():
    system = MovingSprite()
    rng = np.random.default_rng(1)
    states, images = system.simulate(3, rng)
    candidates = np.vstack([states[0], states[0] + [0.3, 0.0], states[0] + [0.0, -0.3]])
    ll = system.observation_loglik(images[0], candidates)
    assert np.argmax(ll) == 0


def test_learned_features_separate_states_better_than_raw_pixels():
    """Toy problem: the state is a 1-D position; the image a noisy bump at it. Nearest neighbours
    in the learned feature space have closer states than nearest neighbours in pixel space."""
    rng = np.random.default_rng(2)
    n = 400
    x = rng.uniform(-1, 1, size=(n, 1))
    grid = np.linspace(-1, 1, 60)
    images = np.exp(-((grid[None, :] - x) ** 2) / (2 * 0.05**2)) + 0.5 * rng.normal(size=(n, 60))
    feats = LearnedFeatures(n_pca=None, hidden_layer_sizes=(32, 8), max_iter=300).fit(images, x).transform(images)

    def neighbour_error(F):
        D = ((F[:, None] - F[None]) ** 2).sum(-1)
        np.fill_diagonal(D, np.inf)
        return np.mean((x[:, 0] - x[D.argmin(axis=1), 0]) ** 2)

    assert neighbour_error(feats) < 0.5 * neighbour_error(images)


def test_random_fourier_features_approximate_the_gaussian_kernel():
    Z = np.random.default_rng(3).normal(size=(50, 4))
    rff = RandomFourierFeatures(n_components=20000, random_state=0).fit(Z)
    Phi = rff.transform(Z)
    exact = kb.GaussianKernel(rff.bandwidth_)(Z)
    assert np.max(np.abs(Phi @ Phi.T - exact)) < 0.05


def test_gaussian_blur_of_an_impulse_is_the_sampled_gaussian():
    sigma, radius = 1.5, 5  # scipy truncates at 3 sigma: int(3 * 1.5 + 0.5) = 5 pixels
    g = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    g /= g.sum()
    image = np.zeros((3, 20, 24, 3))
    image[0, 9, 11, 1] = 1.0       # one lit pixel in the green channel
    image[1] = np.random.default_rng(0).normal(size=(20, 24, 3))
    image[2, 0, 0, 0] = 1.0        # at the corner: the zero padding cuts the kernel
    blur = GaussianBlur(sigma=sigma, image_shape=(20, 24, 3)).fit(image.reshape(3, -1))
    out = blur.transform(image.reshape(3, -1)).reshape(3, 20, 24, 3)
    expected = np.zeros((20, 24))
    expected[9 - radius:9 + radius + 1, 11 - radius:11 + radius + 1] = np.outer(g, g)
    np.testing.assert_allclose(out[0, :, :, 1], expected, atol=1e-12)
    assert np.all(out[0, :, :, [0, 2]] == 0)   # channels are not mixed
    np.testing.assert_allclose(out[2, :radius + 1, :radius + 1, 0], np.outer(g[radius:], g[radius:]), atol=1e-12)
    # brute force: the convolution as a sum over pixels, zero outside the image
    rows, cols = np.arange(20)[:, None, None, None], np.arange(24)[None, :, None, None]
    r, c = np.arange(20)[None, None, :, None], np.arange(24)[None, None, None, :]
    near = (np.abs(rows - r) <= radius) & (np.abs(cols - c) <= radius)
    weight = np.where(near, g[np.clip(rows - r + radius, 0, 2 * radius)] * g[np.clip(cols - c + radius, 0, 2 * radius)], 0.0)
    brute = np.einsum("ijrc,rck->ijk", weight, image[1])
    np.testing.assert_allclose(out[1], brute, atol=1e-12)
    # the stride keeps every second row and column of the same blur
    half = GaussianBlur(sigma=sigma, stride=2, image_shape=(20, 24, 3)).fit(image.reshape(3, -1))
    np.testing.assert_array_equal(half.transform(image.reshape(3, -1)).reshape(3, 10, 12, 3), out[:, ::2, ::2])


def test_gaussian_blur_makes_image_distance_grow_with_the_displacement():
    # raw pixels: two sprites that no longer overlap are all equally far apart; blurred, the
    # distance keeps growing with the displacement, so a kernel on it can interpolate
    system = MovingSprite()
    shifts = np.array([0.3, 0.6, 0.9, 1.2])
    images = system.render(np.column_stack([np.r_[0.0, shifts] - 0.6, np.zeros(5)])).reshape(5, -1)
    raw = np.linalg.norm(images[1:] - images[0], axis=1)
    blur = GaussianBlur(sigma=5.0, image_shape=(64, 64)).fit(images)
    smooth = np.linalg.norm(blur.transform(images[1:]) - blur.transform(images[:1]), axis=1)
    assert raw[3] / raw[1] < 1.05              # saturated once the sprites are apart (0.56 wide)
    assert np.all(np.diff(smooth) > 0) and smooth[3] / smooth[1] > 1.1   # 1.2 measured


def test_a_feature_map_names_observations_of_another_width():
    """The maps' ``transform`` says which argument and what width, as ``fit`` does; before, the
    message was scikit-learn's about its ``X`` and its RBFSampler or PCA."""
    rng = np.random.default_rng(0)
    Z, X = rng.random((30, 64)), rng.normal(size=(30, 2))
    maps = [(RandomFourierFeatures(n_components=20, random_state=0).fit(X), X, 2),
            (LearnedFeatures(n_pca=5, hidden_layer_sizes=(8, 4), max_iter=5).fit(Z, X), Z, 64)]
    for fitted, data, width in maps:
        assert fitted.transform(data[:3]).shape[0] == 3
        with pytest.raises(ValueError, match=rf"^Z: expected {width} columns \(features per sample\), got 10$"):
            fitted.transform(rng.random((3, 10)))


def test_gaussian_blur_validates_and_gets_its_shape_from_the_filter(tmp_path):
    with pytest.raises(ValueError, match="image_shape: expected the shape of one image"):
        GaussianBlur().fit(np.zeros((3, 16)))
    with pytest.raises(ValueError, match="Z: expected 16 values per row"):
        GaussianBlur(image_shape=(4, 4)).fit(np.zeros((3, 15)))
    with pytest.raises(ValueError, match="sigma"):
        GaussianBlur(sigma=0.0, image_shape=(4, 4)).fit(np.zeros((3, 16)))
    # wider than ten image sides: flat over the image, and its taps would not fit in memory
    with pytest.raises(ValueError, match="sigma: expected a positive number at most 40"):
        GaussianBlur(sigma=1e12, image_shape=(4, 4)).fit(np.zeros((3, 16)))
    with pytest.raises(ValueError, match="image_shape: expected"):
        GaussianBlur(image_shape=(4.5, 4)).fit(np.zeros((3, 16)))
    system = MovingSprite()
    rng = np.random.default_rng(5)
    states, images = system.simulate(300, rng)
    test_states, test_images = system.simulate(30, rng)
    grid = {"scale": (0.2,), "scale_z": (0.2,), "reg_prior": (1e-2,), "reg_update": (1e-2,)}
    kbf = kb.tune_filter(kb.KernelBayesFilter(features=GaussianBlur(sigma=3.0, stride=2)), states, images,
                         param_grid=grid, validation_length=60, progress=False)
    assert tuple(kbf.features_.image_shape) == (64, 64)
    assert kbf.features_.transform(images[:2].reshape(2, -1)).shape == (2, 32 * 32)
    means = kbf.batch_filter(test_images)[0]
    assert np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.05
    kbf.reset().save(tmp_path / "blur.npz")
    np.testing.assert_array_equal(kb.KernelBayesFilter.load(tmp_path / "blur.npz").batch_filter(test_images)[0], means)


def test_filters_take_images_in_their_natural_shape(tmp_path):
    system = MovingSprite()
    rng = np.random.default_rng(4)
    states, images = system.simulate(150, rng)
    test_states, test_images = system.simulate(20, rng)
    kbf = kb.KernelBayesFilter(scale_z=0.15, reg_prior=1e-2, reg_update=1e-2).fit(states, images)
    means = kbf.batch_filter(test_images)[0]
    flat = kbf.reset().batch_filter(test_images.reshape(20, -1))[0]
    assert np.array_equal(means, flat)
    assert np.mean(np.sum((means - test_states) ** 2, axis=1)) < 0.2
    with pytest.raises(ValueError, match=r"z: expected shape \(64, 64\)"):
        kbf.update(np.zeros((32, 32)))
    # features and persistence with a learned feature map
    learned = kb.KernelBayesFilter(features=LearnedFeatures(n_pca=10, hidden_layer_sizes=(16,), max_iter=50),
                                   reg_prior=1e-2, reg_update=1e-2).fit(states, images)
    first = learned.batch_filter(test_images)[0]
    learned.reset()
    learned.save(tmp_path / "learned.npz")
    again = kb.KernelBayesFilter.load(tmp_path / "learned.npz").batch_filter(test_images)[0]
    # the scikit-learn parts (PCA) may round differently once their arrays are contiguous copies
    np.testing.assert_allclose(first, again, rtol=0, atol=1e-10)
    # the image baselines
    pf = ParticleFilter(system, n_particles=300, rng=0).batch_filter(test_images)[0]
    assert np.all(np.isfinite(pf))
    window = WindowRegressor(window=3, max_iter=50).fit(states, images).batch_filter(test_images)[0]
    assert window.shape == (20, 2)
