"""The documentation's examples run, and nothing in the repository cites documents it does not hold."""

import re
import runpy
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))


def _quoted_output(stem):
    """The figures the documentation says an example prints: the decimals of each sentence
    "``python docs/examples/STEM.py`` prints ..." (up to the sentence's end). A page says so only
    of figures every environment prints alike; a particle filter's, which move with the BLAS and
    library versions, it says were printed where they were measured."""
    pages = [*(ROOT / "docs").glob("*.rst"), ROOT / "README.md"]
    text = " ".join(" ".join(page.read_text(encoding="utf-8").split()) for page in pages)
    sentences = re.findall(rf"``python docs/examples/{stem}\.py`` prints(.*?)\.(?: [A-Z]|$)", text)
    return [number for sentence in sentences for number in re.findall(r"\d+\.\d+", sentence)]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_documentation_example_runs(path, capsys):
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "MSE" in out
    # what the pages say it prints, it prints (the ships example's page had quoted an earlier run's)
    assert [n for n in _quoted_output(path.stem) if n not in out] == []


def test_every_citation_points_into_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    pattern = re.compile(r"ALGORITHMS\.md|DESIGN\.md|seed 00\d|SPEC \d|issue #\d", re.IGNORECASE)
    offenders = [f"{name}:{i}" for name in files if name.endswith((".py", ".md", ".rst", ".toml"))
                 and name != "tests/test_docs.py" and (ROOT / name).exists()
                 for i, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line)]
    assert not offenders


def _documented_objects():
    """The objects the API reference lists, with their public methods and properties."""
    import importlib
    import inspect

    api = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")
    # a long list of members goes on over lines indented past the option's
    for module_name, members in re.findall(r"automodule:: (\S+)\n\s+:members: ([^\n]+(?:\n {5,}\S[^\n]*)*)", api):
        module = importlib.import_module(module_name)
        for name in (m.strip() for m in members.split(",")):
            obj = getattr(module, name)
            yield f"{module_name}.{name}", obj
            if not inspect.isclass(obj):
                continue
            for attr in dir(obj):
                if attr.startswith("_") or not any(attr in vars(k) for k in obj.__mro__
                                                    if k.__module__.startswith("kbfilter")):
                    continue
                yield f"{module_name}.{name}.{attr}", inspect.getattr_static(obj, attr)


def _returns_a_value(function):
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(function))))
    body = tree.body[0]
    nodes = [n for n in ast.walk(body) if isinstance(n, ast.Return) and n.value is not None
             and not (isinstance(n.value, ast.Constant) and n.value.value is None)]
    nested = [n for inner in ast.walk(body) if inner is not body
              and isinstance(inner, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef))
              for n in ast.walk(inner)]
    return any(n not in nested for n in nodes)


def test_every_public_callable_has_a_numpydoc_docstring():
    import inspect

    docscrape = pytest.importorskip("numpydoc.docscrape")
    problems = []
    for name, obj in _documented_objects():
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            if not (obj.__doc__ or "").strip():
                problems.append(f"{name}: no docstring")
            continue
        if not callable(obj) or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        owner_doc = inspect.getdoc(obj)
        if not owner_doc:
            problems.append(f"{name}: no docstring")
            continue
        doc = docscrape.NumpyDocString(owner_doc)
        if not doc["Summary"]:
            problems.append(f"{name}: no one-line summary")
        target = obj.__init__ if inspect.isclass(obj) else obj
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            continue
        wanted = [p.name for p in signature.parameters.values() if p.name not in ("self", "cls")
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        documented = {n.strip() for p in doc["Parameters"] for n in p.name.split(",")}
        missing = [p for p in wanted if p not in documented]
        if missing and not (inspect.isclass(obj) and target is object.__init__):
            problems.append(f"{name}: parameters {missing} not documented")
        bare = [p.name or p.type for p in doc["Parameters"] + doc["Returns"] if not "".join(p.desc).strip()]
        if bare:
            problems.append(f"{name}: {bare} have no description")
        if inspect.isfunction(obj) and not doc["Returns"] and not doc["Yields"] and _returns_a_value(obj):
            problems.append(f"{name}: no Returns section")
    assert not problems, "\n".join(problems)


def test_the_licence_the_package_declares_is_the_one_it_ships():
    declared = re.search(r'^license = \{ text = "([^"]+)" \}$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"),
                         re.M)
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert declared and declared.group(1) == "BSD-3-Clause" and text.startswith("BSD 3-Clause License\n")
    # the recorded tracks are not ours to license: the file points at their own terms
    assert "kbfilter/datasets/data/ATTRIBUTION.md" in text and (ROOT / "kbfilter/datasets/data/ATTRIBUTION.md").exists()


def test_every_readme_code_block_runs_on_its_own_and_prints_a_result():
    import sys

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    # side by side: each block is a process of its own, and the machine the suite runs on has two cores
    runs = [subprocess.Popen([sys.executable, "-c", block], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for block in blocks]
    try:
        for run in runs:
            stdout, stderr = run.communicate(timeout=600)
            assert run.returncode == 0, stderr[-2000:]
            assert "MSE" in stdout, stdout
    finally:
        for run in runs:
            run.kill()


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    # the set-up commands come first, before any section
    first_section = next(i for i, line in enumerate(lines) if line.startswith("## "))
    opening = "\n".join(lines[:first_section])
    assert "```bash\npip install ." in opening and "pytest" in opening
