"""Every class kbfilter can save comes back bit for bit (its behaviour, compared with array_equal)."""

import io
import zipfile

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

import kbfilter as kb
from kbfilter.features import GaussianBlur, LearnedFeatures, RandomFourierFeatures
from kbfilter.filters.outliers import OutlierGate
from kbfilter.filters.particles import ParticleBelief
from kbfilter.filters.reacquisition import ChiSquareGate, RecentObservations
from kbfilter.kernel_approximation import NystromKernel, RandomFourierKernel
from kbfilter.linalg import Woodbury, spd_factor
from kbfilter.operators import DenseOperator, LowRankOperator, SparseOperator
from kbfilter.persistence import load, registered, save

RNG = np.random.default_rng(0)
X = RNG.normal(size=(120, 2))
Z = X + 0.2 * RNG.normal(size=(120, 2))
Q = RNG.normal(size=(7, 2))
IMAGES = RNG.uniform(size=(40, 6 * 5))
ROBOT = kb.systems.RobotInRoom(room_seed=3, height=6, width=12, rays_per_column=2)
POSES, CONTROLS, VIEWS = ROBOT.simulate(60, rng=0)
U = RNG.uniform(-1, 1, size=(120, 1))


def _rule(**params):
    return kb.KernelBayesRule(reg_prior=1e-3, reg_update=1e-2, **params).fit(X, Z)


def _posterior(rule):
    return np.column_stack([rule.posterior(kb.KernelMean(X[:30]), z).weights for z in Q])


def _weights(method, **params):
    """A fitted embedding's own part for ``method``, and its weights of Q (restored where the
    embedding would restore it)."""
    cme = kb.ConditionalEmbedding(method=method, n_neighbors=20, rank=40, random_state=0, **params).fit(X, Z)
    k = cme.kernel_in_

    def compute(w):
        w.restore(X, k)
        W = w.weights(Q, X, k)
        return W.toarray() if hasattr(W, "toarray") else W

    return cme.weights_, compute


CV = kb.systems.ConstantVelocity(step=1.0, accel=0.5, sensor=kb.systems.PositionFixes(3.0), speed=10.0)
TRACKS = [CV.simulate(150, rng=s, burn_in=0)[0] for s in range(3)]
FIXES = CV.sensor.observe(CV.simulate(30, rng=9, burn_in=0)[0], rng=1)
NOISY_FIXES = [CV.sensor.observe(x, rng=i) for i, x in enumerate(TRACKS)]


def _moved_filter(sensor=CV):
    """A learned-motion filter part way through a run: the rest of the run continues it."""
    fixes = [x[:, :2] for x in TRACKS] if sensor is CV else NOISY_FIXES
    lmf = kb.LearnedMotionFilter(sensor, inputs=(2, 3), random_state=0).fit(TRACKS, fixes)
    lmf.batch_filter(FIXES[:10])
    return lmf


def _moved(filt):
    """A filter fitted on the robot's first 50 views, five steps into the rest."""
    filt.fit(POSES[:50], VIEWS[:50]).batch_filter(VIEWS[50:55], us=CONTROLS[50:55])
    return filt


def _moved_window():
    """A window regressor five frames into a run: its window holds them, and the rest continues it."""
    reg = kb.filters.WindowRegressor(window=3, hidden_layer_sizes=(16, 8), max_iter=30).fit(POSES[:50], VIEWS[:50])
    reg.batch_filter(VIEWS[50:55])
    return reg


def _continued(filt):
    """The rest of the run, continued from where the filter stands."""
    return filt.batch_filter(VIEWS[55:], us=CONTROLS[55:])[0]


# class name -> (a fitted instance, what it computes); scikit-learn parts are compared bit for bit
# too: their fitted arrays are stored as they are
CASES = {
    "GaussianKernel": [(kb.GaussianKernel("median", scale=0.7).fit(X), lambda k: k(X, Q))],
    "LaplaceKernel": [(kb.LaplaceKernel(0.8), lambda k: k(X, Q))],
    "LinearKernel": [(kb.LinearKernel(), lambda k: k(X, Q))],
    "ConditionalEmbedding": [
        (kb.ConditionalEmbedding(method=m, n_neighbors=20, rank=40, random_state=0).fit(X, Z),
         lambda c: np.append(c.predict_mean(Q), c.held_out_loss(Q, Q)))
        for m in ("exact", "knn", "nw", "random", "nystrom", "icf", "rff")]
        + [(kb.ConditionalEmbedding(method="sparse", max_iter=50).fit(X, Z), lambda c: c.predict_mean(Q))],
    "ExactWeights": [_weights("exact")],
    "KernelFeatureWeights": [_weights("exact", kernel_in=NystromKernel(rank=30))],
    "NystromWeights": [_weights("nystrom")],
    "FourierWeights": [_weights("rff")],
    "LocalWeights": [_weights("knn"), _weights("knn", solver="dense")],
    "NadarayaWatsonWeights": [_weights("nw")],
    "SubsampleWeights": [_weights("random")],
    "IncompleteCholeskyWeights": [_weights("icf")],
    "SparseWeights": [_weights("sparse", max_iter=50)],
    "NystromKernel": [(NystromKernel(rank=30).fit(X), lambda k: k(X, Q))],
    "PositionFixes": [(kb.systems.PositionFixes(4.0), lambda s: s.observation_loglik(Q[0], X))],
    "RangeBearing": [(kb.systems.RangeBearing((1.0, -2.0), 20.0, 0.01), lambda s: s.observe_mean(X))],
    "ConstantVelocity": [(CV, lambda m: np.append(m.transition_mean(TRACKS[0][:5]), m.two_point_belief(Q[0], Q[1])[1]))],
    "CoordinatedTurn": [(kb.systems.CoordinatedTurn(sensor=kb.systems.RangeBearing((0.0, 0.0))),
                         lambda m: m.transition_mean(np.hstack([TRACKS[0][:5], np.full((5, 1), 0.02)])))],
    "LearnedMotion": [(kb.filters.LearnedMotion(inputs=(2, 3), n_neighbors=10).fit(TRACKS),
                       lambda m: m.sample_transition(TRACKS[1][:20], rng=3))],
    "LearnedMotionFilter": [(_moved_filter(), lambda f: np.append(f.batch_filter(FIXES[10:])[0],
                                                                   f.diagnostics.get("reacquired", 0))),
                            (_moved_filter(sensor=None), lambda f: f.batch_filter(FIXES[10:])[0])],
    "LearnedMotionModel": [(_moved_filter().model_, lambda m: m.motion.sample_transition(m.states[:20], rng=3))],
    "ChiSquareGate": [(ChiSquareGate.of_noise([[4.0, 1.0], [1.0, 2.0]], 0.99),
                       lambda g: np.append(g.precision, [g.threshold, g.admits_any(Q[:5] - Q[0])]))],
    "RecentObservations": [(RecentObservations(3).with_observation(Q[0]).aged().with_observation(Q[1]),
                            lambda r: np.append(r.observations, r.aged(2).with_observation(Q[2]).ages))],
    "LinearGaussianSensor": [(kb.systems.LinearGaussianSensor.fitted(TRACKS, NOISY_FIXES),
                              lambda s: np.append(s.observation_loglik(FIXES[0], TRACKS[0]),
                                                  s.initial_belief(FIXES[0])[1]))],
    "RandomFourierKernel": [(RandomFourierKernel(rank=30, random_state=0).fit(X), lambda k: k(X, Q))],
    "KernelBayesRule": [(_rule(), _posterior), (_rule(method="original"), _posterior),
                        (_rule(solver="dense"), _posterior), (_rule(kernel_z=kb.LinearKernel()), _posterior),
                        (_rule(features=RBFSampler(n_components=30, random_state=0)), _posterior),
                        (_rule(kernel_x=NystromKernel(rank=30), kernel_z=NystromKernel(rank=30)), _posterior),
                        (_rule(method="original", kernel_x=NystromKernel(rank=30),
                               kernel_z=NystromKernel(rank=30)), _posterior)],
    "KernelBayesFilter": [(kb.KernelBayesFilter(transition=t, approximation=a, random_state=0).fit(X, Z),
                           lambda f: f.batch_filter(Q)[0])
                          for t in ("exact", "knn") for a in ("exact", "nystrom", "rff")]
                         + [(kb.KernelBayesFilter(approximation="local", support=40).fit(X, Z),
                             lambda f: f.batch_filter(Q)[0])]
                         # images: blurred by default
                         + [(kb.KernelBayesFilter().fit(X[:40], IMAGES.reshape(40, 6, 5)),
                             lambda f: f.batch_filter(IMAGES[:5].reshape(5, 6, 5))[0])]
                         # a randomized SVD leaves PCA's components a strided view, which BLAS rounds
                         # otherwise than the contiguous array load gives back (unless fit lays it out so)
                         + [(kb.KernelBayesFilter(features=PCA(5, svd_solver="randomized", random_state=0))
                             .fit(X[:40], IMAGES.reshape(40, 6, 5)),
                             lambda f: f.batch_filter(IMAGES[:5].reshape(5, 6, 5))[0])],
    "FilterModel": [(kb.KernelBayesFilter().fit(X, Z).model_, lambda m: m.projection_operator @ np.ones(120))],
    "LocalFilterModel": [(kb.KernelBayesFilter(approximation="local", support=40).fit(X, Z).model_,
                          lambda m: m.predicted(np.full(5, 0.2), np.arange(5))[0])],
    "KernelMonteCarloFilter": [(kb.KernelMonteCarloFilter(ROBOT, n_particles=30, random_state=0, candidates=c)
                                .fit(POSES[:50], VIEWS[:50]), lambda f: f.batch_filter(VIEWS[50:], us=CONTROLS[50:])[0])
                               for c in ("both", "training")]
                              + [(kb.KernelMonteCarloFilter(ROBOT, n_particles=30, random_state=0, resample="ratio",
                                                            outlier_quantile=0.5).fit(POSES[:50], VIEWS[:50]),
                                  lambda f: np.append(f.batch_filter(VIEWS[50:], us=CONTROLS[50:])[0],
                                                      f.diagnostics["outlier"]))],
    "NearestNeighbourParticleFilter": [(_moved(kb.filters.NearestNeighbourParticleFilter(
        ROBOT, n_particles=30, random_state=0, outlier_quantile=0.9)), _continued)],
    "NearestImage": [(_moved(kb.filters.NearestImage(n_neighbors=3)), _continued),
                     (_moved(kb.filters.NearestImage(features=None)), _continued)],
    "WindowRegressor": [(_moved_window(), lambda f: f.batch_filter(VIEWS[55:])[0])],
    "WindowNetwork": [(_moved_window().model_,
                       lambda m: m.regressed(m.space.mapped(VIEWS[:3].reshape(3, -1)).reshape(1, -1)))],
    "NeighbourLookup": [(kb.filters.NearestImage().fit(POSES, VIEWS).model_,
                         lambda m: np.append(*m.index.kneighbors(m.space.map(VIEWS[0]))))],
    "OutlierGate": [(OutlierGate.from_quantile(Z, 0.9), lambda g: np.append(g.distance(Q), g.radius))],
    "KernelMonteCarloModel": [(kb.KernelMonteCarloFilter(ROBOT).fit(POSES, VIEWS).model_,
                               lambda m: m.observation.posterior_weights(np.ones(len(POSES)),
                                                                         m.observation.admit(VIEWS[0]))[0])],
    "LearnedObservationModel": [(kb.KernelBayesFilter(outlier_quantile=0.5).fit(X, Z).observation_model_,
                                 lambda m: np.append(m.posterior_weights(np.ones(120), m.admit(Q[0]))[0],
                                                     [m.admit(q) is None for q in Q]))],
    "ObservationSpace": [(kb.KernelBayesFilter(outlier_quantile=0.5).fit(X[:40], IMAGES.reshape(40, 6, 5))
                          .observation_model_.space, lambda s: np.append(s.map(IMAGES[0]), s.admits(s.map(IMAGES[1]))))],
    "LearnedTransition": [(kb.KernelBayesFilter().fit(X, Z).model_.transition,
                           lambda t: t.apply(np.full(120, 1 / 120)))],
    "ParticleBelief": [(ParticleBelief(X[:10], np.arange(1.0, 11.0) / 55), lambda b: np.append(*b.estimate()))],
    "ControlledTransition": [(kb.KernelBayesFilter().fit(X, Z, controls=U).model_.transition,
                              lambda t: t.apply(np.full(120, 1 / 120), np.array([0.3])))],
    "LowRankControlledTransition": [(kb.KernelBayesFilter(approximation="nystrom", rank=30)
                                     .fit(X, Z, controls=U).model_.transition,
                                     lambda t: t.apply(np.full(120, 1 / 120), np.array([0.3])))],
    "RobotInRoom": [(ROBOT, lambda r: r.render(POSES[:3]))],
    "Rotation": [(kb.systems.Rotation(omega=0.2), lambda s: s.transition_mean(X))],
    "Oscillation": [(kb.systems.Oscillation(b=0.3), lambda s: s.transition_mean(X))],
    "LinearGaussian": [(kb.systems.LinearGaussian([[0.5]], [[1.0]], [[0.1]], [[0.2]]), lambda s: s.transition_mean(X[:, :1]))],
    "ControlledLinearGaussian": [(kb.systems.ControlledLinearGaussian([[0.5]], [[1.0]], [[1.0]], [[0.1]], [[0.2]],
                                                                      control_scale=0.5),
                                  lambda s: np.append(s.simulate(5, rng=0)[1], s.transition_mean(X[:, :1], U[0])))],
    "DenseOperator": [(DenseOperator(X @ X.T), lambda op: op @ Z)],
    "SparseOperator": [(SparseOperator(np.where(np.abs(X @ X.T) > 1, X @ X.T, 0.0)), lambda op: op @ Z)],
    "LowRankOperator": [(LowRankOperator(X, Z), lambda op: op @ Z)],
    "GaussianBlur": [(GaussianBlur(1.0, image_shape=(6, 5)).fit(IMAGES), lambda f: f.transform(IMAGES))],
    "RandomFourierFeatures": [(RandomFourierFeatures(16).fit(Z), lambda f: f.transform(Q))],
    "LearnedFeatures": [(LearnedFeatures(n_pca=5, hidden_layer_sizes=(8,), max_iter=30).fit(IMAGES, X[:40]),
                         lambda f: f.transform(IMAGES))],
    "SPDFactor": [(spd_factor(kb.GaussianKernel(1.0)(X) + 1e-3 * np.eye(120)), lambda f: f.solve(Z)),
                  (spd_factor(-np.eye(3), warn=False), lambda f: f.solve(np.ones(3)))],  # LU fallback
    "Woodbury": [(Woodbury(X, 0.5), lambda w: w.solve(Z))],
    "PCA": [(PCA(2, whiten=True).fit(Z), lambda p: p.transform(Q))],
    "Nystroem": [(Nystroem(n_components=20, random_state=0).fit(Z), lambda p: p.transform(Q))],
    "RBFSampler": [(RBFSampler(n_components=20, random_state=0).fit(Z), lambda p: p.transform(Q))],
    "StandardScaler": [(StandardScaler().fit(Z), lambda p: p.transform(Q))],
}


def test_every_persistent_class_is_covered():
    assert sorted(CASES) == sorted(registered())


@pytest.mark.parametrize("name, obj, compute", [(name, obj, f) for name, cases in CASES.items()
                                                for obj, f in cases])
def test_round_trip_is_bit_identical(tmp_path, name, obj, compute):
    assert type(obj).__name__ == name
    back = load(save(obj, tmp_path / "obj.npz"))
    assert type(back) is type(obj)
    assert np.array_equal(compute(back), compute(obj))
    if hasattr(obj, "get_params"):
        assert back.get_params().keys() == obj.get_params().keys()


def _fitted_attributes(obj):
    """The public fitted attributes (names ending in ``_``) the object can give."""
    names = set()
    for name in dir(obj):
        if name.endswith("_") and not name.startswith("_"):
            try:
                getattr(obj, name)
            except (AttributeError, NotFittedError):
                continue
            names.add(name)
    return names


@pytest.mark.parametrize("name, obj, compute", [(name, obj, f) for name, cases in CASES.items()
                                                for obj, f in cases])
def test_a_loaded_object_has_every_fitted_attribute_of_the_saved_one(tmp_path, name, obj, compute):
    # n_features_in_ (scikit-learn's record of the width fit saw) was missing from a loaded kernel Bayes
    # filter, Kernel Monte Carlo filter, Bayes rule and feature maps; compute runs first, because some
    # parts are rebuilt from the training inputs when they are first used
    back = load(save(obj, tmp_path / "obj.npz"))
    compute(back)
    compute(obj)
    assert _fitted_attributes(back) == _fitted_attributes(obj)


@pytest.mark.parametrize("name, obj", [(name, obj) for name, cases in CASES.items() for obj, _ in cases])
def test_every_saved_array_is_laid_out_as_load_gives_it_back(tmp_path, monkeypatch, name, obj):
    # load returns contiguous arrays; BLAS may round a product by its operands' layout, so an object
    # holding a strided view (PCA's components from a randomized SVD, a linear fit's coefficients)
    # would compute otherwise than its loaded copy in the last bits
    written = {}

    def record(fh, **arrays):
        written.update(arrays)
        return savez(fh, **arrays)

    savez = np.savez
    monkeypatch.setattr(np, "savez", record)
    save(obj, tmp_path / "obj.npz")
    strided = [(key, a.shape, a.strides) for key, a in written.items()
               if not (a.flags.c_contiguous or a.flags.f_contiguous)]
    assert not strided, strided


def test_a_save_that_fails_part_way_leaves_the_earlier_file_as_it_was(tmp_path, monkeypatch):
    # the file used to be opened for writing first, so a full disk or an interrupt lost the earlier save
    kbf = kb.KernelBayesFilter().fit(X, Z)
    path = save(kbf, tmp_path / "filter.npz")
    before = path.read_bytes()

    def full_disk(fh, **arrays):
        fh.write(b"PK\x03\x04 a few bytes")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError, match="No space left"):
        kbf.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["filter.npz"]
    np.testing.assert_array_equal(load(path).batch_filter(Z[:5])[0], kbf.reset().batch_filter(Z[:5])[0])
    # a symbolic link stays a link to the file written
    link = tmp_path / "latest.npz"
    link.symlink_to(path)
    kb.KernelBayesFilter(reg_update=0.5).fit(X, Z).save(link)
    assert link.is_symlink() and load(link).reg_update == 0.5 and load(path).reg_update == 0.5
    link.unlink()
    # where it cannot be written, the error names the path given, not the file written beside it
    with pytest.raises(ValueError, match="is a directory; expected the name of the file to write"):
        kbf.save(tmp_path)
    with pytest.raises(ValueError, match="path: the directory .*missing does not exist"):
        kbf.save(tmp_path / "missing" / "filter.npz")
    # a file object or a number is not a file name: refused by name, the number before open() takes it
    # for a file descriptor
    for bad, got in [(io.BytesIO(), "BytesIO"), (3, "int"), (None, "NoneType")]:
        with pytest.raises(ValueError, match=f"path: expected a file name \\(a str or path-like\\), got {got}"):
            kbf.save(bad)
        with pytest.raises(ValueError, match=f"path: expected a file name \\(a str or path-like\\), got {got}"):
            load(bad)
    with pytest.raises(ValueError, match="path: expected a file name, got an empty one"):
        load("")


@pytest.mark.parametrize("kernel", [kb.GaussianKernel(), kb.LaplaceKernel(), kb.LinearKernel(),
                                    NystromKernel(rank=5), RandomFourierKernel(rank=5, random_state=0)],
                         ids=lambda k: type(k).__name__)
def test_a_kernel_handed_on_fitted_loads_handed_on(tmp_path, kernel):
    """A frozen kernel (fitted once, shared by the parts of a filter) loads frozen: cloning or
    fitting the loaded copy returns it as it is, as for the saved one."""
    X = np.random.default_rng(0).normal(size=(30, 2))
    frozen = kernel.fit(X).frozen()
    loaded = load(save(frozen, tmp_path / "k.npz"))
    assert clone(loaded) is loaded
    embedding = kb.ConditionalEmbedding(kernel_in=loaded, kernel_out=loaded).fit(X + 5.0, X)
    assert embedding.kernel_in_ is loaded and embedding.kernel_out_ is loaded
    np.testing.assert_array_equal(loaded(X[:3]), frozen(X[:3]))
    # the unfrozen kernel loads unfrozen, as it was saved
    plain = load(save(kernel, tmp_path / "plain.npz"))
    assert clone(plain) is not plain
    with np.load(tmp_path / "k.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = arrays.pop("__meta__").tobytes().decode().replace('"frozen_": true', '"frozen_": 1')
    np.savez(tmp_path / "evil.npz", __meta__=np.frombuffer(meta.encode(), dtype=np.uint8), **arrays)
    with pytest.raises(ValueError, match=r"frozen_: expected True, on a fitted kernel; got 1"):
        load(tmp_path / "evil.npz")


@pytest.mark.parametrize("name, obj", [(name, cases[0][0]) for name, cases in CASES.items()
                                       if hasattr(cases[0][0], "get_params")])
def test_an_estimator_saved_before_fit_loads_as_it_was(tmp_path, name, obj):
    unfitted = clone(obj)
    back = load(save(unfitted, tmp_path / "first.npz"))
    assert type(back) is type(unfitted)
    # the same object: saved again, it makes the same file, member for member
    save(back, tmp_path / "again.npz")
    with zipfile.ZipFile(tmp_path / "first.npz") as first, zipfile.ZipFile(tmp_path / "again.npz") as again:
        assert first.namelist() == again.namelist()
        assert all(first.read(member) == again.read(member) for member in first.namelist())
    assert _is_fitted(back) == _is_fitted(unfitted)  # (a kernel given its bandwidth counts as fitted)


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


@pytest.mark.parametrize("obj, field", [
    (kb.KernelBayesFilter(reg_prior=kb.GaussianKernel()), "reg_prior"),  # a field of plain values
    (kb.KernelBayesFilter(kernel_u=kb.systems.Rotation()), "kernel_u"),  # a kernel's field
    (kb.KernelMonteCarloFilter(motion=kb.GaussianKernel()), "motion"),  # a system's field
])
def test_an_object_where_its_field_takes_none_of_its_kind_is_not_saved(tmp_path, obj, field):
    """A file load would refuse is never written: save applies the same rule as load."""
    with pytest.raises(ValueError, match=f"{field}: a .* does not belong here"):
        save(obj, tmp_path / "obj.npz")
    assert not (tmp_path / "obj.npz").exists()
