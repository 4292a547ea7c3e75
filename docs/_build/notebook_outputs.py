"""An MkDocs hook: a notebook page shows an output's HTML snapshot, not its live widget.

The Stepper's output in a stored notebook carries both a widget view and a `text/html`
snapshot of what it showed. A static page has no kernel to drive the widget (and nbconvert
would fetch a widget manager from the network, which cannot render an anywidget anyway), so
the pages rank the widget view last and the snapshot is what a reader sees.
"""

from __future__ import annotations

from typing import Any

from mkdocs_jupyter import nbconvert2

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PRIORITY = [
    "application/javascript",
    "text/html",
    "text/markdown",
    "image/svg+xml",
    "text/latex",
    "image/png",
    "image/jpeg",
    "text/plain",
    WIDGET_VIEW,
]
_make_app = nbconvert2.get_nbconvert_app


def _app_without_widget_views(*args: Any, **kwargs: Any) -> Any:
    app = _make_app(*args, **kwargs)
    app.config.NbConvertBase.display_data_priority = PRIORITY
    return app


def on_startup(**kwargs: Any) -> None:
    """Give mkdocs-jupyter's nbconvert the priority above, once per MkDocs process."""
    nbconvert2.get_nbconvert_app = _app_without_widget_views
