"""The documentation's examples run, and nothing in the repository cites documents it does not hold."""

import re
import runpy
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_documentation_example_runs(path, capsys):
    runpy.run_path(str(path), run_name="__main__")
    assert "MSE" in capsys.readouterr().out


def test_every_citation_points_into_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    pattern = re.compile(r"ALGORITHMS\.md|DESIGN\.md|seed 00\d|SPEC \d|issue #\d")
    offenders = [f"{name}:{i}" for name in files if name.endswith((".py", ".md", ".rst", ".toml"))
                 and name != "tests/test_docs.py" and (ROOT / name).exists()
                 for i, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line)]
    assert not offenders
