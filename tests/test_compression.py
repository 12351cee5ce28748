"""A kernel Bayes filter on a herded subset of its training transitions."""

import numpy as np
import pytest

import kbfilter as kb
from kbfilter.filters.compression import kept_transitions
from kbfilter.persistence import load, save


def _triples(seed, n=400):
    states, obs = kb.systems.Oscillation().simulate(n + 1, rng=seed)
    return states[:-1], states[1:], obs[1:]


def _joint_mmd2(blocks, kernels, subset):
    """Squared MMD between the equally weighted subset's joint embedding and all transitions'."""
    n = len(blocks[0])
    gram = np.ones((n, n))
    for data, kernel in zip(blocks, kernels):
        gram *= kernel(data)
    w = -np.full(n, 1.0 / n)
    w[subset] += 1.0 / len(subset)
    return float(w @ gram @ w)


def test_herding_approaches_the_joint_embedding_faster_than_random_subsets():
    herded, random = {10: [], 40: []}, {10: [], 40: []}
    for seed in range(8):
        prev, nxt, obs = _triples(seed)
        kx = kb.GaussianKernel(scale=0.5).fit(np.vstack([prev, nxt]))
        kz = kb.GaussianKernel(scale=0.5).fit(obs)
        blocks, kernels = (prev, nxt, obs), (kx, kx, kz)
        for m in (10, 40):
            for method, out in (("herding", herded), ("random", random)):
                picked = kept_transitions(prev, nxt, obs, m, method, (kx, kz), np.random.default_rng(seed))
                assert len(np.unique(picked)) == m  # distinct transitions
                out[m].append(_joint_mmd2(blocks, kernels, picked))
    h10, h40, r10, r40 = (np.mean(v) for v in (herded[10], herded[40], random[10], random[40]))
    assert h10 < r10 and h40 < r40
    # and it falls faster: a larger factor from 10 to 40 picks (random falls about 4x, as 1/m)
    assert h10 / h40 > r10 / r40


def test_compressed_filter_keeps_m_states_and_tracks_nearly_as_well_as_the_full_filter():
    system = kb.systems.Oscillation()
    states, obs = system.simulate(800, rng=0)
    test_states, test_obs = system.simulate(200, rng=1)
    params = dict(scale=0.5, reg_prior=1e-4, reg_update=1e-2)
    full = kb.KernelBayesFilter(**params).fit(states, obs)
    small = kb.KernelBayesFilter(**params, compress=150).fit(states, obs)
    assert small.n_train_ == 150 and small.states_.shape == (150, 2)
    np.testing.assert_array_equal(small.states_, states[small.kept_])
    np.testing.assert_array_equal(small.kept_, small.successors_)  # each kept state follows a kept transition
    mse = {name: np.mean(np.sum((f.batch_filter(test_obs)[0] - test_states) ** 2, axis=1))
           for name, f in (("full", full), ("small", small))}
    guess = np.mean(np.sum((test_states - states.mean(axis=0)) ** 2, axis=1))
    assert mse["small"] < 1.3 * mse["full"] and mse["small"] < 0.5 * guess


def test_compression_is_reproducible_and_survives_saving(tmp_path):
    states, obs = kb.systems.Rotation().simulate(300, rng=0)
    test_obs = kb.systems.Rotation().simulate(20, rng=1)[1]
    a = kb.KernelBayesFilter(compress=40, compression="random", random_state=3).fit(states, obs)
    b = kb.KernelBayesFilter(compress=40, compression="random", random_state=3).fit(states, obs)
    c = kb.KernelBayesFilter(compress=40, compression="random", random_state=4).fit(states, obs)
    np.testing.assert_array_equal(a.kept_, b.kept_)
    assert not np.array_equal(a.kept_, c.kept_)
    herded = kb.KernelBayesFilter(compress=40).fit(states, obs)
    save(herded, tmp_path / "f.npz")
    loaded = load(tmp_path / "f.npz")
    np.testing.assert_array_equal(loaded.kept_, herded.kept_)
    np.testing.assert_allclose(loaded.batch_filter(test_obs)[0], herded.batch_filter(test_obs)[0])


@pytest.mark.parametrize("params, fit_kwargs, match", [
    (dict(compress=300), {}, r"compress: expected at most 299"),
    (dict(compress=1), {}, r"compress: expected an integer >= 2"),
    (dict(compress=10, compression="pca"), {}, r"compression: expected one of"),
    (dict(compress=10), dict(controls=np.zeros((300, 1))), r"compress: a filter fitted with controls"),
])
def test_compression_errors(params, fit_kwargs, match):
    states, obs = kb.systems.Rotation().simulate(300, rng=0)
    with pytest.raises(ValueError, match=match):
        kb.KernelBayesFilter(**params).fit(states, obs, **fit_kwargs)


def test_herding_distinct_picks_never_repeat_and_refuse_too_many():
    G = np.array([[1.0, 0.1], [0.1, 1.0]])
    assert sorted(kb.embedding.herd(np.array([0.9, 0.1]), lambda j: G[:, j], 2, distinct=True).tolist()) == [0, 1]
    with pytest.raises(ValueError, match="m: expected at most 2"):
        kb.embedding.herd(np.array([0.9, 0.1]), lambda j: G[:, j], 3, distinct=True)


def test_kept_transitions_refuses_parts_that_do_not_belong_together():
    prev, nxt, obs = _triples(0, n=40)
    kx, kz = kb.GaussianKernel().fit(prev), kb.GaussianKernel().fit(obs)
    rng = np.random.default_rng(0)
    for args, match in (((prev, nxt[:30], obs), "previous and following: expected the same number of samples"),
                        ((prev, nxt, obs[:30]), "previous and observed: expected the same number of samples"),
                        ((prev[:, 0], nxt, obs), "previous: expected a 2-D array"),
                        ((prev, nxt[:, :1], obs), "following: expected 2 columns")):
        with pytest.raises(ValueError, match=match):
            kept_transitions(*args, 5, "herding", (kx, kz), rng)
    with pytest.raises(ValueError, match=r"kernels: expected a pair of fitted kbfilter Kernels"):
        kept_transitions(prev, nxt, obs, 5, "herding", kx, rng)
    with pytest.raises(ValueError, match="rng: expected a numpy Generator"):
        kept_transitions(prev, nxt, obs, 5, "random", (kx, kz), 0)
