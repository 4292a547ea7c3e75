"""The one stylesheet of the Stepper and of a run's page: colours from JupyterLab's theme.

The text and the backgrounds are JupyterLab's theme variables (`--jp-ui-font-color1`,
`--jp-layout-color1`, ...) with a light fallback, so the views follow the light and dark
themes in JupyterLab and read well elsewhere. The coloured texts (an error, ok, a warning,
a muted note) are this module's own pairs, `LIGHT_TEXT` and `DARK_TEXT`, picked by the theme
(`body[data-jp-theme-light="false"]` in JupyterLab, `body.vscode-dark` in VS Code, the
browser's dark mode on a run's page): JupyterLab's own error colour is under 4.5:1 on its code
background in both themes. `tests/notebook/test_stepper_fixes.py` checks every pair against
WCAG AA. Badges have a dark fill and white text, readable on either theme. The rules apply
under the class `thena-ui` only (the Stepper's box, the page's body).
"""

from __future__ import annotations

__all__ = [
    "DARK_SELECTORS",
    "DARK_TEXT",
    "DARK_VARIABLES",
    "LIGHT_TEXT",
    "MARIMO_DARK_SELECTORS",
    "STYLE",
    "UI_CLASS",
    "style_html",
    "widget_css",
]

UI_CLASS = "thena-ui"
"""The class the Stepper's box and a run page's body carry; every rule is under it."""

LIGHT_TEXT = {
    "bad": "#b71c1c",
    "ok": "#1b5e20",
    "warn": "#8a4500",
    "muted": "#595959",
}
"""The coloured texts on a light theme: each at least 4.5:1 on white and on `#eeeeee` (the
code background, `--jp-layout-color2`)."""
DARK_TEXT = {
    "bad": "#ff9e9e",
    "ok": "#81c784",
    "warn": "#ffb74d",
    "muted": "#bdbdbd",
}
"""The coloured texts on a dark theme: each at least 4.5:1 on `#424242` (JupyterLab Dark's
code background) and on every darker grey."""
DARK_SELECTORS = (
    'body[data-jp-theme-light="false"] .thena-ui',
    "body.vscode-dark .thena-ui",
    "body.vscode-high-contrast:not(.vscode-high-contrast-light) .thena-ui",
)
"""Where the dark texts apply: a dark JupyterLab theme, a dark VS Code theme."""


def _text_variables(colours: dict[str, str]) -> str:
    return " ".join(f"--thena-{name}: {value};" for name, value in colours.items())


STYLE = """
.thena-ui {
  --thena-fg: var(--jp-ui-font-color1, #1a1a1a);
  --thena-bg: var(--jp-layout-color1, #ffffff);
  --thena-bg-alt: var(--jp-layout-color2, #eeeeee);
  --thena-border: var(--jp-border-color1, #bdbdbd);
  --thena-accent: var(--jp-brand-color1, #1565c0);
  LIGHT_TEXT_VARIABLES
  color: var(--thena-fg);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
}
.thena-ui code { color: var(--thena-fg); background: transparent; }
.thena-ui pre { color: var(--thena-fg); }
.thena-ui .thena-turn pre { background: var(--thena-bg-alt) !important; }
.thena-ui .thena-turn > div:last-child { color: var(--thena-fg) !important; }
.thena-ui .thena-muted { color: var(--thena-muted); font-size: 90%; }
DARK_TEXT_RULE
/* The core's HTML needs no stylesheet, so it carries fixed colours; under the theme, the
   theme's readable ones win (its red is 2.0:1 on JupyterLab Dark's code background). */
.thena-ui [style*="color:#d62728"] { color: var(--thena-bad) !important; }
.thena-ui [style*="color:#777"], .thena-ui [style*="color:#555"] {
  color: var(--thena-muted) !important; }
.thena-stepper-header { background: var(--thena-bg-alt); color: var(--thena-fg);
  padding: 4px 8px; border-radius: 4px; overflow-wrap: anywhere; }
.thena-stepper-header .thena-line { margin-top: 2px; }
.thena-badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff;
  background: #616161; font-size: 90%; white-space: nowrap; }
.thena-badge.s-running, .thena-badge.s-paused, .thena-badge.b-native { background: #1565c0; }
.thena-badge.s-finished, .thena-badge.b-ok, .thena-badge.r-until { background: #2e7d32; }
.thena-badge.s-failed, .thena-badge.b-failed, .thena-badge.r-fails { background: #c62828; }
.thena-badge.s-stopped, .thena-badge.s-budget, .thena-badge.s-stopping, .thena-badge.r-stop,
.thena-badge.r-exhausted, .thena-badge.r-budget, .thena-badge.s-waiting { background: #a04a00; }
.thena-badge.b-rescued { background: #6d4c41; }
.thena-badge.b-branch { background: #6a1b9a; }
.thena-transcript { border: 1px solid var(--thena-border); border-radius: 4px; padding: 4px;
  max-height: 520px; overflow-y: auto; overflow-x: hidden; }
.thena-entry { border-left: 3px solid var(--thena-border); padding: 2px 6px; margin: 4px 0; }
.thena-entry.user { border-left-color: var(--thena-accent); }
.thena-entry.current { background: var(--thena-bg-alt); border-left-color: var(--thena-ok); }
.thena-entry.pending { border-left-style: dashed; }
.thena-entry pre, .thena-inspector pre { white-space: pre-wrap; word-break: break-word;
  margin: 2px 0; padding: 2px 4px; background: var(--thena-bg-alt); color: var(--thena-fg); }
.thena-entry .who { font-weight: bold; }
.thena-call { margin: 2px 0 2px 8px; }
.thena-bad-text, .thena-ui .thena-bad-text pre { color: var(--thena-bad); }
.thena-inspector h4 { margin: 6px 0 2px 0; font-size: 100%; }
.thena-inspector details > summary { cursor: pointer; }
.thena-frame table { border-collapse: collapse; width: auto; max-width: 100%; }
.thena-frame th, .thena-frame td { text-align: left; vertical-align: top; padding: 1px 6px;
  border-bottom: 1px solid var(--thena-border); }
.thena-frame th { white-space: nowrap; }
.thena-frame td.num, .thena-frame th.num { text-align: right; font-variant-numeric: tabular-nums; }
.thena-frame tr.current td { background: var(--thena-bg-alt); }
.thena-frame td.reply { max-width: 420px; }
.thena-frame td.reply summary { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  cursor: pointer; }
.thena-chart { background: transparent; color: var(--thena-fg); }
.thena-chart svg { background: transparent; overflow: visible; }
.thena-chart text { fill: var(--thena-fg); font-size: 11px; font-family: inherit; }
.thena-chart .axis { stroke: var(--thena-fg); stroke-width: 1; }
.thena-chart .grid { stroke: var(--thena-border); stroke-width: 0.5; }
.thena-chart .streak { stroke: var(--thena-accent); stroke-width: 1.6; fill: none; }
.thena-chart .limit { stroke: var(--thena-bad); stroke-dasharray: 4 3; }
.thena-chart .current { stroke: var(--thena-ok); stroke-width: 2; }
.thena-chart .what-if { stroke: var(--thena-warn); stroke-width: 2; stroke-dasharray: 6 3; }
.thena-chart .what-if-label { fill: var(--thena-warn); }
.thena-chart .m-ok { fill: #2e7d32; } .thena-chart .m-failed { fill: #c62828; }
.thena-chart .m-rescued { stroke: var(--thena-fg); stroke-width: 1; }
.thena-gate { border: 1px solid var(--thena-warn); border-radius: 4px; padding: 4px;
  margin: 2px 0; }
.thena-error-inline, .thena-ui .thena-stepper-error { color: var(--thena-bad); }
.thena-ui .thena-stepper-error { white-space: pre-wrap; word-break: break-word; margin: 2px 0;
  padding: 2px 4px; background: var(--thena-bg-alt); }
.thena-transcript.thena-follow { display: flex; flex-direction: column-reverse; }
.thena-transcript.thena-follow > div { flex: 0 0 auto; }
.thena-ui .thena-later > summary { cursor: pointer; color: var(--thena-muted); }
.thena-ui .thena-edit-note { color: var(--thena-fg); font-size: 90%; margin: 2px 0; }
"""
"""The stylesheet: scoped under `.thena-ui`, colours from JupyterLab's theme variables."""

DARK_VARIABLES = """
@media (prefers-color-scheme: dark) {
  :root { --jp-ui-font-color1: #e8e8e8; --jp-layout-color1: #1e1e1e;
    --jp-layout-color2: #303030; --jp-border-color1: #616161; --jp-brand-color1: #64b5f6;
    --jp-error-color1: #ef9a9a; --jp-success-color1: #81c784; --jp-warn-color1: #ffb74d; }
  body { background: #1e1e1e; }
  .thena-ui { DARK_TEXT_VARIABLES }
}
"""
"""For a page outside JupyterLab: dark values of the variables when the browser asks."""

STYLE = STYLE.replace("LIGHT_TEXT_VARIABLES", _text_variables(LIGHT_TEXT)).replace(
    "DARK_TEXT_RULE", f"{', '.join(DARK_SELECTORS)} {{ {_text_variables(DARK_TEXT)} }}"
)
DARK_VARIABLES = DARK_VARIABLES.replace("DARK_TEXT_VARIABLES", _text_variables(DARK_TEXT))


MARIMO_DARK_SELECTORS = (".dark .thena-ui", ".dark-theme .thena-ui")
"""marimo's dark theme (a `dark` class high up the page): it has no JupyterLab variables, so
the Stepper's widget stylesheet (`widget_css`) sets the dark values itself."""


def widget_css() -> str:
    """The stylesheet a widget front end carries: `STYLE`, plus dark values under marimo's
    dark theme (JupyterLab and VS Code give theirs through the variables)."""
    dark = (
        "--thena-fg: #e8e8e8; --thena-bg: #1e1e1e; --thena-bg-alt: #303030; "
        "--thena-border: #616161; --thena-accent: #64b5f6; " + _text_variables(DARK_TEXT)
    )
    return f"{STYLE}\n{', '.join(MARIMO_DARK_SELECTORS)} {{ {dark} }}\n"


def style_html() -> str:
    """The stylesheet as a `<style>` element (the Stepper puts it in an HTML widget)."""
    return f"<style>{STYLE}</style>"
