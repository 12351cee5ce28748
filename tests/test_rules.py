import numpy as np
import pytest
from sklearn.kernel_approximation import RBFSampler

import kbfilter as kb
from kbfilter import GaussianKernel, KernelBayesRule, KernelMean, NumericalWarning


# -- sum and chain rules -----------------------------------------------------------------------
def linear_gaussian_pairs(n, rng, c=2.0, sigma=0.5):
    A = rng.normal(size=(n, 1))
    return A, c * A + sigma * rng.normal(size=(n, 1))


def sum_rule_moment_errors(n, method, seed):
    rng = np.random.default_rng(seed)
    A, B = linear_gaussian_pairs(n, rng)
    prior = KernelMean(rng.normal(0.5, 0.7, size=(400, 1)), kernel=GaussianKernel(1.0))
    cme = kb.ConditionalEmbedding(reg=1e-4, method=method, n_neighbors=min(n, 100), rank=min(n, 300),
                                  random_state=seed).fit(A, B)
    out = kb.kernel_sum_rule(prior, cme)
    m1 = out.expect(lambda b: b[:, 0])
    m2 = out.expect(lambda b: b[:, 0] ** 2)
    # b = 2 a + N(0, 0.25) with a ~ N(0.5, 0.49): E b = 1, E b^2 = 4 (0.49 + 0.25) + 0.25
    return abs(m1 - 1.0), abs(m2 - 3.21)


@pytest.mark.parametrize("method", ["exact", "knn", "nystrom", "icf"])
def test_sum_rule_moments_of_linear_gaussian_conditional(method):
    small = np.mean([sum_rule_moment_errors(200, method, s) for s in range(4)], axis=0)
    large = np.mean([sum_rule_moment_errors(3000, method, s) for s in range(4)], axis=0)
    assert large[0] < 0.05 and large[1] < 0.15
    assert large.sum() < small.sum()


def test_sum_rule_with_sparse_knn_weights_keeps_support_only():
    rng = np.random.default_rng(0)
    A, B = linear_gaussian_pairs(2000, rng)
    cme = kb.ConditionalEmbedding(method="knn", n_neighbors=20).fit(A, B)
    out = kb.kernel_sum_rule(KernelMean([[0.0], [0.1]]), cme)
    assert len(out) <= 40
    assert abs(out.mean()[0]) < 0.3


def test_chain_rule_marginals_agree_with_sum_rule_and_prior():
    rng = np.random.default_rng(1)
    A, B = linear_gaussian_pairs(1500, rng)
    prior = KernelMean(rng.normal(0.5, 0.7, size=(400, 1)), kernel=GaussianKernel(1.0))
    cme = kb.ConditionalEmbedding(GaussianKernel(1.0), reg=1e-5).fit(A, B)
    joint = kb.kernel_chain_rule(prior, cme)
    out = kb.kernel_sum_rule(prior, cme)
    np.testing.assert_allclose(joint.marginal("out").weights, out.weights)
    back = joint.marginal("in")
    training = KernelMean(A, kernel=GaussianKernel(1.0))
    assert prior.mmd(back) < 0.1 * prior.mmd(training)
    # E[a b] = E[2 a^2] = 2 (0.49 + 0.25)
    assert joint.expect(lambda b, a: a[:, 0] * b[:, 0]) == pytest.approx(1.48, abs=0.1)


def test_rules_reject_bad_arguments():
    rng = np.random.default_rng(2)
    A, B = linear_gaussian_pairs(50, rng)
    cme = kb.ConditionalEmbedding().fit(A, B)
    with pytest.raises(ValueError, match="prior: expected points of dimension 1"):
        kb.kernel_sum_rule(KernelMean(np.arange(6.0).reshape(3, 2)), cme)
    with pytest.raises(ValueError, match="conditional"):
        kb.kernel_sum_rule(KernelMean(np.arange(3.0)[:, None]), "cme")
    with pytest.raises(ValueError, match="prior: expected a KernelMean"):
        kb.kernel_chain_rule(np.zeros((3, 1)), cme)
    # a joint embedding built by hand: one weight per pair, finite (three weights on 50 pairs were
    # taken, and the error came later, from expect, blaming f)
    kernel = GaussianKernel(1.0).fit(A)
    with pytest.raises(ValueError, match="weights: expected length 50, got 3"):
        kb.JointKernelMean(B, A, np.ones(3), kernel, kernel)
    with pytest.raises(ValueError, match="points_out and points_in: expected the same number of samples"):
        kb.JointKernelMean(B[:10], A, np.ones(10), kernel, kernel)
    with pytest.raises(ValueError, match="weights: contains NaN"):
        kb.JointKernelMean(B, A, np.full(50, np.nan), kernel, kernel)
    # expect checks f as KernelMean.expect does (a NaN from f was summed into a NaN expectation)
    joint = kb.kernel_chain_rule(KernelMean(A, kernel=kernel), cme)
    with pytest.raises(ValueError, match="f: returned values that are not finite"):
        joint.expect(lambda b, a: np.log(a[:, 0]))
    with pytest.raises(ValueError, match=r"f: expected a callable of the \(n, d\) and \(n, d\) points, got float"):
        joint.expect(1.0)
    with pytest.raises(ValueError, match="f: expected an output with 50 rows, got shape"):
        joint.expect(lambda b, a: 1.0)


# -- KuLSIF --------------------------------------------------------------------------------------
def test_kulsif_recovers_ratio_of_two_gaussians_on_a_grid():
    # Xu et al. (2022) Appendix A: pi = N(0, 1), p = N(0, 2), r0(x) = sqrt(2) exp(-x^2 / 4)
    rng = np.random.default_rng(3)
    states = np.sort(rng.normal(0, np.sqrt(2), size=3000))[:, None]
    prior = KernelMean(rng.normal(0, 1, size=(3000, 1)))
    r = kb.kulsif_weights(states, prior, GaussianKernel(np.sqrt(2)), reg=1e-3)
    grid = np.linspace(-2, 2, 9)
    idx = np.searchsorted(states[:, 0], grid)
    truth = np.sqrt(2) * np.exp(-states[idx, 0] ** 2 / 4)
    np.testing.assert_allclose(r[idx], truth, atol=0.12)


def test_kulsif_rejects_bad_reg():
    with pytest.raises(ValueError, match="reg"):
        kb.kulsif_weights(np.arange(5.0)[:, None], KernelMean([[0.0]], kernel=GaussianKernel(1.0)), reg=-1.0)


# -- kernel Bayes' rule -----------------------------------------------------------------------------
def gaussian_bayes_problem(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    z = x + 0.5 * rng.normal(size=(n, 1))
    prior = KernelMean(rng.normal(0.5, 0.6, size=(500, 1)))
    return x, z, prior


def exact_posterior_mean(z):
    # prior N(0.5, 0.36), likelihood z | x ~ N(x, 0.25)
    v = 1 / (1 / 0.36 + 1 / 0.25)
    return v * (0.5 / 0.36 + z / 0.25)


@pytest.mark.parametrize("method, reg_update", [("iw", 1e-2), ("original", 1e-1)])
def test_kbr_posterior_mean_matches_gaussian_posterior(method, reg_update):
    x, z, prior = gaussian_bayes_problem(1000, 4)
    kbr = KernelBayesRule(method=method, reg_prior=1e-3, reg_update=reg_update).fit(x, z)
    zs = np.array([-0.5, 0.3, 1.0, 1.5])
    est = np.array([m.mean()[0] for m in kbr.posterior_batch(prior, zs[:, None])])
    np.testing.assert_allclose(est, exact_posterior_mean(zs), atol=0.1)
    one = kbr.posterior(prior, [1.0])
    assert one.mean()[0] == pytest.approx(est[2], abs=1e-8)  # same solve, one or four right-hand sides


@pytest.mark.parametrize("method", ["iw", "original"])
def test_a_prior_is_read_as_the_probability_its_weights_describe(method):
    # the rule's regularisers do not scale with the prior's mass: counts (or importance weights) given
    # as they are moved the posterior without a word (its mean by 1 % for iw, 6 % for the original
    # rule on this problem, where the true posterior mean is 0.677)
    x, z, prior = gaussian_bayes_problem(300, 6)
    kbr = KernelBayesRule(method=method, reg_prior=1e-3, reg_update=1e-2).fit(x, z)
    counts = KernelMean(prior.points, np.full(len(prior), 3.0), prior.kernel)
    # (the original rule squares an ill-conditioned matrix: its round-off reaches 1e-8 of a weight)
    np.testing.assert_allclose(kbr.posterior(counts, [0.8]).weights, kbr.posterior(prior, [0.8]).weights, rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(kb.kulsif_weights(x, counts, prior.kernel, reg=1e-3),
                               kb.kulsif_weights(x, prior, prior.kernel, reg=1e-3), rtol=1e-9, atol=1e-12)
    negative = KernelMean(prior.points, -prior.weights, prior.kernel)
    for call in (lambda: kbr.posterior(negative, [0.8]), lambda: kb.kulsif_weights(x, negative, reg=1e-3),
                 lambda: kb.KernelBayesFilter().fit(x, z).reset(prior=negative),
                 lambda: kb.KernelBayesFilter(approximation="local").fit(x, z).reset(prior=negative)):
        with pytest.raises(ValueError, match=r"prior.weights: expected weights with a positive sum .* got sum -1"):
            call()


def test_support_restricted_iw_equals_full_solve():
    x, z, prior = gaussian_bayes_problem(300, 5)
    prior = KernelMean(np.random.default_rng(0).normal(1.5, 0.3, size=(200, 1)))  # many r_i = 0
    kbr = KernelBayesRule(reg_prior=1e-2, reg_update=1e-3).fit(x, z)
    r = kbr.ratio(kbr.prior_values(prior))
    assert 0 < np.count_nonzero(r) < len(r)
    k = kbr.kernel_z_(z, [[1.2]])[:, 0]
    sq = np.sqrt(r)
    full = sq * np.linalg.solve(sq[:, None] * kbr.G_z_ * sq[None, :] + 300 * 1e-3 * np.eye(300), sq * k)
    np.testing.assert_allclose(kbr.posterior(prior, [1.2]).weights, full, atol=1e-8)


def test_feature_form_iw_converges_to_kernel_form():
    x, z, prior = gaussian_bayes_problem(400, 6)
    kz = GaussianKernel(0.7)
    kernel_post = KernelBayesRule(kernel_z=kz, reg_prior=1e-3, reg_update=1e-3).fit(x, z)
    zs = np.array([[-0.5], [0.4], [1.2]])
    ref = np.array([m.mean()[0] for m in kernel_post.posterior_batch(prior, zs)])
    errors = []
    for n_features in (20, 200, 5000):
        errs = []
        for seed in range(3):
            rff = RBFSampler(gamma=1 / (2 * 0.7**2), n_components=n_features, random_state=seed)
            feat = KernelBayesRule(features=rff, reg_prior=1e-3, reg_update=1e-3).fit(x, z)
            est = np.array([m.mean()[0] for m in feat.posterior_batch(prior, zs)])
            errs.append(np.max(np.abs(est - ref)))
        errors.append(np.mean(errs))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.02


@pytest.mark.parametrize("observations", ["kernel", "features"])
def test_a_zero_original_update_falls_back_to_ckme_regression_in_closed_form(observations):
    """The original rule with a projected prior of zero (a prior far from every training state)
    has the update 0, and takes its stated fallback, CKME regression ``(G_z + n delta I)^{-1} k_z(z)``:
    the same weights whether the observations are kept as a Gram matrix or as explicit features."""
    x, z, _ = gaussian_bayes_problem(120, 4)
    n, delta = len(x), 1e-2
    if observations == "kernel":
        kbr = KernelBayesRule(method="original", kernel_z=GaussianKernel(0.6), reg_update=delta).fit(x, z)
        G, k = kbr.kernel_z_(z), kbr.kernel_z_(z, [[0.7]])
    else:
        rff = RBFSampler(gamma=1.0, n_components=30, random_state=0)
        kbr = KernelBayesRule(method="original", features=rff, reg_update=delta).fit(x, z)
        Phi = kbr.features_.transform(z)   # the rule fitted a clone of the map it was given
        G, k = Phi @ Phi.T, Phi @ kbr.features_.transform([[0.7]]).T
    W, info = kbr.weights_from_projection(np.zeros(n), kbr.observation_vectors([[0.7]]))
    assert set(info) == {"regression"}
    np.testing.assert_allclose(W, np.linalg.solve(G + n * delta * np.eye(n), k), rtol=1e-8, atol=1e-12)


class _MapWithoutParams:
    """A feature map without ``get_params`` (scikit-learn's ``clone`` needs it)."""

    def fit(self, Z, y=None):
        return self

    def transform(self, Z):
        return np.asarray(Z)


class _FlatMap(RBFSampler):
    def transform(self, Z):
        return super().transform(Z)[:, 0]  # one value an observation, but 1-D


class _OverflowingMap(RBFSampler):
    def transform(self, Z):
        out = super().transform(Z)
        return np.where(np.asarray(Z)[:, :1] > 5.0, np.inf, out)  # as an overflow far from the data


@pytest.mark.parametrize("features, where, message", [
    ("rff", "fit", r"features: expected None or a scikit-learn transformer .* got str$"),
    (_MapWithoutParams(), "fit",
     r"features: expected None or a scikit-learn transformer .* got _MapWithoutParams \(it has no get_params\)"),
    (_FlatMap(n_components=20, random_state=0), "fit",
     r"features: expected the feature map to give one row per observation, shape \(120, n_features\), got shape "
     r"\(120,\)"),
    (_OverflowingMap(n_components=20, random_state=0), "posterior",
     r"features: the feature map gave NaN or infinite values"),
])
def test_a_rules_observation_features_are_named_when_they_are_not_a_map_or_its_rows(features, where, message):
    """The rule's ``features`` are checked before any work, and what they give (at fit and on a test
    observation) is one finite row an observation; before, a ``TypeError`` from ``clone`` or an
    ``AttributeError``, numpy's broadcast of a flat map, and NaN posterior weights."""
    x, z, _ = gaussian_bayes_problem(120, 4)
    rule = KernelBayesRule(features=features)
    if where == "fit":
        with pytest.raises(ValueError, match=message):
            rule.fit(x, z)
        return
    rule.fit(x, z)
    prior = KernelMean(x, kernel=rule.kernel_x_)
    assert np.all(np.isfinite(rule.posterior(prior, [1.0]).weights))
    with pytest.raises(ValueError, match=message):
        rule.posterior(prior, [6.0])


def test_a_rules_observations_are_checked_with_their_name():
    x, z, _ = gaussian_bayes_problem(120, 4)
    rule = KernelBayesRule().fit(x, z)
    with pytest.raises(ValueError, match="z: Complex data not supported"):
        rule.observation_vectors([1.0 + 1j])  # numpy's TypeError about float()
    with pytest.raises(ValueError, match="z: expected a numeric array, got None among the values"):
        rule.observation_vectors([[1.0], [None]])


def test_all_zero_ratio_falls_back_and_reports_it():
    x, z, _ = gaussian_bayes_problem(200, 7)
    far = KernelMean(np.full((10, 1), 50.0), kernel=GaussianKernel(1.0))
    kbr = KernelBayesRule(kernel_x=GaussianKernel(0.5), reg_prior=1e-2, reg_update=1e-2).fit(x, z)
    with pytest.warns(NumericalWarning, match="every KuLSIF weight is 0"):
        post = kbr.posterior(far, [1.0])
    assert "uniform_ratio" in post.info
    assert np.all(np.isfinite(post.weights)) and np.any(post.weights != 0)
    # CKME regression from the observation: the estimate follows z
    assert 0.3 < post.mean()[0] < 1.2
    # using the rule does not change it: the next posterior reports its own fallback
    assert "uniform_ratio" in kbr.posterior(far, [0.5]).info
    assert kbr.diagnostics_["uniform_ratio"] == 0  # fit-time fallbacks only
    assert kbr.posterior(None, [0.5]).info == {}


@pytest.mark.parametrize("method", ["iw", "original"])
def test_an_observation_beyond_every_training_observation_gives_the_prior_and_says_so(method):
    # the observation kernel underflows to 0 at every training observation, so no posterior weight is
    # positive; the weights were all 0 and the error came only from mean(), naming its weights
    x, z, prior = gaussian_bayes_problem(300, 9)
    kbr = KernelBayesRule(method=method, reg_prior=1e-3, reg_update=1e-2).fit(x, z)
    on_states = np.maximum(kbr.prior_projection(prior), 0)
    on_states /= on_states.sum()
    with pytest.warns(NumericalWarning, match="no posterior weight was positive; returned the prior"):
        far, near = kbr.posterior_batch(prior, [[1e3], [0.8]])
    np.testing.assert_allclose(far.weights, on_states)
    assert far.mean()[0] == pytest.approx(0.5, abs=0.1)  # the prior's mean
    assert "collapsed" in far.info and "nonpositive_sum" not in far.info
    np.testing.assert_allclose(near.weights, kbr.posterior(prior, [0.8]).weights, atol=1e-12)
    assert not {"collapsed", "nonpositive_sum"} & set(near.info)  # each posterior reports its own update
    ratio = np.exp(-((x[:, 0] - 0.5) ** 2) / 0.72) / np.exp(-x[:, 0] ** 2 / 2)
    with pytest.warns(NumericalWarning, match="no posterior weight was positive"):
        np.testing.assert_allclose(kbr.posterior_given_ratio(ratio, [1e3]).weights, ratio / ratio.sum())


def test_true_ratio_variant():
    x, z, prior = gaussian_bayes_problem(500, 8)
    kbr = KernelBayesRule(reg_prior=1e-3, reg_update=1e-2).fit(x, z)
    # pi = N(0.5, 0.36) over p = N(0, 1)
    r0 = np.exp(-((x[:, 0] - 0.5) ** 2) / 0.72) / 0.6 / np.exp(-x[:, 0] ** 2 / 2)
    post = kbr.posterior_given_ratio(r0, [1.0])
    assert post.mean()[0] == pytest.approx(exact_posterior_mean(1.0), abs=0.15)
    with pytest.raises(ValueError, match="ratio: expected length 500"):
        kbr.posterior_given_ratio(r0[:-1], [1.0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda kbr, prior: kbr.posterior(prior, [1.0, 2.0]), "z: expected length 1"),
        (lambda kbr, prior: kbr.posterior(prior, [np.nan]), "z: contains NaN"),
        (lambda kbr, prior: kbr.posterior(KernelMean(np.arange(8.0).reshape(4, 2)), [1.0]), "prior: expected points of dimension 1"),
        (lambda kbr, prior: kbr.posterior_batch(prior, np.zeros((3, 2))),
         r"z: expected 1 columns \(features per sample\)"),
        (lambda kbr, prior: kbr.posterior("prior", [1.0]), "prior: expected a KernelMean"),
        # numpy's own conversion named nothing ("could not convert string to float"; None became NaN)
        (lambda kbr, prior: kbr.posterior(prior, "one"), "z: expected a numeric 1-D array"),
        (lambda kbr, prior: kbr.posterior_given_ratio(np.ones(60), None), "z: expected a numeric 1-D array, got None"),
        (lambda kbr, prior: KernelBayesRule().fit(None, [1.0, 2.0]), "states: expected a numeric array, got None"),
        (lambda kbr, prior: kbr.posterior(KernelMean(np.zeros((3, 1)), [1.0, None, 2.0]), [1.0]),
         "weights: expected .* got None among the values"),
    ],
)
def test_kbr_bad_input(call, match):
    x, z, prior = gaussian_bayes_problem(60, 9)
    kbr = KernelBayesRule().fit(x, z)
    with pytest.raises(ValueError, match=match):
        call(kbr, prior)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"reg_prior": -1.0}, "reg_prior"), ({"reg_update": 0.0}, "reg_update"), ({"method": "kbr"}, "method")],
)
def test_kbr_bad_hyperparameters(kwargs, match):
    x, z, _ = gaussian_bayes_problem(60, 9)
    with pytest.raises(ValueError, match=match):
        KernelBayesRule(**kwargs).fit(x, z)


def test_kbr_fit_rejects_mismatched_lengths():
    x, z, _ = gaussian_bayes_problem(60, 9)
    with pytest.raises(ValueError, match="same number of samples"):
        KernelBayesRule().fit(x, z[:-1])
    with pytest.raises(ValueError, match="prior weights|weights: expected length"):
        KernelMean(x[:5], np.ones(4))


def test_push_through_feature_form_equals_kernel_form_on_features():
    from sklearn.preprocessing import FunctionTransformer

    x, z, prior = gaussian_bayes_problem(300, 10)
    lift = FunctionTransformer(lambda Z: np.hstack([Z, Z**2, np.sin(3 * Z)]))
    for kbr in (KernelBayesRule(features=lift, reg_prior=1e-3, reg_update=1e-3).fit(x, z),
                KernelBayesRule(kernel_z=kb.LinearKernel(), reg_prior=1e-3, reg_update=1e-3).fit(x, lift.transform(z))):
        zq = np.array([[0.7]]) if kbr.features is not None else lift.transform(np.array([[0.7]]))
        weights = kbr.posterior(prior, zq[0]).weights
        Phi, phi = lift.transform(z), lift.transform(np.array([[0.7]]))[0]
        r = kbr.ratio(kbr.prior_values(prior))
        sq = np.sqrt(r)
        G = Phi @ Phi.T
        dense = sq * np.linalg.solve(sq[:, None] * G * sq[None, :] + 300 * 1e-3 * np.eye(300), sq * (Phi @ phi))
        np.testing.assert_allclose(weights, dense, atol=1e-8)


def test_low_rank_iw_update_equals_dense_update():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(600, 2))
    z = x + 0.3 * rng.normal(size=(600, 2))
    prior = KernelMean(rng.normal(0.3, 0.7, size=(300, 2)))
    low_rank, dense = (KernelBayesRule(reg_prior=1e-3, reg_update=1e-2, solver=solver).fit(x, z)
                       for solver in ("auto", "dense"))
    assert low_rank.solver_ == "low_rank" and dense.solver_ == "dense"
    a = low_rank.posterior(prior, [0.4, -0.2]).weights
    b = dense.posterior(prior, [0.4, -0.2]).weights
    # and the dense path is the formula itself, on the support of D
    r = dense.ratio(dense.prior_values(prior))
    S = r > 0
    sq = np.sqrt(r[S])
    G_S = GaussianKernel("median").fit(z)(z[S])
    k = GaussianKernel("median").fit(z)(z[S], np.array([[0.4, -0.2]]))[:, 0]
    formula = np.zeros(600)
    formula[S] = sq * np.linalg.solve(sq[:, None] * G_S * sq[None, :] + 600 * 1e-2 * np.eye(S.sum()), sq * k)
    np.testing.assert_allclose(b, formula, rtol=1e-8, atol=1e-12 * np.abs(formula).max())
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9 * np.abs(b).max())


def test_low_rank_original_update_equals_dense_update():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(400, 2))
    z = x + 0.3 * rng.normal(size=(400, 2))
    prior = KernelMean(rng.normal(0.3, 0.7, size=(300, 2)))
    low_rank, dense = (KernelBayesRule("original", kernel_z=GaussianKernel("median", scale=2.0), reg_prior=1e-3,
                                       reg_update=1e-1, solver=solver).fit(x, z) for solver in ("auto", "dense"))
    assert low_rank.solver_ == "low_rank"
    mu = dense.projection(dense.prior_values(prior))
    G_z = GaussianKernel("median", scale=2.0).fit(z)
    LG = mu[:, None] * G_z(z)
    formula = LG @ np.linalg.solve(LG @ LG + 1e-1 * np.eye(400), mu * G_z(z, np.array([[0.4, -0.2]]))[:, 0])
    b = dense.posterior(prior, [0.4, -0.2]).weights
    np.testing.assert_allclose(b, formula, rtol=1e-6, atol=1e-9 * np.abs(formula).max())
    a = low_rank.posterior(prior, [0.4, -0.2]).weights
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7 * np.abs(b).max())


@pytest.mark.parametrize("method", ["iw", "original"])
def test_the_rules_pieces_refuse_vectors_of_another_length_or_with_nan(method):
    # each piece would have answered: a short ratio gave short weights, a NaN one the uniform fallback
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 2))
    rule = KernelBayesRule(method).fit(x, x + 0.1 * rng.normal(size=x.shape))
    obs = rule.observation_vectors([0.1, 0.2])
    mu = rule.projection(rule.prior_values(None))
    for bad, match in ((np.ones(10), "expected length 60"), (np.r_[np.nan, np.ones(59)], "contains NaN")):
        for call, name in ((lambda v: rule.projection(v), "g"), (lambda v: rule.ratio(v), "g"),
                           (lambda v: rule.weights_from_ratio(v, obs), "r"),
                           (lambda v: rule.weights_from_projection(v, obs), "mu"),
                           (lambda v: rule.original_error_bound(v), "mu")):
            with pytest.raises(ValueError, match=f"{name}: {match}"):
                call(bad)
    with pytest.raises(ValueError, match="g: expected 60 rows"):
        rule.projection(np.ones((10, 2)))
    with pytest.raises(ValueError, match="r: expected non-negative"):
        rule.weights_from_ratio(-np.ones(60), obs)
    for bad in (obs[:7], obs[:, :0], np.full_like(obs, np.nan)):
        with pytest.raises(ValueError, match=r"obs: expected (observation vectors of shape \(60, q\)|finite)"):
            rule.weights_from_projection(mu, bad)
    # what the checks let through is what the rule computes itself
    np.testing.assert_allclose(rule.weights_from_projection(mu, obs)[0][:, 0], rule.posterior(None, [0.1, 0.2]).weights)
    np.testing.assert_allclose(rule.projection(np.c_[mu, mu])[:, 1], rule.projection(mu), rtol=1e-12)


@pytest.mark.parametrize("reg_update", [1e-2, 1e-4, 1e-6])
def test_original_rule_low_rank_path_stays_within_its_stated_bound_while_filtering(reg_update):
    # the squared operator amplifies the factor's residual: the low-rank update may differ from
    # the dense one by up to original_error_bound(mu), relative, which grows as 1 / delta
    system = kb.systems.Oscillation()
    states, obs = system.simulate(500, rng=1)
    test_obs = system.simulate(40, rng=11)[1]
    params = dict(method="original", reg_prior=1e-3, reg_update=reg_update)
    auto = KernelBayesRule(**params).fit(states, obs)
    dense = KernelBayesRule(solver="dense", **params).fit(states, obs)
    assert auto.solver_ == "low_rank" and dense.original_error_bound(np.ones(500)) == 0.0
    kbf = kb.KernelBayesFilter(rule="original", reg_prior=1e-3, reg_update=reg_update).fit(states, obs)
    worst = 0.0
    for z in test_obs:
        kbf.predict()
        prior = KernelMean(states, kbf.weights_prior, kernel=auto.kernel_x_)  # the filter's predicted belief
        a, b = auto.posterior(prior, z).weights, dense.posterior(prior, z).weights
        difference = np.max(np.abs(a - b)) / np.max(np.abs(b))
        assert difference <= auto.original_error_bound(auto.projection(auto.prior_values(prior)))
        worst = max(worst, difference)
        kbf.update(z)
    # the figures the docstring states: 2e-8, 3e-6, 3e-4
    assert worst <= {1e-2: 1e-7, 1e-4: 1e-5, 1e-6: 1e-3}[reg_update]
