"""A moving sprite seen as a noisy image (the dSprite setting of Xu et al. (2022) §6.3, rendered here).

The hidden position follows the noisy oscillation (algorithms §6 systems); each observation is a
64 x 64 grayscale image of a fixed shape centred at the position plus N(0, 0.05^2) jitter, the
square [-1.5, 1.5]^2 mapped linearly onto the image, with N(0, 0.1^2) pixel noise (not clipped).
"""

import numpy as np

from .._validation import check_array, check_choice, check_int, check_matrix, check_model_scale, check_rng
from .base import System, pixel_loglik
from .circular import Oscillation

__all__ = ["MovingSprite"]


class MovingSprite(System):
    """Oscillation dynamics observed through rendered images of a sprite.

    Parameters
    ----------
    omega, b, M, process_noise
        The :class:`Oscillation` dynamics of the position.
    jitter : float
        Standard deviation of the offset between the position and where the sprite is drawn.
    pixel_noise : float
        Standard deviation of the per-pixel Gaussian noise.
    size : int
        Image side in pixels.
    shape : {"ellipse", "heart"}
        The sprite: an ellipse of about 12 x 8 pixels, or a heart of about 12 pixels.
    extent : float
        The image shows ``[-extent, extent]^2``.

    Examples
    --------
    >>> states, images = MovingSprite().simulate(3, rng=0)
    >>> images.shape
    (3, 64, 64)
    """

    dim_x = 2

    def __init__(self, omega=0.4, b=0.4, M=8, process_noise=0.2, jitter=0.05, pixel_noise=0.1, size=64,
                 shape="ellipse", extent=1.5):
        self.jitter = check_model_scale(jitter, "jitter")   # before the dynamics, which call it observation_noise
        self.dynamics = Oscillation(omega, b, M, process_noise, observation_noise=self.jitter)
        self.pixel_noise = check_model_scale(pixel_noise, "pixel_noise")
        self.size = check_int(size, "size", maximum=self.MAX_PIXELS)
        self.shape = check_choice(shape, "shape", ("ellipse", "heart"))
        self.extent = check_model_scale(extent, "extent")
        self.obs_shape = (self.size, self.size)
        self.dim_z = self.size * self.size
        centres = (np.arange(self.size) + 0.5) / self.size * 2 * self.extent - self.extent
        self._u = centres[None, None, :]          # x grows to the right
        self._v = centres[::-1][None, :, None]    # y grows upwards
        self._pixel = 2 * self.extent / self.size

    # dynamics: those of the oscillation
    @property
    def process_cov(self):
        """``Q``, the covariance of the process noise (the oscillation's)."""
        return self.dynamics.process_cov

    def transition_mean(self, X):
        return self.dynamics.transition_mean(X)

    def transition_jacobian(self, x):
        return self.dynamics.transition_jacobian(x)

    def initial_state(self, rng):
        return self.dynamics.initial_state(rng)

    # observation: a rendered image
    def render(self, positions):
        """Noise-free images of the sprite.

        Parameters
        ----------
        positions : array-like of shape (n, 2)
            Where the sprite is drawn.

        Returns
        -------
        ndarray of shape (n, size, size)
            The images, with values in ``[0, 1]``.
        """
        P = check_matrix(np.atleast_2d(check_array(positions, "positions")), "positions", n_features=2)
        du = (self._u - P[:, 0, None, None]) / self._pixel   # offsets in pixels
        dv = (self._v - P[:, 1, None, None]) / self._pixel
        if self.shape == "ellipse":
            # semi-axes 6 and 4 pixels; a one-pixel linear ramp gives the anti-aliased edge
            inside = 1.0 - np.sqrt((du / 6.0) ** 2 + (dv / 4.0) ** 2)
            return np.clip(inside * 4.0 + 0.5, 0.0, 1.0)
        x, y = du / 5.0, dv / 5.0 + 0.2
        f = (x * x + y * y - 1.0) ** 3 - x * x * y**3   # the heart curve; inside where f < 0
        return np.clip(-f * 6.0 + 0.5, 0.0, 1.0)

    def pixel_coordinates(self, X, latent=None):
        """Where each state lies in an image, for marking positions on frames.

        Parameters
        ----------
        X : array-like of shape (n, 2)
            States.
        latent : ndarray, optional
            The rendered positions; not needed here (the interface of the image systems).

        Returns
        -------
        ndarray of shape (n, 2)
            ``(column, row)`` pixel coordinates.
        """
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        return np.column_stack([(X[:, 0] + self.extent) / self._pixel - 0.5,
                                (self.extent - X[:, 1]) / self._pixel - 0.5])

    def sample_observation(self, X, rng, return_latent=False):
        X = np.atleast_2d(X)
        rng = check_rng(rng, "rng")
        drawn = X + self.jitter * rng.standard_normal(X.shape)
        images = self.render(drawn) + self.pixel_noise * rng.standard_normal((X.shape[0], *self.obs_shape))
        return (images, drawn) if return_latent else images

    def observation_loglik(self, z, X):
        """Pixel log-likelihood ``log N(z; render(x), pixel_noise^2 I)`` (the jitter ignored).

        Parameters
        ----------
        z : array-like of shape (size, size) or (dim_z,)
            One image.
        X : array-like of shape (n, 2)
            States.

        Returns
        -------
        ndarray of shape (n,)
            ``log p(z | x)`` up to a constant.
        """
        return pixel_loglik(z, self.render(X), self.pixel_noise)

    def oracle_system(self):
        """The system an oracle filter sees: the rendered position itself, with the jitter as noise.

        Returns
        -------
        Oscillation
            The position's dynamics, observed with noise ``jitter``.
        """
        return self.dynamics
