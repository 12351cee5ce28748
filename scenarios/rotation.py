"""The rotation filtering study of Xu et al. (2022) §6.2 (Fukumizu (2014) "Numerical examples").

Paper protocol: 30 runs, training length 500 and 1000 (the last 200 steps held out for tuning the
kernel Bayes filters), test length 200; KBF-IW and KBF-original against EKF, UKF and a particle
filter with 1,000 particles that know the true model. Writes one folder per training length.

Usage:  python scenarios/rotation.py [--runs 30] [--train-lengths 500 1000] [--jobs -1] [--out results/rotation]
"""

import sys

from kbfilter.cli import scenario_main

if __name__ == "__main__":
    sys.exit(scenario_main("rotation"))
