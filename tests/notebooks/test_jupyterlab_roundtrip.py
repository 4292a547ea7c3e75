"""The tutorial notebooks open in JupyterLab 4 unmodified, and a save changes no byte.

Each notebook goes through what JupyterLab does to it (`jupyterlab_form`): jupyter_server's
contents manager serves it, the frontend's changes on opening are applied with the metadata
of a python3 kernel started here (the one JupyterLab would start), and the contents manager
saves it again. The bytes must come back as committed. The installed jupyter_server, nbformat
and kernel decide, so a new version that writes otherwise makes this fail too.

To fix a failure, execute the notebook and normalise it:

    THENA_NB_STORE=off PYTHONPATH=. .venv/bin/jupyter nbconvert --to notebook --execute \\
        --inplace notebooks/X.ipynb
    THENA_NB_STORE=off PYTHONPATH=. .venv/bin/python tests/notebooks/jupyterlab_form.py \\
        notebooks/X.ipynb
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import jupyterlab
import nbformat
import pytest
from jupyterlab_form import (
    as_opened,
    as_run_in_jupyterlab,
    kernel_metadata,
    load_as_jupyterlab,
    merged_streams,
    save_as_jupyterlab,
)

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
FIX = "execute it and run `python tests/notebooks/jupyterlab_form.py` on it (see this module)"


@pytest.fixture(scope="module")
def kernel() -> tuple[dict[str, Any], dict[str, Any]]:
    """`(kernelspec, language_info)` that JupyterLab would write on connecting the kernel."""
    return kernel_metadata()


def changed_lines(before: str, after: str, name: str) -> str:
    diff = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"{name} (committed)", f"{name} (saved)", n=1
    )
    return "\n".join(list(diff)[:40])


def same_minor(a: str, b: str) -> bool:
    """Whether two Python versions share major and minor (`3.11.7`, `3.11.9`)."""
    return a.split(".")[:2] == b.split(".")[:2]


def test_the_frontend_modelled_is_the_installed_jupyterlab_major_version() -> None:
    """`jupyterlab_form` reads JupyterLab 4's frontend; another major version must be read
    again before this module can vouch for it."""
    assert jupyterlab.__version__.split(".")[0] == "4", jupyterlab.__version__


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_opening_and_saving_in_jupyterlab_changes_no_byte(
    notebook: Path, kernel: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    kernelspec, language_info = kernel
    committed = json.loads(notebook.read_text())["metadata"]["language_info"]["version"]
    if same_minor(committed, language_info["version"]):
        # Another patch level of the same Python would rewrite the version of every notebook
        # back and forth between machines; the test below pins major and minor.
        language_info = {**language_info, "version": committed}
    copy = tmp_path / notebook.name
    shutil.copyfile(notebook, copy)
    opened = as_opened(load_as_jupyterlab(copy), kernelspec, language_info)
    save_as_jupyterlab(copy, opened)
    before, after = notebook.read_text(), copy.read_text()
    changes = changed_lines(before, after, notebook.name)
    assert after == before, f"JupyterLab would change {notebook.name}; {FIX}:\n{changes}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_the_notebook_is_as_run_all_in_jupyterlab_leaves_it(notebook: Path) -> None:
    raw = notebook.read_text()
    nb = json.loads(raw)
    nbformat.validate(nbformat.from_dict(nb))
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, nbformat.current_nbformat_minor)
    assert as_run_in_jupyterlab(nb) == nb, f"a cell keeps timing metadata; {FIX}"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), f"not one Run All in order: {counts}"
    for cell in code:
        results = [o for o in cell["outputs"] if o["output_type"] == "execute_result"]
        assert all(o["execution_count"] == cell["execution_count"] for o in results)
        assert merged_streams(cell["outputs"]) == cell["outputs"], cell["id"]
        streams = "".join("".join(o["text"]) for o in cell["outputs"] if "text" in o)
        assert not re.search("[\r\b]", streams), f"JupyterLab rewrites \\r and \\b: {cell['id']}"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)


def test_every_notebook_names_the_kernel_jupyterlab_starts_and_its_python(
    kernel: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The kernelspec is the installed one's; `language_info` is the kernel's, its version
    the same in all and of the Python that `binder/runtime.txt` names (the patch level is
    whatever made the notebooks: a kernel of another patch level marks them modified)."""
    kernelspec, language_info = kernel
    runtime = (REPO / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    versions = set()
    for path in NOTEBOOKS:
        metadata = json.loads(path.read_text())["metadata"]
        assert metadata["kernelspec"] == kernelspec, path.name
        info = dict(metadata["language_info"])
        versions.add(info.pop("version"))
        assert info == {k: v for k, v in language_info.items() if k != "version"}, path.name
    (version,) = versions
    assert same_minor(version, language_info["version"]), (version, language_info["version"])
    assert same_minor(version, runtime), (version, runtime)


def test_the_form_is_a_fixed_point_and_catches_what_jupyterlab_changes(tmp_path: Path) -> None:
    """What the check relies on: merged streams, the kernel's metadata and dropped timing
    each change a notebook that lacks them, and the form once reached stays."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(1); print(2)", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", text=t) for t in ("1\n", "2\n")]
    cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    spec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    info = {"name": "python", "version": "3.11.7"}
    opened = as_run_in_jupyterlab(as_opened(load_as_jupyterlab(path), spec, info))
    (saved_cell,) = opened["cells"]
    assert [o["text"] for o in saved_cell["outputs"]] == ["1\n2\n"]
    # The contents API marks each cell `trusted` (the save drops it again); no timing is left.
    assert set(saved_cell["metadata"]) <= {"trusted"}
    assert opened["metadata"]["kernelspec"] == spec
    save_as_jupyterlab(path, opened)
    once = path.read_text()
    save_as_jupyterlab(path, as_opened(load_as_jupyterlab(path), spec, info))
    assert path.read_text() == once and once.endswith("}\n") and once.startswith('{\n "cells"')
