"""The tutorial notebooks run in a fresh environment built from `binder/`, as Binder builds it.

repo2docker installs `binder/requirements.txt` with pip from the repository root (and would
run `binder/postBuild` after it, if there were one). This module does the same in a new
virtual environment, then executes every notebook there with `jupyter nbconvert --execute`:
no cell may raise except one marked `# NBVAL_RAISES_EXCEPTION`, and each marked cell must
raise. Output comparison is nbval's job (`pytest --nbval notebooks`); this checks that a
reader who clicks the Binder badge gets notebooks that run.

pip's cache is reused, so the install takes about a minute once the cache is warm. The two
tests that build the environment download packages: they are marked `binder`, which a plain
`pytest` leaves out (`conftest.py`); `pytest -m binder` runs them, and so does `.ci/run`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
RAISES_MARKER = "NBVAL_RAISES_EXCEPTION"
RAISES_TAG = "raises-exception"
CELL_TIMEOUT_S = 120


def run(command: list[str | Path], *, env: Mapping[str, str], cwd: Path = REPO) -> str:
    """Run a command, failing the test with its output when it fails."""
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, command))} exited with {done.returncode}\n"
            f"--- stdout ---\n{done.stdout[-4000:]}\n--- stderr ---\n{done.stderr[-4000:]}"
        )
    return done.stdout


def clean_env(venv: Path, scratch: Path) -> dict[str, str]:
    """The environment of a Binder session: the new venv first on PATH, no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    # Kernel specs and runtime files come from the new venv only, never from the user's
    # own Jupyter directories; runs go to a scratch store, not the user's.
    env["JUPYTER_DATA_DIR"] = str(scratch / "jupyter-data")
    env["JUPYTER_RUNTIME_DIR"] = str(scratch / "jupyter-runtime")
    env["JUPYTER_CONFIG_DIR"] = str(scratch / "jupyter-config")
    env["THENA_NB_STORE"] = str(scratch / "runs.sqlite3")
    return env


@pytest.fixture(scope="module")
def binder_env(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[str, str]]]:
    """A new virtual environment with the binder files installed, and its environment.

    The environment (some hundreds of MB) is deleted afterwards; pytest keeps its last few
    temporary directories, and they need not hold a copy of JupyterLab each.
    """
    scratch = tmp_path_factory.mktemp("binder")
    venv = scratch / "venv"
    env = clean_env(venv, scratch)
    run([sys.executable, "-m", "venv", venv], env=env)
    # As repo2docker does, from the repository root (so `-e .` there is the repository);
    # unlike it, with pip's cache, so that a second build is quick.
    pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip", "install"]
    run([*pip, "-r", BINDER / "requirements.txt"], env=env)
    post_build = BINDER / "postBuild"
    if post_build.exists():
        run(["bash", post_build], env=env)
    yield venv, env
    shutil.rmtree(venv, ignore_errors=True)


def marked_raising(cell: nbformat.NotebookNode) -> bool:
    """Whether nbval (and Run All) expect this cell to raise."""
    tags = cell.get("metadata", {}).get("tags", [])
    comments = [line.strip().lstrip("#").strip() for line in cell.source.splitlines()]
    return RAISES_MARKER in comments or RAISES_TAG in tags


def execute(venv: Path, env: Mapping[str, str], notebook: Path, out_dir: Path) -> None:
    """Execute `notebook` with the binder env's nbconvert, as a reader's Run All would."""
    run(
        [
            venv / "bin" / "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--allow-errors",
            "--ExecutePreprocessor.kernel_name=python3",
            f"--ExecutePreprocessor.timeout={CELL_TIMEOUT_S}",
            "--output-dir",
            out_dir,
            notebook,
        ],
        env=env,
        cwd=notebook.parent,
    )


def test_the_binder_files_name_a_python_the_project_supports() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floor = re.fullmatch(r">=(\d+)\.(\d+)", project["requires-python"])
    assert floor is not None, project["requires-python"]
    runtime = (BINDER / "runtime.txt").read_text().strip()
    version = re.fullmatch(r"python-(\d+)\.(\d+)", runtime)
    assert version is not None, f"runtime.txt must read python-X.Y, got {runtime!r}"
    assert tuple(map(int, version.groups())) >= tuple(map(int, floor.groups()))
    lines = (BINDER / "requirements.txt").read_text().splitlines()
    installs = [line.strip() for line in lines if line.strip().startswith("-e .[")]
    assert len(installs) == 1, lines
    assert {"lab", "openai", "mcp", "otel"} <= set(installs[0][len("-e .[") : -1].split(","))


def test_the_notebooks_use_the_python3_kernel() -> None:
    assert len(NOTEBOOKS) == 11, [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata["kernelspec"]["name"] == "python3", path.name


@pytest.mark.binder
def test_the_kernel_runs_in_the_binder_env_with_the_repository_installed(
    binder_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = binder_env
    probe = nbformat.v4.new_notebook()
    probe.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    probe.cells.append(
        nbformat.v4.new_code_cell(
            "import sys, thena_nb\nprint(sys.prefix)\nprint(thena_nb.__file__)"
        )
    )
    source = tmp_path / "probe.ipynb"
    nbformat.write(probe, source)
    execute(venv, env, source, tmp_path)
    (cell,) = nbformat.read(tmp_path / "probe.ipynb", as_version=4).cells
    prefix, module = cell.outputs[0]["text"].split()
    assert Path(prefix).resolve() == venv.resolve()
    # An editable install: the notebooks use the repository's own source.
    assert Path(module).resolve() == (REPO / "thena_nb" / "__init__.py").resolve()


@pytest.mark.binder
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs_in_the_binder_env(
    notebook: Path, binder_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = binder_env
    execute(venv, env, notebook, tmp_path)
    executed = nbformat.read(tmp_path / notebook.name, as_version=4)
    raised: list[int] = []
    unexpected: list[str] = []
    for number, cell in enumerate(executed.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"cell {number} did not run"
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors and not marked_raising(cell):
            unexpected.extend(f"cell {number}: {e.ename}: {e.evalue}" for e in errors)
        if errors:
            raised.append(number)
    assert unexpected == [], "\n".join(unexpected)
    expected = [
        i for i, c in enumerate(executed.cells) if c.cell_type == "code" and marked_raising(c)
    ]
    assert raised == expected, "every cell marked as raising must raise"
