"""Command line: ``kbfilter ...`` and ``python -m kbfilter ...``."""

import argparse
import sys

from . import __version__


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kbfilter",
        description="Nonparametric state-space filtering with kernel Bayes' rule.",
    )
    parser.add_argument("--version", action="version", version=f"kbfilter {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return 0
