"""The camera-orientation study (Xu et al. (2022) §6.3, first-person camera, rendered offline by
``CameraOrientation``).

Protocol: 10 runs, training length 1000 (the last 200 steps held out for tuning), test
length 200. Kernel Bayes filters on raw pixels (IW and original), on PCA features and on learned
features, against a bootstrap particle filter with the pixel likelihood, a windowed MLP regressor,
and an oracle particle filter that sees the rendered view angle (a reference, not a competitor).
Writes ``results.json``, ``results.csv``, ``mse_boxplot.png``, ``trajectory.png`` and ``frames.png``.

Usage:  python scenarios/camera.py [--runs 10] [--train-lengths 1000] [--jobs -1] [--out results/camera]
"""

import sys

from kbfilter.cli import scenario_main

if __name__ == "__main__":
    sys.exit(scenario_main("camera"))
