"""A rotating camera seen through its images (the DeepMind Lab setting of Xu et al. (2022) §6.3, rendered).

The view angle turns by ``omega`` plus N(0, 0.2^2) each step; the state is ``(cos theta, sin theta)``.
Each observation is a 36 x 48 RGB crop (a ~60 degree field of view) of a fixed, seeded,
procedurally generated 360 degree panorama, taken at ``theta`` plus N(0, 0.2^2), with N(0, 0.1^2)
pixel noise. The panorama belongs to the system: training and test see the same world.
"""

import numpy as np
from scipy.ndimage import gaussian_filter

from .._validation import MAX_TRAINING_MAGNITUDE, check_array, check_int, check_model_scale, check_real, check_rng, \
    check_vector
from .base import System, pixel_loglik

__all__ = ["CameraOrientation", "make_panorama"]


def make_panorama(height, width, seed=0):
    """A seeded 360 degree panorama (height, width, 3) in [0, 1]: sky, hills, buildings, texture.

    Wraps around: column ``width`` continues column 0.
    """
    rng = np.random.default_rng(seed)
    rows = np.linspace(0.0, 1.0, height)[:, None]
    sky = np.stack([0.35 + 0.3 * rows, 0.55 + 0.3 * rows, 0.95 - 0.1 * rows], axis=-1) * np.ones((1, width, 1))
    image = sky.copy()
    cols = np.arange(width)
    # hills: a smooth periodic skyline
    phase = rng.uniform(0, 2 * np.pi, size=3)
    hill = 0.62 + sum(0.06 / (k + 1) * np.sin((k + 1) * 2 * np.pi * cols / width + phase[k]) for k in range(3))
    ground = rows >= hill[None, :]
    image[ground] = np.array([0.30, 0.45, 0.20])
    # buildings: rectangles of random width, height and colour, with lit windows
    for _ in range(14):
        left = rng.integers(width)
        w = rng.integers(width // 30, width // 9)
        top = rng.uniform(0.15, 0.55)
        colour = rng.uniform(0.1, 0.9, size=3)
        span = (left + np.arange(w)) % width
        top_row = int(top * height)
        image[top_row:, span] = colour
        for r in range(top_row + 2, height - 2, 4):
            lit = span[1:-1:3]
            image[r:r + 2, lit] = np.clip(colour + rng.uniform(-0.4, 0.4), 0, 1)
    texture = gaussian_filter(rng.normal(size=(height, width, 3)), sigma=(1.0, 1.0, 0), mode="wrap")
    return np.clip(image + 0.04 * texture, 0.0, 1.0)


class CameraOrientation(System):
    """A camera turning on the spot, observed through RGB views of a procedural panorama.

    Parameters
    ----------
    omega : float
        Mean turn per step (radians).
    process_noise, view_noise : float
        Standard deviations of the turn and of the offset between the state angle and the view.
    pixel_noise : float
        Standard deviation of the per-pixel noise.
    height, width, fov_deg : int, int, float
        View size and horizontal field of view.
    panorama_seed : int
        Seed of the world; the same for training and test.

    Examples
    --------
    >>> states, views = CameraOrientation().simulate(2, rng=0)
    >>> views.shape
    (2, 36, 48, 3)
    """

    dim_x = 2

    def __init__(self, omega=0.4, process_noise=0.2, view_noise=0.2, pixel_noise=0.1, height=36, width=48,
                 fov_deg=60.0, panorama_seed=0):
        self.omega = check_real(omega, "omega", maximum=MAX_TRAINING_MAGNITUDE)
        self.process_noise = check_model_scale(process_noise, "process_noise")
        self.view_noise = check_model_scale(view_noise, "view_noise")
        self.pixel_noise = check_model_scale(pixel_noise, "pixel_noise")
        self.height = check_int(height, "height", maximum=self.MAX_PIXELS)
        self.width = check_int(width, "width", maximum=self.MAX_PIXELS)
        fov_deg = check_real(fov_deg, "fov_deg")
        if not 1 <= fov_deg <= 360:
            # the panorama holds 360 / fov_deg views side by side
            raise ValueError(f"fov_deg: expected a field of view between 1 and 360 degrees, got {fov_deg!r}")
        self.obs_shape = (self.height, self.width, 3)
        self.dim_z = self.height * self.width * 3
        self.panorama_width = int(round(self.width * 360.0 / fov_deg))
        self.panorama = make_panorama(self.height, self.panorama_width,
                                      check_int(panorama_seed, "panorama_seed", minimum=0))

    @staticmethod
    def angle(X):
        """The heading of each state.

        Parameters
        ----------
        X : array-like of shape (n, 2) or (2,)
            States as unit vectors ``(cos theta, sin theta)``.

        Returns
        -------
        ndarray of shape (n,)
            ``theta`` in ``(-pi, pi]``.
        """
        X = np.atleast_2d(X)
        return np.arctan2(X[:, 1], X[:, 0])

    @property
    def process_cov(self):
        """``Q``, the covariance of the process noise."""
        return self.process_noise**2 * np.eye(2)

    def transition_mean(self, X):
        theta = self.angle(X) + self.omega
        return np.column_stack([np.cos(theta), np.sin(theta)])

    def sample_transition(self, X, rng):
        rng = check_rng(rng, "rng")
        theta = self.angle(X) + self.omega + self.process_noise * rng.standard_normal(len(np.atleast_2d(X)))
        return np.column_stack([np.cos(theta), np.sin(theta)])

    def initial_state(self, rng):
        theta = check_rng(rng, "rng").uniform(0, 2 * np.pi)
        return np.array([np.cos(theta), np.sin(theta)])

    def render(self, angles):
        """Noise-free views, linear in the angle between panorama columns and continuous across 2 pi.

        Parameters
        ----------
        angles : array-like of shape (n,)
            View angles in radians.

        Returns
        -------
        ndarray of shape (n, height, width, 3)
            The views.
        """
        angles = check_vector(np.atleast_1d(check_array(angles, "angles")), "angles")
        W = self.panorama_width
        centre = np.mod(angles, 2 * np.pi) / (2 * np.pi) * W
        cols = centre[:, None] - self.width / 2 + np.arange(self.width)[None, :]
        left = np.floor(cols).astype(int)
        frac = (cols - left)[:, None, :, None]
        a = self.panorama[:, np.mod(left, W)]        # (height, n, width, 3)
        b = self.panorama[:, np.mod(left + 1, W)]
        return np.moveaxis(a, 1, 0) * (1 - frac) + np.moveaxis(b, 1, 0) * frac

    def pixel_coordinates(self, X, latent):
        """Where the direction of each state appears in the view that was rendered.

        Parameters
        ----------
        X : array-like of shape (n, 2)
            States.
        latent : array-like of shape (n, 2)
            The rendered view angles as unit vectors (see :meth:`sample_observation`).

        Returns
        -------
        ndarray of shape (n, 2)
            ``(column, NaN)`` rows; a column outside ``[0, width)`` is out of view.
        """
        offset = np.angle(np.exp(1j * (self.angle(X) - self.angle(latent))))
        column = offset / (2 * np.pi) * self.panorama_width + self.width / 2
        return np.column_stack([column, np.full_like(column, np.nan)])

    def sample_observation(self, X, rng, return_latent=False):
        X = np.atleast_2d(X)
        rng = check_rng(rng, "rng")
        view = self.angle(X) + self.view_noise * rng.standard_normal(X.shape[0])
        images = self.render(view) + self.pixel_noise * rng.standard_normal((X.shape[0], *self.obs_shape))
        return (images, np.column_stack([np.cos(view), np.sin(view)])) if return_latent else images

    def observation_loglik(self, z, X):
        """Pixel log-likelihood around the view at the state's angle (the view noise ignored).

        Parameters
        ----------
        z : array-like of shape (height, width, 3) or (dim_z,)
            One view.
        X : array-like of shape (n, 2)
            States.

        Returns
        -------
        ndarray of shape (n,)
            ``log p(z | x)`` up to a constant.
        """
        return pixel_loglik(z, self.render(self.angle(X)), self.pixel_noise)

    def oracle_system(self):
        """What an oracle filter sees: the view angle actually rendered, as a unit vector.

        Returns
        -------
        System
            A system with the same transition whose observation is that angle.
        """
        return _ViewAngle(self)


class _ViewAngle(System):
    """The camera's dynamics observed through the rendered view angle (wrapped Gaussian noise)."""

    dim_x = dim_z = 2
    obs_shape = (2,)

    def __init__(self, camera):
        self.camera = camera

    process_cov = property(lambda self: self.camera.process_cov)

    def sample_transition(self, X, rng):
        return self.camera.sample_transition(X, rng)

    def initial_state(self, rng):
        return self.camera.initial_state(rng)

    def observation_loglik(self, z, X):
        d = np.angle(np.exp(1j * (self.camera.angle(np.asarray(z)[None, :])[0] - self.camera.angle(X))))
        return -0.5 * d * d / self.camera.view_noise**2

    def initial_belief(self, z0):
        # the view angle pins the state down to within the view noise
        return np.asarray(z0, dtype=np.float64), self.camera.view_noise**2 * np.eye(2)
