"""The one stylesheet of the Stepper and of a run's page: colours from JupyterLab's theme.

Every colour is a CSS variable of JupyterLab (`--jp-ui-font-color1`, `--jp-layout-color1`,
...) with a light fallback, so the views follow the light and dark themes in JupyterLab and
read well elsewhere. Badges have a dark fill and white text, readable on either theme. The
rules apply under the class `thena-ui` only (the Stepper's box, the page's body).
"""

from __future__ import annotations

__all__ = ["DARK_VARIABLES", "STYLE", "UI_CLASS", "style_html"]

UI_CLASS = "thena-ui"
"""The class the Stepper's box and a run page's body carry; every rule is under it."""

STYLE = """
.thena-ui {
  --thena-fg: var(--jp-ui-font-color1, #1a1a1a);
  --thena-bg: var(--jp-layout-color1, #ffffff);
  --thena-bg-alt: var(--jp-layout-color2, #eeeeee);
  --thena-border: var(--jp-border-color1, #bdbdbd);
  --thena-accent: var(--jp-brand-color1, #1565c0);
  --thena-bad: var(--jp-error-color1, #c62828);
  --thena-ok: var(--jp-success-color1, #2e7d32);
  --thena-warn: var(--jp-warn-color1, #b45309);
  color: var(--thena-fg);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
}
.thena-ui .widget-html-content { white-space: normal; overflow-wrap: anywhere;
  line-height: 1.4; }
.thena-ui .widget-button { width: auto; min-width: 0; padding: 0 10px; }
.thena-ui .widget-checkbox { width: auto; }
.thena-ui .widget-tab > .lm-TabBar .lm-TabBar-tab { flex: 0 0 auto; max-width: none;
  min-width: 0; padding: 0 10px; }
.thena-ui .widget-tab > .lm-TabBar .lm-TabBar-tabLabel { overflow: visible; }
.thena-ui .widget-tab > .lm-TabBar { height: auto; min-height: 0; overflow: visible; }
.thena-ui .widget-tab > .lm-TabBar .lm-TabBar-content { flex-wrap: wrap; }
.thena-ui .widget-dropdown > select { min-width: 0; }
.thena-ui .widget-checkbox .widget-label { width: auto; overflow: visible; }
.thena-ui code { color: var(--thena-fg); background: transparent; }
.thena-ui pre { color: var(--thena-fg); }
.thena-ui .thena-turn pre { background: var(--thena-bg-alt) !important; }
.thena-ui .thena-turn > div:last-child { color: var(--thena-fg) !important; }
.thena-ui .thena-muted { color: var(--thena-fg); font-size: 90%; }
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
.thena-bad-text { color: var(--thena-bad); }
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
.thena-error-inline { color: var(--thena-bad); }
"""
"""The stylesheet: scoped under `.thena-ui`, colours from JupyterLab's theme variables."""

DARK_VARIABLES = """
@media (prefers-color-scheme: dark) {
  :root { --jp-ui-font-color1: #e8e8e8; --jp-layout-color1: #1e1e1e;
    --jp-layout-color2: #303030; --jp-border-color1: #616161; --jp-brand-color1: #64b5f6;
    --jp-error-color1: #ef9a9a; --jp-success-color1: #81c784; --jp-warn-color1: #ffb74d; }
  body { background: #1e1e1e; }
}
"""
"""For a page outside JupyterLab: dark values of the variables when the browser asks."""


def style_html() -> str:
    """The stylesheet as a `<style>` element (the Stepper puts it in an HTML widget)."""
    return f"<style>{STYLE}</style>"
