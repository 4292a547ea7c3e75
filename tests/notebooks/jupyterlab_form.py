"""A notebook as JupyterLab 4 leaves it once it has opened it, started its kernel and saved it.

JupyterLab marks a notebook modified as soon as its model changes after loading, and these
are the changes it makes without anyone touching a cell (read from JupyterLab 4's
`@jupyterlab/notebook`, `@jupyterlab/outputarea` and `@jupyter/ydoc`):

- When the kernel connects, the notebook panel sets `metadata.kernelspec` to
  `{name, display_name, language}` of the kernel spec it started, and `metadata.language_info`
  to the `language_info` of the kernel's `kernel_info` reply. `YNotebook.setMetadata` skips a
  value deep-equal to the one there, so a notebook that already holds exactly these stays
  unmodified; `"Python 3"` where ipykernel's spec says `"Python 3 (ipykernel)"` does not.
- Loading outputs, the output area merges consecutive stream outputs of the same name into one
  and applies `\\r` and `\\b` to their text; a save then writes the merged text.
- `nbformat_minor` is raised to 4 when lower (4.5, with cell ids, stays as it is).
- Re-running a cell deletes its `metadata.execution` (the timing `nbconvert --execute` writes);
  JupyterLab records timing only when its `recordTiming` setting is on, which it is not by
  default. So a notebook run with Run All and saved in JupyterLab has none.
- `metadata.widgets` (the widget state `nbconvert --execute` saves) is left alone: the widget
  manager writes it only with "Save Widget State Automatically" on (off by default), and it is
  what draws a saved widget before its kernel runs.

The save itself is jupyter_server's `FileContentsManager.save`: nbformat's JSON, one space of
indent, sorted keys, a trailing newline, multi-line strings split into lists of lines.

Run it to put notebooks in that form after executing them:

    THENA_NB_STORE=off PYTHONPATH=. .venv/bin/python tests/notebooks/jupyterlab_form.py \\
        notebooks/*.ipynb
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

KERNEL_NAME = "python3"
"""The kernel every tutorial notebook names, and the one JupyterLab starts for it."""


def kernel_metadata(kernel_name: str = KERNEL_NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(kernelspec, language_info)` as JupyterLab sets them when `kernel_name` connects: the
    installed kernel spec's names, and the `language_info` a started kernel reports."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel

    spec = KernelSpecManager().get_kernel_spec(kernel_name)
    kernelspec = {"name": kernel_name, "display_name": spec.display_name, "language": spec.language}
    manager, client = start_new_kernel(kernel_name=kernel_name)
    try:
        reply = client.kernel_info(reply=True, timeout=60)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return kernelspec, dict(reply["content"]["language_info"])


def merged_streams(outputs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`outputs` with consecutive stream outputs of the same name merged, as the output area
    merges them when it loads a cell."""
    out: list[dict[str, Any]] = []
    for output in outputs:
        last = out[-1] if out else None
        if (
            last is not None
            and output.get("output_type") == "stream"
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] = _text(last["text"]) + _text(output["text"])
        else:
            out.append(dict(output))
    return out


def _text(text: str | list[str]) -> str:
    return text if isinstance(text, str) else "".join(text)


def as_opened(
    nb: dict[str, Any], kernelspec: dict[str, Any], language_info: dict[str, Any]
) -> dict[str, Any]:
    """Notebook JSON (as the contents API serves it) after JupyterLab has opened it and its
    kernel has connected: what a save with no edit sends back."""
    nb = dict(nb)
    nb["nbformat_minor"] = max(nb.get("nbformat_minor", 0), 4)
    nb["metadata"] = {**nb["metadata"], "kernelspec": kernelspec, "language_info": language_info}
    nb["cells"] = [_as_opened_cell(cell) for cell in nb["cells"]]
    return nb


def _as_opened_cell(cell: dict[str, Any]) -> dict[str, Any]:
    cell = dict(cell)
    if cell.get("cell_type") == "code":
        cell["outputs"] = merged_streams(cell.get("outputs", []))
    return cell


def as_run_in_jupyterlab(nb: dict[str, Any]) -> dict[str, Any]:
    """The notebook as Run All in JupyterLab leaves it: no cell keeps timing metadata."""
    nb = dict(nb)
    cells = []
    for cell in nb["cells"]:
        metadata = {k: v for k, v in cell.get("metadata", {}).items() if k != "execution"}
        cells.append({**cell, "metadata": metadata})
    nb["cells"] = cells
    return nb


def save_as_jupyterlab(path: Path, nb: dict[str, Any]) -> None:
    """Write `nb` to `path` the way JupyterLab's save does: through jupyter_server's
    `FileContentsManager` (validation, signing, nbformat's JSON)."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    manager = FileContentsManager(root_dir=str(path.parent))
    manager.save({"type": "notebook", "format": "json", "content": nb}, path.name)


def load_as_jupyterlab(path: Path) -> dict[str, Any]:
    """The notebook JSON JupyterLab receives when it opens `path` (the contents API's)."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    manager = FileContentsManager(root_dir=str(path.parent))
    content: dict[str, Any] = manager.get(path.name, content=True, type="notebook")["content"]
    return content


def normalise(paths: Iterable[Path]) -> None:
    """Rewrite each notebook in the form JupyterLab opens without a change."""
    kernelspec, language_info = kernel_metadata()
    for path in paths:
        nb = as_opened(load_as_jupyterlab(path), kernelspec, language_info)
        save_as_jupyterlab(path, as_run_in_jupyterlab(nb))


if __name__ == "__main__":
    normalise(Path(p).resolve() for p in sys.argv[1:])
