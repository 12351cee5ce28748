"""The interface a simulated system offers to the filters and benchmarks."""

from functools import lru_cache

import numpy as np

from .._validation import check_array, check_bool, check_covariance, check_int, check_matrix, check_memory, \
    check_observation, check_real_output, check_rng, check_step_control, check_vector


def pixel_loglik(z, renders, pixel_noise):
    """``log N(z; render, pixel_noise^2 I)`` up to a constant, for each noise-free render.

    Parameters
    ----------
    z : array-like
        One image (any shape with the renders' number of pixels).
    renders : ndarray of shape (n, ...)
        Noise-free images.
    pixel_noise : float
        The pixel noise's standard deviation.

    Returns
    -------
    ndarray of shape (n,)
        The log-likelihoods.

    Raises
    ------
    ValueError
        If ``z`` is not one finite image of the renders' shape (or as many values flattened).
    """
    diff = check_observation(z, renders.shape[1:])[None] - renders.reshape(len(renders), -1)
    return -0.5 * np.sum(diff * diff, axis=1) / pixel_noise**2


def one_observation(model, z):
    """``z`` as one finite observation of ``model`` (its ``obs_shape``, or ``(dim_z,)``), flattened.

    numpy would broadcast an observation of the wrong length against every state's mean
    observation and give a likelihood of something else. A model that states neither shape gets
    ``z`` as a float array, unchecked.
    """
    shape = getattr(model, "obs_shape", None) or ((model.dim_z,) if getattr(model, "dim_z", None) else None)
    return check_array(z, "z") if shape is None else check_observation(z, shape)


def gaussian_loglik(diff, R, name="R"):
    """``log N(diff; 0, R)`` for each row of ``diff``: the density of observation errors.

    Parameters
    ----------
    diff : ndarray of shape (n, dim_z)
        Observations minus their means.
    R : ndarray of shape (dim_z, dim_z)
        The noise covariance.
    name : str, default="R"
        What the covariance is called, for the message when it is singular.

    Returns
    -------
    ndarray of shape (n,)
        The log-densities.
    """
    try:
        sol = np.linalg.solve(R, diff.T).T
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}: the observation noise covariance is singular, so an observation has no density "
                         f"(which a particle filter weighs its particles by); give the system a positive definite "
                         f"one") from None
    _, logdet = np.linalg.slogdet(2 * np.pi * R)
    return -0.5 * (np.einsum("nd,nd->n", diff, sol) + logdet)


def sensor_average(sensor, Z, weights):
    """The weighted mean of observations of ``sensor``, as the sensor takes it: its
    ``observation_average`` (a :class:`System`'s) or ``average`` (a radar's circular mean of
    bearings), ``weights @ Z`` for a sensor with neither.

    Parameters
    ----------
    sensor : object
        The sensor model.
    Z : ndarray of shape (n, dim_z)
        Observations.
    weights : ndarray of shape (n,)
        Their weights, summing to one.

    Returns
    -------
    ndarray of shape (dim_z,)
        The mean.
    """
    average = getattr(sensor, "observation_average", None) or getattr(sensor, "average", None)
    return np.dot(weights, Z) if average is None else average(Z, weights)


def predicted_measurement(sensor, X, weights):
    """The measurement ``sensor`` predicts for weighted states: its mean, and the spread of the
    states' mean measurements about it (without the sensor's noise).

    Parameters
    ----------
    sensor : object
        A sensor with ``observe_mean(X)`` (and, optionally, its own residual and average).
    X : ndarray of shape (n, dim_x)
        The states (particles).
    weights : ndarray of shape (n,)
        Their weights, summing to one.

    Returns
    -------
    mean : ndarray of shape (dim_z,)
        The weighted mean of ``h(x)``, as the sensor averages (:func:`sensor_average`).
    spread : ndarray of shape (dim_z, dim_z)
        ``sum_i w_i r_i r_i^T`` for the residuals ``r_i = h(x_i) - mean`` (:func:`sensor_residual`).
    residuals : ndarray of shape (n, dim_z)
        The ``r_i``.
    """
    Z = observation_mean_of(sensor, X)
    mean = sensor_average(sensor, Z, weights)
    residuals = sensor_residual(sensor, Z, mean)
    return mean, (residuals * weights[:, None]).T @ residuals, residuals


def sensor_residual(sensor, a, b):
    """``a - b`` for observations of ``sensor``, as the sensor takes it: its
    ``observation_residual`` (a :class:`System`'s) or ``residual`` (a radar's wraps bearings into
    ``(-pi, pi]``), the plain difference for a sensor with neither.

    Parameters
    ----------
    sensor : object
        The sensor model.
    a, b : ndarray of shape (..., dim_z)
        Observations.

    Returns
    -------
    ndarray of shape (..., dim_z)
        Their difference.
    """
    residual = getattr(sensor, "observation_residual", None) or getattr(sensor, "residual", np.subtract)
    return residual(a, b)


def check_control(u, n, dim_u, system, meaning=""):
    """``u`` as a finite array of shape (n, dim_u); one control of shape (dim_u,) is given to all
    ``n`` states (a number, to a one-dimensional control). ``system`` (its class name) and
    ``meaning`` (e.g. ``"(forward, turn)"``) go in the error messages.

    Parameters
    ----------
    u : float, or array-like of shape (dim_u,) or (n, dim_u)
        The control.
    n : int
        The number of states it applies to.
    dim_u : int
        The control's dimension.
    system : str
        The system's name, for the messages.
    meaning : str, default=""
        What the control's coordinates are, for the messages.

    Returns
    -------
    ndarray of shape (n, dim_u)
        The checked control.
    """
    label = f"control {meaning} " if meaning else "control "
    if u is None:
        raise ValueError(f"u: {system}'s motion needs a {label}of shape ({dim_u},)")
    given = check_real_output(u, "u", "control values")
    u = given.reshape(1) if given.ndim == 0 and dim_u == 1 else given
    if u.shape == (dim_u,):
        u = np.broadcast_to(u, (n, dim_u))
    if u.shape != (n, dim_u):
        raise ValueError(f"u: expected a {label}of shape ({dim_u},) or ({n}, {dim_u}), got shape {given.shape}")
    if not np.all(np.isfinite(u)):
        raise ValueError("u: contains NaN or infinite values")
    return u


def model_values(values, system, method, n, dim):
    """What ``system.method`` returned for ``n`` states, as a float array of shape ``(n, dim)``.

    A system written by a user may return a 1-D array or the wrong number of columns; numpy
    would broadcast it against the noise or the states and give a silently wrong draw.

    Parameters
    ----------
    values : array-like
        The returned values.
    system : System
        The system (its class name goes in the message).
    method : str
        The method's name.
    n : int
        The number of states it was given.
    dim : int or None
        The dimension of one value (None: any, for a sensor that does not declare it).

    Returns
    -------
    ndarray of shape (n, dim)
        The values.
    """
    values = check_real_output(values, f"{type(system).__name__}.{method}", "values")
    if values.ndim != 2 or values.shape[0] != n or (dim is not None and values.shape[1] != dim):
        raise ValueError(f"{type(system).__name__}.{method}: expected an array of shape ({n}, "
                         f"{'dim_z' if dim is None else dim}) for {n} state(s), one row a state, got shape "
                         f"{values.shape}")
    if not np.isfinite(values).all():
        # caught here rather than as a NaN estimate many steps later (or a simulation of NaNs)
        finite = np.isfinite(values).all(axis=1)
        where = "the state" if n == 1 else (f"{n - np.count_nonzero(finite)} of the {n} states (the first in row "
                                            f"{np.argmin(finite)})")
        raise ValueError(f"{type(system).__name__}.{method}: expected finite values, got NaN or infinite ones for "
                         f"{where} it was given: a state that grew without bound, or one where the model is not "
                         f"defined")
    return values


def estimates_and_states(system, estimates, states):
    """``estimates`` and ``states`` as float arrays of one shape ``(T, dim_x)``, for scoring.

    numpy would broadcast an ``(T, 1)`` array of estimates against ``(T, 2)`` states and score
    the wrong thing without a word. The states must be finite; an estimate may not be (a filter
    that diverged scores an infinite or NaN error, which the benchmark reports).
    """
    states = check_matrix(states, "states", n_features=system.dim_x)
    estimates = check_matrix(estimates, "estimates", finite=False)
    if estimates.shape != states.shape:
        raise ValueError(f"estimates: expected shape {states.shape} (one estimate for each of the states), "
                         f"got {estimates.shape}")
    return estimates, states


@lru_cache(maxsize=16)
def _noise_factor(cov_bytes, dim):
    """``A`` with ``A A^T = cov`` from the SVD, as numpy's ``multivariate_normal`` computes it; None
    when numpy would find ``cov`` not positive semi-definite (the same test)."""
    cov = np.frombuffer(cov_bytes).reshape(dim, dim)
    u, s, vh = np.linalg.svd(cov)
    if not np.allclose(np.dot(vh.T * s, vh), cov, rtol=1e-8, atol=1e-8):
        return None
    factor = u * np.sqrt(s)
    factor.setflags(write=False)  # shared by every later draw from this covariance
    return factor


def gaussian_noise(rng, cov, n):
    """``n`` draws of ``N(0, cov)``: the numbers of ``rng.multivariate_normal`` (its SVD factor, the
    same standard normals), with the factor of each covariance computed once. A simulation draws
    from one covariance every step, and numpy's decomposition and check took three quarters of its time.

    Parameters
    ----------
    rng : numpy.random.Generator
        The random numbers.
    cov : ndarray of shape (dim, dim)
        The covariance.
    n : int
        The number of draws.

    Returns
    -------
    ndarray of shape (n, dim)
        The draws.
    """
    dim = cov.shape[0]
    factor = _noise_factor(np.asarray(cov, dtype=np.float64).tobytes(), dim)
    if factor is None:  # numpy's own draw, with its warning
        return rng.multivariate_normal(np.zeros(dim), cov, size=n)
    return rng.standard_normal((n, dim)) @ factor.T


def model_covariance(system, name, dim):
    """``system``'s noise covariance ``name`` (``process_cov`` or ``observation_cov``), checked to
    be a ``(dim, dim)`` array.

    Parameters
    ----------
    system : System
        The system.
    name : str
        The attribute.
    dim : int
        The dimension of the noise.

    Returns
    -------
    ndarray of shape (dim, dim)
        The covariance.
    """
    given = getattr(system, name, None)
    if given is None or callable(given):
        # a method (def process_cov(self)) had numpy fail to read it as a number, with a TypeError
        got = "nothing" if given is None else "a method"
        raise ValueError(f"{type(system).__name__}.{name}: expected a ({dim}, {dim}) array (a class attribute, one set "
                         f"in __init__, or a property), got {got}")
    try:
        cov = check_real_output(given, f"{type(system).__name__}.{name}", "numbers")
    except ValueError:
        dtype = f" of dtype {given.dtype}" if hasattr(given, "dtype") else ""
        raise ValueError(f"{type(system).__name__}.{name}: expected a ({dim}, {dim}) array of real numbers, got "
                         f"{type(given).__name__}{dtype}") from None
    if cov.shape != (dim, dim):
        raise ValueError(f"{type(system).__name__}.{name}: expected an array of shape ({dim}, {dim}), "
                         f"got shape {cov.shape}")
    fault = _covariance_fault(cov.tobytes(), dim)
    if fault is not None:
        raise ValueError(f"{type(system).__name__}.{name}{fault}")
    return cov


@lru_cache(maxsize=64)
def _covariance_fault(cov_bytes, dim):
    """Why a covariance is not one (not finite, symmetric and positive semi-definite), as the end
    of a message that starts with its name, or None; kept per value, since a simulation or a
    particle filter reads a system's covariance every step."""
    try:
        check_covariance(np.frombuffer(cov_bytes).reshape(dim, dim), "", dim)
    except ValueError as error:
        return str(error)
    return None


def observation_mean_of(system, X, dim_z=None):
    """``system.observe_mean(X)``, checked to have one row of ``dim_z`` finite values a state.

    Parameters
    ----------
    system : System or sensor
        The system, or a sensor model (its ``dim_z``, when it declares one, is the default).
    X : ndarray of shape (n, dim_x)
        States.
    dim_z : int or None, default=None
        The observation's dimension; None: ``system.dim_z``, or any for a sensor without one.

    Returns
    -------
    ndarray of shape (n, dim_z)
        The mean observations.
    """
    dim_z = getattr(system, "dim_z", None) if dim_z is None else dim_z
    return model_values(system.observe_mean(X), system, "observe_mean", X.shape[0], dim_z)


def log_likelihood_of(model, z, X):
    """``model.observation_loglik(z, X)``, checked to be one real log density a state: finite, or
    -inf where the observation is impossible.

    A sensor written by a user may return a number, a column or complex values, which a particle
    step would broadcast or carry into the estimates, or a NaN, which would leave every later
    update without a likelihood and the filter silently on its predictions.

    Parameters
    ----------
    model : object with ``observation_loglik(z, X)``
        A system or a sensor model (its class name goes in the message).
    z : ndarray
        The observation.
    X : ndarray of shape (n, dim_x)
        The states (particles).

    Returns
    -------
    ndarray of shape (n,)
        The log likelihoods.
    """
    name = f"{type(model).__name__}.observation_loglik"
    n = X.shape[0]
    # a state so far from the observation that its squared distance overflows has likelihood 0
    with np.errstate(over="ignore", invalid="ignore"):
        values = model.observation_loglik(z, X)
    values = check_real_output(values, name, "log likelihoods")
    if values.shape != (n,):
        raise ValueError(f"{name}: expected an array of shape ({n},) for {n} state(s), one log likelihood a state, "
                         f"got shape {values.shape}")
    bad = np.isnan(values) | (values == np.inf)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: expected finite log likelihoods (or -inf where the observation is impossible), "
                         f"got {values[first]} at {bad.sum()} of {n} states, the first {X[first].tolist()}")
    return values


def initial_belief_of(system, z0):
    """``system.initial_belief(z0)``, checked by :func:`checked_belief` to be of the state's size."""
    return checked_belief(system.initial_belief(z0), system, "initial_belief", system.dim_x)


def checked_belief(belief, system, method, dim_x):
    """What ``system.method`` returned as a Gaussian belief, the pair ``(mean, cov)`` checked to be
    of the state's size: a user's system or sensor is named when it returns something else, not
    the filter's ``x0`` or its particles."""
    name = f"{type(system).__name__}.{method}"
    if not isinstance(belief, (tuple, list)) or len(belief) != 2:
        raise ValueError(f"{name}: expected a pair (mean, cov), got {type(belief).__name__}")
    return (check_vector(belief[0], f"{name}: the mean", length=dim_x),
            check_covariance(belief[1], f"{name}: the covariance", dim_x))


def transition_mean_given(system, X, u=None):
    """``system.transition_mean(X)``, or ``system.transition_mean(X, u)`` when a control is given
    (only controlled systems take one).

    Parameters
    ----------
    system : System
        The system.
    X : ndarray of shape (n, dim_x)
        States.
    u : array-like or None
        The control.

    Returns
    -------
    ndarray of shape (n, dim_x)
        The mean of the next state, checked to have one row of ``dim_x`` values a state.
    """
    mean = system.transition_mean(X) if u is None else system.transition_mean(X, u)
    return model_values(mean, system, "transition_mean", X.shape[0], system.dim_x)


def transition_jacobian_given(system, x, u=None):
    """``system.transition_jacobian(x)``, or ``(x, u)`` for a control and a Jacobian that takes one
    (one written as ``transition_jacobian(self, x)`` declares that it does not depend on the
    control), checked to be a finite ``(dim_x, dim_x)`` array.

    Parameters
    ----------
    system : System
        The system.
    x : ndarray of shape (dim_x,)
        The state.
    u : array-like or None
        The control.

    Returns
    -------
    ndarray of shape (dim_x, dim_x)
        ``df/dx`` at ``x`` (under ``u``).
    """
    method = system.transition_jacobian
    # a method's function, whose first parameter is self; or a function set on the instance
    function = getattr(method, "__func__", method)
    takes = u is not None and _takes_control(function, 2 if function is not method else 1)
    return model_jacobian(method(x, u) if takes else method(x), system, "transition_jacobian",
                          (system.dim_x, system.dim_x))


def model_jacobian(values, system, method, shape):
    """What ``system.method`` returned for one state, as a finite float array of ``shape``.

    Parameters
    ----------
    values : array-like
        The returned Jacobian.
    system : System
        The system (its class name goes in the message).
    method : str
        The method's name.
    shape : tuple of int
        The Jacobian's shape, ``(dim_out, dim_x)``.

    Returns
    -------
    ndarray of shape ``shape``
        The Jacobian.
    """
    values = check_real_output(values, f"{type(system).__name__}.{method}", "values")
    if values.shape != shape or not np.all(np.isfinite(values)):
        raise ValueError(f"{type(system).__name__}.{method}: expected a finite array of shape {shape}, got "
                         f"{'shape ' + str(values.shape) if values.shape != shape else 'NaN or infinite values'}")
    return values


@lru_cache(maxsize=64)
def _takes_control(function, positional):
    """Whether ``function`` takes more than ``positional`` arguments (self and the state, or the
    state alone): a control after the state."""
    import inspect

    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): the state alone
        return False
    named = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(named) > positional or any(p.kind is p.VAR_POSITIONAL for p in params)


def check_dimensions(system):
    """``system`` itself, once its ``dim_x`` and ``dim_z`` (and ``dim_u``, if it has one) are
    positive integers: every array made for it is sized by them, and a subclass that forgot one
    would otherwise fail deep inside numpy with a ``TypeError`` about ``None``."""
    name = type(system).__name__
    dims = ("dim_x", "dim_z") + (("dim_u",) if getattr(system, "dim_u", None) is not None else ())
    for attr in dims:
        check_int(getattr(system, attr, None), f"{name}.{attr}", minimum=1)
    return system


def initial_state_of(system, rng):
    """``system.initial_state(rng)`` as a finite state of ``dim_x`` values, the user's system named
    when it returns something else."""
    return check_vector(system.initial_state(rng), f"{type(system).__name__}.initial_state",
                        length=system.dim_x)


def check_simulation_memory(system, T, dim_u=0):
    """Refuse, before the first step, a simulation of ``T`` steps whose arrays would not fit in the
    machine's memory: the states and controls, and the observations three times over (an image
    system renders them and adds noise drawn to their shape; 500,000 frames of 64 x 64 pixels would
    have the process killed part way)."""
    dim_z = int(np.prod(getattr(system, "obs_shape", None) or (system.dim_z or 1,)))
    check_memory(8.0 * T * (system.dim_x + dim_u + 3 * dim_z), "T",
                 f"{T:,} steps of {type(system).__name__} ({dim_z:,} observed values a step)")


def controlled_run(system, T, policy, rng=None, burn_in=0, return_latent=False):
    """A run of a controlled ``system`` driven by ``policy(x, rng) -> u`` from its initial state.

    Parameters
    ----------
    system : System
        With ``dim_u``, ``initial_state``, ``sample_transition(X, rng, u)`` and ``sample_observation``.
    T : int
        The number of steps returned.
    policy : callable
        ``policy(x, rng)``: the control to apply in state ``x`` (shape ``(dim_u,)``, checked each
        step).
    rng : int, numpy.random.Generator or None
        Seed or generator.
    burn_in : int, default=0
        Steps driven and discarded first.
    return_latent : bool, default=False
        Refused when true: a controlled run has no latent variables, and its three arrays (the
        controls second) are not the ``(states, observations, latent)`` of an uncontrolled
        system's ``simulate(..., return_latent=True)``, which code written for one would misread.

    Returns
    -------
    states : ndarray of shape (T, dim_x)
        The states.
    controls : ndarray of shape (T, dim_u)
        ``controls[t]`` moved the system from ``states[t - 1]`` to ``states[t]``.
    observations : ndarray
        The observation at each state.
    """
    if check_bool(return_latent, "return_latent"):
        raise ValueError(f"return_latent: {type(system).__name__} is controlled and has no latent variables; its "
                         f"simulate returns (states, controls, observations)")
    T = check_int(T, "T")
    burn_in = check_int(burn_in, "burn_in", minimum=0)
    rng = check_rng(rng, "rng")
    if not callable(policy):
        raise ValueError(f"policy: expected a callable policy(x, rng) giving each step's control, got "
                         f"{type(policy).__name__}")
    check_dimensions(system)
    check_simulation_memory(system, T, system.dim_u)
    x = initial_state_of(system, rng)
    states, controls = np.empty((T, system.dim_x)), np.empty((T, system.dim_u))
    for t in range(burn_in + T):
        # checked a step at a time: a control of the wrong length would broadcast into the model
        u = check_step_control(policy(x, rng), system.dim_u, f"policy(x, rng) at step {t}")
        x = system.sample_transition(x, rng, u)[0]
        if t >= burn_in:
            states[t - burn_in], controls[t - burn_in] = x, u
    return states, controls, system.sample_observation(states, rng)


def finite_difference_jacobian(mean, x):
    """The Jacobian of a vectorised map at one point, by central differences.

    Each coordinate is moved by ``h_j = eps^(1/3) * max(1, |x_j|)`` (``eps`` the float64 machine
    epsilon; the step that balances truncation and round-off for central differences), all
    ``2 dim_x`` points evaluated in one call.

    Parameters
    ----------
    mean : callable
        Maps an array of shape (n, dim_x) to one of shape (n, m): ``transition_mean`` or
        ``observe_mean``.
    x : array-like of shape (dim_x,)
        The point.

    Returns
    -------
    ndarray of shape (m, dim_x)
        ``d mean / dx`` at ``x``, to about 1e-10 relative for smooth maps.

    Examples
    --------
    >>> import numpy as np
    >>> J = finite_difference_jacobian(lambda X: np.column_stack([np.sin(X[:, 0]) * X[:, 1]]), [0.0, 2.0])
    >>> np.round(J, 8)
    array([[2., 0.]])
    """
    x = check_vector(np.ravel(x), "x")
    h = np.finfo(np.float64).eps ** (1 / 3) * np.maximum(1.0, np.abs(x))
    steps = np.diag(h)
    d = x.shape[0]
    values = np.asarray(mean(np.vstack([x + steps, x - steps])), dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != 2 * d:
        # a map that returns one value a point as a 1-D array broadcast into a (d, d) "Jacobian"
        raise ValueError(f"mean: expected an array of shape ({2 * d}, m) for the {2 * d} points it was given, one "
                         f"row a point, got shape {values.shape}")
    return ((values[:d] - values[d:]) / (2.0 * h[:, None])).T


class System:
    """A state-space model ``x_{t+1} = f(x_t) + N(0, Q)``, ``z_t = h(x_t) + N(0, R)``.

    Subclasses define ``dim_x``, ``dim_z``, :meth:`transition_mean`, :meth:`observe_mean`,
    ``process_cov`` and ``observation_cov``, :meth:`initial_state` (to simulate and for the
    particle filter) and :meth:`initial_belief` (for the Kalman filters), and may override the
    Jacobians (central finite differences of the means by default), the samplers and
    :meth:`errors`. The guide's "Your own data" page writes one.
    """

    #: dimension of the state
    dim_x = None
    #: dimension of a flattened observation
    dim_z = None
    #: shape of one observation (``(dim_z,)`` for vectors, e.g. ``(64, 64)`` for images)
    obs_shape = None
    #: the largest image side, in pixels, a system that renders images accepts
    MAX_PIXELS = 4096

    def errors(self, estimates, states):
        """How far state estimates are from the true states, as the benchmark reports it.

        Parameters
        ----------
        estimates, states : ndarray of shape (T, dim_x)
            Estimates and true states, step by step.

        Returns
        -------
        dict
            ``{"mse": mean over steps of the squared Euclidean error}``; a system whose state
            holds an angle adds its own entries (see :meth:`RobotInRoom.errors`).

        Raises
        ------
        ValueError
            If the two do not have the same shape, ``(T, dim_x)``, or a state is not finite.
        """
        estimates, states = estimates_and_states(self, estimates, states)
        return {"mse": float(np.mean(np.sum((estimates - states) ** 2, axis=1)))}

    # -- the model ------------------------------------------------------------------------------
    def _missing(self, method, what):
        return NotImplementedError(f"{type(self).__name__}.{method}: this system does not define {what}; "
                                   f"subclasses of System implement it to be used here")

    def transition_mean(self, X):
        """``f(x)`` for each row of ``X`` (n, dim_x): the mean of the next state.

        Parameters
        ----------
        X : ndarray of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n, dim_x)
            The mean next states.
        """
        raise self._missing("transition_mean", "its transition mean f(x)")

    def transition_jacobian(self, x, u=None):
        """The Jacobian of ``f`` at one state ``x`` (dim_x,), for the extended Kalman filter.

        By default central finite differences of :meth:`transition_mean`
        (:func:`finite_difference_jacobian`); a system with a closed form overrides it. A
        controlled system's Jacobian depends on the control (a unicycle's heading moves its
        position by the speed it is given): the filter passes it as ``u`` to an override that takes
        one.

        Parameters
        ----------
        x : ndarray of shape (dim_x,)
            The state.
        u : ndarray of shape (dim_u,) or None
            The control of the step, for a controlled system.

        Returns
        -------
        ndarray of shape (dim_x, dim_x)
            ``df/dx`` at ``x``.
        """
        return finite_difference_jacobian(lambda X: transition_mean_given(self, X, u), x)

    def observe_mean(self, X):
        """``h(x)`` for each row of ``X``: the mean observation.

        Parameters
        ----------
        X : ndarray of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n, dim_z)
            The mean observations.
        """
        raise self._missing("observe_mean", "its observation mean h(x)")

    def observation_jacobian(self, x):
        """The Jacobian of ``h`` at one state ``x``, for the extended Kalman filter.

        By default central finite differences of :meth:`observe_mean`
        (:func:`finite_difference_jacobian`); a system with a closed form overrides it.

        Parameters
        ----------
        x : ndarray of shape (dim_x,)
            The state.

        Returns
        -------
        ndarray of shape (dim_z, dim_x)
            ``dh/dx`` at ``x``.
        """
        return finite_difference_jacobian(lambda X: observation_mean_of(self, X), x)

    def observation_residual(self, a, b):
        """The difference ``a - b`` of two observations, as the Kalman filters take it.

        A system whose observation holds an angle (a bearing) overrides it to wrap the angle's
        difference into ``(-pi, pi]``; by default the plain difference.

        Parameters
        ----------
        a, b : ndarray of shape (dim_z,)
            Observations.

        Returns
        -------
        ndarray of shape (dim_z,)
            Their difference.
        """
        return np.subtract(a, b)

    def observation_average(self, Z, weights):
        """The weighted mean of observations (the unscented filter's predicted observation).

        A system whose observation holds an angle overrides it (a circular mean); by default
        ``weights @ Z``.

        Parameters
        ----------
        Z : ndarray of shape (n, dim_z)
            Observations (sigma points through ``h``).
        weights : ndarray of shape (n,)
            Their weights.

        Returns
        -------
        ndarray of shape (dim_z,)
            The mean.
        """
        return np.dot(weights, Z)

    def sample_transition(self, X, rng, u=None):
        """Draw the next state for each row of ``X``: the transition mean plus ``N(0, process_cov)``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x) or (dim_x,)
            Current states.
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).
        u : array-like of shape (dim_u,) or (n, dim_u), optional
            The control, for a controlled system (one with ``dim_u``); None for the others.

        Returns
        -------
        ndarray of shape (n, dim_x)
            A draw of ``x_{t+1}`` given each row.
        """
        rng = check_rng(rng, "rng")
        X = np.atleast_2d(X)
        mean = transition_mean_given(self, X, u)  # first: a bad control fails before any draw
        return mean + gaussian_noise(rng, model_covariance(self, "process_cov", self.dim_x), X.shape[0])

    def sample_observation(self, X, rng, return_latent=False):
        """Draw an observation for each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n, dim_x) or (dim_x,)
            States.
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).
        return_latent : bool, default=False
            Also return what generated each observation (for image systems: the jittered position
            or view angle actually rendered; for vector systems, the observation itself).

        Returns
        -------
        observations : ndarray of shape (n, dim_z), or (n, rows, columns[, channels]) for images
            A draw of ``z_t`` given each row.
        latent : ndarray of shape (n, k)
            Only with ``return_latent``.
        """
        rng = check_rng(rng, "rng")
        X = np.atleast_2d(X)
        mean = observation_mean_of(self, X)
        noise = gaussian_noise(rng, model_covariance(self, "observation_cov", self.dim_z), X.shape[0])
        obs = mean + noise
        return (obs, obs.copy()) if return_latent else obs

    def observation_loglik(self, z, X):
        """The observation log-density ``log p(z | x)`` (Gaussian observation noise here).

        Parameters
        ----------
        z : array-like of shape (dim_z,)
            One observation.
        X : array-like of shape (n, dim_x)
            States.

        Returns
        -------
        ndarray of shape (n,)
            ``log p(z | x)`` for each row of ``X``, up to a constant the same for every row. An
            override returns real values, finite or ``-inf`` where ``z`` is impossible: the
            particle filters refuse NaN, ``+inf`` or another shape, naming the class.
        """
        X = np.atleast_2d(X)
        return gaussian_loglik(one_observation(self, z) - observation_mean_of(self, X),
                               model_covariance(self, "observation_cov", self.dim_z), "observation_cov")

    def initial_state(self, rng):
        """A draw of the state a simulation starts from (before its burn-in).

        Parameters
        ----------
        rng : int, numpy.random.Generator or None
            The random numbers (a seed is made a generator: the same seed, the same draw).

        Returns
        -------
        ndarray of shape (dim_x,)
            The initial state.
        """
        raise self._missing("initial_state", "an initial state")

    def initial_belief(self, z0):
        """A Gaussian belief ``(mean, cov)`` about ``x_0`` from the first observation alone.

        Parameters
        ----------
        z0 : ndarray
            The first observation.

        Returns
        -------
        mean : ndarray of shape (dim_x,)
            The belief's mean.
        cov : ndarray of shape (dim_x, dim_x)
            Its covariance.
        """
        raise self._missing("initial_belief", "a belief from one observation")

    # -- simulation -------------------------------------------------------------------------------
    def simulate(self, T, rng=None, burn_in=100, return_latent=False):
        """Simulate ``T`` steps after ``burn_in`` discarded ones.

        Parameters
        ----------
        T : int
            The number of steps returned.
        rng : int, numpy.random.Generator or None
            Seed or generator.
        burn_in : int, default=100
            Steps simulated and discarded first, so the states start near the stationary law.
        return_latent : bool, default=False
            Also return what generated each observation (see :meth:`sample_observation`).

        Returns
        -------
        states : ndarray of shape (T, dim_x)
            The hidden states.
        observations : ndarray of shape (T, dim_z), or (T, rows, columns[, channels]) for images
            The observation at each state.
        latent : ndarray
            Only with ``return_latent`` (see :meth:`sample_observation`).
        """
        if getattr(self, "dim_u", None) is not None:
            # its transition needs a control a step, which only the caller knows how to choose
            raise ValueError(f"{type(self).__name__}.simulate: a controlled system (dim_u = {self.dim_u}) is driven by "
                             f"controls; simulate it with kbfilter.systems.controlled_run(system, T, policy, rng), "
                             f"policy(x, rng) giving each step's control, or override simulate")
        T = check_int(T, "T")
        burn_in = check_int(burn_in, "burn_in", minimum=0)
        rng = check_rng(rng, "rng")
        check_dimensions(self)
        check_simulation_memory(self, T)
        x = initial_state_of(self, rng)
        states = np.empty((T, self.dim_x))
        for t in range(burn_in + T):
            if t >= burn_in:
                states[t - burn_in] = x
            x = self.sample_transition(x[None, :], rng)[0]
        if return_latent:
            return (states, *self.sample_observation(states, rng, return_latent=True))
        return states, self.sample_observation(states, rng)
