"""Inputs a reliability probe of the public surface reported (numbers, covariances, shapes and
arguments), run together in a subprocess: each ends in a ValueError naming its argument, a finite
result, or a counted warning, and the interpreter does not die of a signal on any of them.
The saved-file cases are in ``test_untrusted_files.py``; each behaviour is also tested in place
in the module of its component."""

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json, warnings
    import numpy as np
    import kbfilter as kb
    from kbfilter.filters import ExtendedKalman, ParticleFilter, UnscentedKalman
    from kbfilter.systems import Oscillation

    results = {}

    def case(name, f):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = f()
                finite = bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
                results[name] = {"outcome": "finite" if finite else "not finite",
                                 "warnings": [str(w.message) for w in caught], "value": np.ravel(value)[:4].tolist()}
            except ValueError as exc:
                results[name] = {"outcome": "ValueError", "message": str(exc)}
            except Exception as exc:
                results[name] = {"outcome": type(exc).__name__, "message": str(exc)}

    system = Oscillation()
    X, Z = system.simulate(300, rng=0)
    _, Zt = system.simulate(100, rng=1)

    case("gaussian at 1e8", lambda: kb.GaussianKernel(1.0)(np.array([[1e8]]), np.array([[1e8 + 1]])))
    case("gaussian at 1e300", lambda: kb.GaussianKernel(1e290)(np.array([[1e300]]), np.array([[1e300 + 1e290]])))

    def far(value):
        Xf = X.copy()
        Xf[5] = value
        kbf = kb.KernelBayesFilter().fit(Xf, Z)
        return kbf.batch_filter(Zt)[0]
    case("a training state of 1e3", lambda: far(1e3))
    case("a training state of 1e200", lambda: far(1e200))

    def original():
        kbf = kb.KernelBayesFilter(rule="original", reg_prior=1e-12, reg_update=1e-12).fit(X, Z)
        return kbf.batch_filter(Zt)[0]
    case("original rule at 1e-12", original)

    def pf_far():
        pf = ParticleFilter(system, n_particles=200, rng=0).initialize(np.zeros(2), np.eye(2))
        pf.predict()
        pf.update([1e200] * Z.shape[1])
        return pf.x
    case("particle filter at 1e200", pf_far)

    def negative_R():
        ekf = ExtendedKalman(system).initialize(np.zeros(2), np.eye(2))
        ekf.update(Zt[0], R=-np.eye(Z.shape[1]))
    case("R = -I", negative_R)
    for cls in (ExtendedKalman, UnscentedKalman, ParticleFilter):
        for label, P0 in (("non-symmetric", [[1.0, 2.0], [0.0, 1.0]]), ("negative definite", -np.eye(2)),
                          ("indefinite", [[1.0, 2.0], [2.0, 1.0]])):
            case(f"{cls.__name__} P0 {label}", lambda cls=cls, P0=P0: cls(system).initialize(np.zeros(2), P0))
    case("batch_filter of nothing", lambda: ExtendedKalman(system).batch_filter([]))

    def nested_lists():
        # one sequence, as the arrays are: the same estimates
        listed = kb.KernelBayesFilter().fit(X[:150].tolist(), Z[:150].tolist()).batch_filter(Zt[:5].tolist())[0]
        return np.max(np.abs(listed - kb.KernelBayesFilter().fit(X[:150], Z[:150]).batch_filter(Zt[:5])[0]))
    case("nested lists", nested_lists)

    def scalar_observations():
        kbf = kb.KernelBayesFilter().fit(X, Z[:, 0])
        kbf.update(Zt[0, 0])
        return kbf.batch_filter(Zt[:10, 0])[0]
    case("scalar observations", scalar_observations)
    case("random_state", lambda: kb.KernelBayesFilter(approximation="rff", random_state="seed").fit(X, Z))
    case("features", lambda: kb.KernelBayesFilter(features=3).fit(X, Z))
    case("bandwidth 1e-300", lambda: kb.GaussianKernel(1e-300)(X[:3], X[:3]))
    case("n_jobs", lambda: kb.tune_filter(kb.KernelBayesFilter(), X, Z, n_jobs=0))
    print(json.dumps(results))
''')


def test_reported_inputs_end_in_a_named_error_a_finite_result_or_a_counted_warning():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    # a negative return code is a signal: the interpreter crashed
    assert proc.returncode == 0, f"return code {proc.returncode}: {proc.stderr[-3000:]}"
    results = json.loads(proc.stdout.strip().splitlines()[-1])

    def outcome(name):
        return results[name]["outcome"]

    def refused(name, argument):
        assert outcome(name) == "ValueError" and results[name]["message"].startswith(argument), results[name]

    def warned(name, fragment):
        assert outcome(name) == "finite" and any(fragment in w for w in results[name]["warnings"]), results[name]

    assert abs(results["gaussian at 1e8"]["value"][0] - 0.6065306597126334) < 1e-9
    assert abs(results["gaussian at 1e300"]["value"][0] - 0.6065306597126334) < 1e-6
    warned("a training state of 1e3", "robust spreads")
    refused("a training state of 1e200", "states:")
    warned("original rule at 1e-12", "bounding box")
    warned("particle filter at 1e200", "no particle gives the observation a finite likelihood")
    refused("R = -I", "R:")
    for name in results:
        if " P0 " in name:
            refused(name, "P0:")
    refused("batch_filter of nothing", "zs:")
    assert results["nested lists"]["value"] == [0.0]
    assert outcome("scalar observations") == "finite"
    refused("random_state", "random_state:")
    refused("features", "features:")
    assert outcome("bandwidth 1e-300") == "finite"
    refused("n_jobs", "n_jobs:")
