"""A robot that localizes itself from a low-resolution camera in a procedural room.

The setting of the robot-localization study of Fukumizu (2014) and Kanagawa et al. (2016): the
motion model is known (odometry: a commanded forward step and turn, with noise), the observation
model is not (a camera image nobody writes a density for). The room is ``[-1, 1]^2`` with walls of
four colours, each textured by smooth stripes, and a few round pillars; the camera ray-casts a
first-person view of ``height x width`` RGB pixels with a 90 degree horizontal field of view,
each column averaged over several rays and each row's share of wall, floor and ceiling computed
exactly, so an image changes continuously with the pose.

The state is ``(x, y, cos heading, sin heading)``: kernels on it see the heading wrap around.
"""

import numpy as np

from .._validation import check_bool, check_int, check_matrix, check_positive, check_rng
from ..persistence import persistent
from .base import System, check_control, controlled_run, estimates_and_states, pixel_loglik

__all__ = ["RobotInRoom", "heading", "wrapped_angle"]


def heading(X):
    """The heading of each state, from its cosine and sine.

    Parameters
    ----------
    X : array-like of shape (n, 4) or (4,)
        States ``(x, y, cos h, sin h)`` (the last two need not have unit norm: estimates do not).

    Returns
    -------
    ndarray of shape (n,)
        ``h`` in ``(-pi, pi]``.
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    return np.arctan2(X[:, 3], X[:, 2])


def wrapped_angle(a):
    """Angles brought into ``(-pi, pi]``, for heading errors.

    Parameters
    ----------
    a : array-like
        Angles in radians.

    Returns
    -------
    ndarray
        The same angles modulo ``2 pi``, nearest to zero.
    """
    return np.angle(np.exp(1j * np.asarray(a, dtype=np.float64)))


def _pose(position, h):
    return np.column_stack([position, np.cos(h), np.sin(h)])


@persistent("room_seed", "n_pillars", "height", "width", "fov_deg", "rays_per_column", "pixel_noise",
            "forward_noise", "turn_noise", "distinct_walls")
class RobotInRoom(System):
    """A robot with odometry and a camera in a seeded room (known motion, unknown image density).

    Motion: with control ``u = (forward, turn)``, the heading turns by ``turn + N(0, turn_noise^2)``
    and the robot then moves ``forward + N(0, forward_noise^2)`` along it; a move that would end
    inside a pillar or within ``MARGIN`` of a wall is not made (the robot only turns). Observation:
    the rendered view plus ``N(0, pixel_noise^2)`` per pixel.

    Parameters
    ----------
    room_seed : int, default=0
        Seed of the room (wall colours and stripes, pillar places, sizes and colours).
    n_pillars : int, default=3
        Round obstacles, at most :attr:`MAX_PILLARS` (pillars keep 0.3 apart in the room's central
        1.2 x 1.2 square; more never fit). Fewer are placed when the seed's draws leave no room.
    height, width : int, default=16, 64
        Image size in pixels, each at most :attr:`MAX_PIXELS`.
    fov_deg : float, default=90.0
        Horizontal field of view; the vertical one follows from the pixel aspect (square pixels).
    rays_per_column : int, default=4
        Rays averaged in each image column (anti-aliasing), at most :attr:`MAX_RAYS`.
    pixel_noise : float, default=0.05
        Standard deviation of the pixel noise.
    forward_noise : float, default=0.01
        Standard deviation of the forward step's noise.
    turn_noise : float, default=0.05
        Standard deviation of the turn's noise (radians).
    distinct_walls : bool, default=True
        Four walls of different colours and stripe frequencies. False paints all four alike (the
        first wall's colour and stripes; the pillars are those of the same ``room_seed``), so
        that only the pillars tell the room's quarter turns apart: views that repeat across the
        room, as in corridors and offices (perceptual aliasing).

    Examples
    --------
    >>> robot = RobotInRoom()
    >>> states, controls, images = robot.simulate(5, rng=0)
    >>> states.shape, controls.shape, images.shape
    ((5, 4), (5, 2), (5, 16, 64, 3))
    """

    dim_x = 4
    #: dimension of a control ``(forward, turn)``
    dim_u = 2
    #: no move ends closer than this to a wall
    MARGIN = 0.08
    #: the walls' and pillars' height, and the camera's (room units; the room is 2 wide)
    WALL_HEIGHT = 0.3
    CAMERA_HEIGHT = 0.15
    #: the most pillars a room holds
    MAX_PILLARS = 16
    #: the most rays per image column
    MAX_RAYS = 64

    def __init__(self, room_seed=0, n_pillars=3, height=16, width=64, fov_deg=90.0, rays_per_column=4,
                 pixel_noise=0.05, forward_noise=0.01, turn_noise=0.05, distinct_walls=True):
        self.room_seed = check_int(room_seed, "room_seed", minimum=0)
        self.n_pillars = check_int(n_pillars, "n_pillars", minimum=0, maximum=self.MAX_PILLARS)
        self.height = check_int(height, "height", maximum=self.MAX_PIXELS)
        self.width = check_int(width, "width", maximum=self.MAX_PIXELS)
        self.fov_deg = check_positive(fov_deg, "fov_deg")
        if not self.fov_deg < 180:
            raise ValueError(f"fov_deg: expected a field of view below 180 degrees, got {fov_deg}")
        self.rays_per_column = check_int(rays_per_column, "rays_per_column", maximum=self.MAX_RAYS)
        self.pixel_noise = check_positive(pixel_noise, "pixel_noise")
        self.forward_noise = check_positive(forward_noise, "forward_noise")
        self.turn_noise = check_positive(turn_noise, "turn_noise")
        self.distinct_walls = check_bool(distinct_walls, "distinct_walls")
        self.obs_shape = (self.height, self.width, 3)
        self.dim_z = self.height * self.width * 3
        rng = np.random.default_rng(self.room_seed)
        # walls: +x, +y, -x, -y; saturated colours far apart, stripes of different frequencies
        hues = rng.permutation(np.array([[0.85, 0.25, 0.2], [0.2, 0.65, 0.3], [0.25, 0.35, 0.85],
                                         [0.9, 0.8, 0.25]]))
        stripes = rng.uniform(1.5, 4.5, size=4)
        if not self.distinct_walls:  # drawn all the same, so that the pillars match the distinct room's
            hues, stripes = np.tile(hues[:1], (4, 1)), np.full(4, stripes[0])
        self.wall_colours = hues
        self.wall_stripes = stripes
        centres, radii = [], []
        for _ in range(200 * max(self.n_pillars, 1)):
            if len(centres) == self.n_pillars:
                break
            c, r = rng.uniform(-0.6, 0.6, size=2), rng.uniform(0.08, 0.15)
            if all(np.hypot(*(c - c2)) > r + r2 + 0.3 for c2, r2 in zip(centres, radii)):
                centres.append(c)
                radii.append(r)
        self.pillar_centres = np.array(centres).reshape(-1, 2)
        self.pillar_radii = np.array(radii)
        self.pillar_colours = rng.uniform(0.15, 0.95, size=(len(radii), 3))
        half = np.radians(self.fov_deg) / 2
        # ray directions relative to the heading, per column and sub-ray (left of the image first)
        offsets = (np.arange(self.width * self.rays_per_column) + 0.5) / (self.width * self.rays_per_column)
        self._ray_angles = np.arctan((1 - 2 * offsets) * np.tan(half))
        focal = self.width / (2 * np.tan(half))
        # each row's vertical extent on the image plane, in units of the focal length (top row first)
        edges = (self.height / 2 - np.arange(self.height + 1)) / focal
        self._row_top, self._row_bottom = edges[:-1], edges[1:]

    def __repr__(self):
        alike = "" if self.distinct_walls else ", distinct_walls=False"
        return f"RobotInRoom(room_seed={self.room_seed}, n_pillars={self.n_pillars}{alike})"

    # -- motion ------------------------------------------------------------------------------------
    def free(self, positions):
        """Whether each position is a place the robot may be.

        Parameters
        ----------
        positions : array-like of shape (n, 2)
            Positions.

        Returns
        -------
        ndarray of bool, shape (n,)
            Inside the room by at least ``MARGIN`` and outside every pillar by as much.
        """
        P = np.atleast_2d(np.asarray(positions, dtype=np.float64))
        ok = np.all(np.abs(P) <= 1 - self.MARGIN, axis=1)
        for c, r in zip(self.pillar_centres, self.pillar_radii):
            ok &= np.hypot(P[:, 0] - c[0], P[:, 1] - c[1]) >= r + self.MARGIN
        return ok

    def move(self, X, u, forward_noise=0.0, turn_noise=0.0):
        """The motion model with given noise values (the deterministic part of the sampler).

        Parameters
        ----------
        X : array-like of shape (n, 4)
            States.
        u : array-like of shape (2,) or (n, 2)
            Controls ``(forward, turn)``.
        forward_noise, turn_noise : float or ndarray of shape (n,), default=0
            The noise values added to the forward step and to the turn.

        Returns
        -------
        ndarray of shape (n, 4)
            The next states.
        """
        X = check_matrix(X, "X", n_features=4)
        u = check_control(u, X.shape[0], 2, "RobotInRoom", "(forward, turn)")
        h = heading(X) + u[:, 1] + turn_noise
        step = u[:, 0] + forward_noise
        moved = X[:, :2] + step[:, None] * np.column_stack([np.cos(h), np.sin(h)])
        position = np.where(self.free(moved)[:, None], moved, X[:, :2])
        return _pose(position, h)

    def sample_transition(self, X, rng, u=None):
        """Draw the next state for each row of ``X`` under control ``u``.

        Parameters
        ----------
        X : array-like of shape (n, 4) or (4,)
            Current states.
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).
        u : array-like of shape (2,) or (n, 2)
            The control ``(forward, turn)``; required.

        Returns
        -------
        ndarray of shape (n, 4)
            A draw of the next state given each row.
        """
        rng = check_rng(rng, "rng")
        X = np.atleast_2d(X)
        n = X.shape[0]
        u = check_control(u, n, 2, "RobotInRoom", "(forward, turn)")
        return self.move(X, u, self.forward_noise * rng.standard_normal(n), self.turn_noise * rng.standard_normal(n))

    def transition_mean(self, X, u=None):
        """The noise-free move (the mean up to the noise's curvature): :meth:`move` with zero noise.

        Parameters
        ----------
        X : array-like of shape (n, 4)
            States.
        u : array-like of shape (2,) or (n, 2)
            Controls.

        Returns
        -------
        ndarray of shape (n, 4)
            The next states without noise.
        """
        return self.move(X, u)

    def initial_state(self, rng):
        """A free position drawn uniformly, with a uniform heading.

        Parameters
        ----------
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).

        Returns
        -------
        ndarray of shape (4,)
            The state.
        """
        rng = check_rng(rng, "rng")
        while True:
            p = rng.uniform(-1 + self.MARGIN, 1 - self.MARGIN, size=(1, 2))
            if self.free(p)[0]:
                return _pose(p, rng.uniform(-np.pi, np.pi, size=1))[0]

    def explore(self, X, rng):
        """A control an explorer would give: forward mostly, turning smoothly, away from obstacles.

        Parameters
        ----------
        X : array-like of shape (4,)
            The current state.
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).

        Returns
        -------
        ndarray of shape (2,)
            The control ``(forward, turn)``.
        """
        rng = check_rng(rng, "rng")
        x = np.asarray(X, dtype=np.float64)
        h = heading(x)[0]
        turn = rng.normal(0.0, 0.15)
        ahead = x[:2] + 0.25 * np.array([np.cos(h), np.sin(h)])
        if not self.free(ahead[None, :])[0]:
            # blocked ahead: turn towards the freer side
            left = x[:2] + 0.25 * np.array([np.cos(h + 0.8), np.sin(h + 0.8)])
            turn = 0.5 if self.free(left[None, :])[0] else -0.5
            return np.array([0.0, turn])
        return np.array([rng.uniform(0.03, 0.07), turn])

    # -- camera ------------------------------------------------------------------------------------
    def _cast(self, origins, angles):
        """Distance to the first surface along each ray, its colour, for rays (n, k)."""
        dx, dy = np.cos(angles), np.sin(angles)
        ox, oy = origins[:, 0, None], origins[:, 1, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            tx = np.where(dx > 0, (1 - ox) / dx, (-1 - ox) / dx)
            ty = np.where(dy > 0, (1 - oy) / dy, (-1 - oy) / dy)
        tx = np.where(np.isfinite(tx) & (tx > 0), tx, np.inf)
        ty = np.where(np.isfinite(ty) & (ty > 0), ty, np.inf)
        hit_x = tx <= ty
        dist = np.where(hit_x, tx, ty)
        # which wall (0: +x, 1: +y, 2: -x, 3: -y) and the coordinate along it, for the stripes
        wall = np.where(hit_x, np.where(dx > 0, 0, 2), np.where(dy > 0, 1, 3))
        along = np.where(hit_x, oy + dist * dy, ox + dist * dx)
        stripes = 0.75 + 0.25 * np.cos(2 * np.pi * self.wall_stripes[wall] * along)
        colour = self.wall_colours[wall] * stripes[..., None]
        for c, r, pc in zip(self.pillar_centres, self.pillar_radii, self.pillar_colours):
            fx, fy = ox - c[0], oy - c[1]
            b = fx * dx + fy * dy
            disc = b * b - (fx * fx + fy * fy - r * r)
            t = -b - np.sqrt(np.maximum(disc, 0.0))
            hit = (disc > 0) & (t > 0) & (t < dist)
            if np.any(hit):
                around = np.arctan2(fy + t * dy, fx + t * dx)
                shade = 0.8 + 0.2 * np.cos(3 * around)
                colour = np.where(hit[..., None], pc * shade[..., None], colour)
                dist = np.where(hit, t, dist)
        return dist, colour

    def render(self, X):
        """Noise-free camera images at each pose.

        Parameters
        ----------
        X : array-like of shape (n, 4) or (4,)
            Poses ``(x, y, cos h, sin h)``.

        Returns
        -------
        ndarray of shape (n, height, width, 3)
            The images, values in ``[0, 1]``.
        """
        X = check_matrix(np.atleast_2d(X), "X", n_features=4)
        n, k = X.shape[0], self.rays_per_column
        rel = self._ray_angles
        dist, colour = self._cast(X[:, :2], heading(X)[:, None] + rel[None, :])
        depth = dist * np.cos(rel)[None, :]                 # perpendicular distance: no fisheye
        top = (self.WALL_HEIGHT - self.CAMERA_HEIGHT) / depth             # the wall's edges on the image plane
        bottom = -self.CAMERA_HEIGHT / depth
        # each row's share of wall, ceiling (above) and floor (below), exactly (anti-aliased edges)
        span = self._row_top - self._row_bottom
        wall = (np.minimum(self._row_top, top[..., None]) - np.maximum(self._row_bottom, bottom[..., None]))
        wall = np.clip(wall / span, 0.0, 1.0)                                       # (n, rays, rows)
        ceiling = np.clip((self._row_top - np.maximum(self._row_bottom, top[..., None])) / span, 0.0, 1.0)
        floor = 1.0 - wall - ceiling
        lit = colour / (1.0 + 0.35 * depth)[..., None]
        pixels = (wall[..., None] * lit[:, :, None, :]
                  + ceiling[..., None] * np.array([0.85, 0.85, 0.9])
                  + floor[..., None] * np.array([0.45, 0.38, 0.3]))                # (n, rays, rows, 3)
        pixels = pixels.reshape(n, self.width, k, self.height, 3).mean(axis=2)
        return np.clip(np.transpose(pixels, (0, 2, 1, 3)), 0.0, 1.0)

    def sample_observation(self, X, rng, return_latent=False):
        """Camera images at each pose with pixel noise.

        Parameters
        ----------
        X : array-like of shape (n, 4) or (4,)
            Poses.
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).
        return_latent : bool, default=False
            Also return the poses rendered (the poses themselves).

        Returns
        -------
        images : ndarray of shape (n, height, width, 3)
            The noisy images.
        latent : ndarray of shape (n, 4)
            Only with ``return_latent``.
        """
        rng = check_rng(rng, "rng")
        X = np.atleast_2d(X)
        images = self.render(X) + self.pixel_noise * rng.standard_normal((X.shape[0], *self.obs_shape))
        return (images, X.copy()) if return_latent else images

    def observation_loglik(self, z, X):
        """The pixel log-likelihood ``log N(z; render(x), pixel_noise^2 I)``.

        Parameters
        ----------
        z : array-like of shape (height, width, 3) or (dim_z,)
            One image.
        X : array-like of shape (n, 4)
            Poses.

        Returns
        -------
        ndarray of shape (n,)
            ``log p(z | x)`` up to a constant.
        """
        return pixel_loglik(z, self.render(X), self.pixel_noise)

    def simulate(self, T, rng=None, burn_in=0, return_latent=False):
        """An exploration run: the explorer's controls, the poses they lead to, and the images.

        Parameters
        ----------
        T : int
            The number of steps.
        rng : int, numpy.random.Generator or None
            Seed or generator.
        burn_in : int, default=0
            Steps driven and discarded first.
        return_latent : bool, default=False
            Refused when true: there is no hidden rendering offset, and this run's three arrays
            hold the controls second.

        Returns
        -------
        states : ndarray of shape (T, 4)
            The poses.
        controls : ndarray of shape (T, 2)
            ``controls[t]`` moved the robot from ``states[t - 1]`` to ``states[t]`` (the control
            ``predict(u)`` takes before ``update(images[t])``); ``controls[0]`` moved it to the
            first pose.
        images : ndarray of shape (T, height, width, 3)
            The camera's images (last: a learned filter takes them as ``fit(states, images,
            controls=controls)``).
        """
        return controlled_run(self, T, self.explore, rng, burn_in, return_latent)

    def errors(self, estimates, states):
        """Position and heading errors, reported separately (the heading is an angle: wrapped).

        Parameters
        ----------
        estimates, states : ndarray of shape (T, 4)
            Estimated and true poses, step by step.

        Returns
        -------
        dict
            ``"mse"``: the position's mean squared error; ``"heading_error_deg"``: the mean
            absolute heading error in degrees.

        Raises
        ------
        ValueError
            As :meth:`System.errors`.
        """
        estimates, states = estimates_and_states(self, estimates, states)
        position = float(np.mean(np.sum((estimates[:, :2] - states[:, :2]) ** 2, axis=1)))
        turn = np.abs(wrapped_angle(heading(estimates) - heading(states)))
        return {"mse": position, "heading_error_deg": float(np.degrees(np.mean(turn)))}

    def pixel_coordinates(self, X, latent=None):
        """Where each pose lies on a top-down map of the room drawn by :meth:`top_down`.

        Parameters
        ----------
        X : array-like of shape (n, 4) or (n, 2)
            Poses or positions.
        latent : ndarray, optional
            Not needed (the interface of the image systems).

        Returns
        -------
        ndarray of shape (n, 2)
            The positions ``(x, y)``, which are the map's coordinates.
        """
        return np.atleast_2d(np.asarray(X, dtype=np.float64))[:, :2].copy()

    def top_down(self, ax=None):
        """Draw the room from above: walls in their colours and the pillars.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure when None.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on, in room coordinates.
        """
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(5, 5))
        from matplotlib.patches import Circle

        sides = [((1, 1), (-1, 1)), ((-1, 1), (1, 1)), ((-1, -1), (-1, 1)), ((-1, 1), (-1, -1))]  # (xs, ys)
        for (xs, ys), colour in zip(sides, self.wall_colours):
            ax.plot(xs, ys, color=colour, lw=6, solid_capstyle="butt")
        for c, r, colour in zip(self.pillar_centres, self.pillar_radii, self.pillar_colours):
            ax.add_patch(Circle(c, r, color=colour))
        ax.set_xlim(-1.05, 1.05)
        ax.set_ylim(-1.05, 1.05)
        ax.set_aspect("equal")
        return ax
