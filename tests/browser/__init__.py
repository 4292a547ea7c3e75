"""Browser tests: JupyterLab in headless Chromium (marked `browser`)."""
