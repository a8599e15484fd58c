"""The web page served by `acp-memory http` at `/`: one more client of the HTTP API.

`page.py` serves the page's shell and assets (templates/, static/: plain HTML, CSS and
JavaScript, no build step, nothing fetched from elsewhere), `routes.py` the two routes the
page needs beyond the API's own, and `markdown.py` renders a note as safe HTML.
"""
