"""Rendering a projection or a tuning run: the text report, SVG figures, the self-contained HTML page,
the tuner's charts and the headless-browser check of that page. Renders typed results only."""
