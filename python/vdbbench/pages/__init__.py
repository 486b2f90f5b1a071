"""Self-contained HTML pages: a benchmark results page (`vdbbench report`) and an agent session
page (`vdbbench agent report RUN --html`).

Each page is one HTML file with plotly.js, the data and the page's own script inlined: it opens
from disk in any browser, with no server and no network access at view time.
"""
