"""The dashboard: server-rendered pages over the store, no CDN, no JavaScript framework.

Each module turns stored rows into what a page draws, as plain data that the
Jinja templates render and the tests check:

- :mod:`~phalanx_api.pages.charts`: per-round line charts and the flagged-worker
  matrix, as SVG geometry.
- :mod:`~phalanx_api.pages.agreement`: a round's agreement graph, drawn from the
  record stored with the round and laid out on a circle.
- :mod:`~phalanx_api.pages.evidence`: a detection event's evidence in words.
- one module per page, each reading what its page shows from the store:
  :mod:`~phalanx_api.pages.overview`, :mod:`~phalanx_api.pages.run_page`,
  :mod:`~phalanx_api.pages.clients_page`, :mod:`~phalanx_api.pages.case_queue` (the
  review queue: cases), :mod:`~phalanx_api.pages.review_queue` (the events under them);
  :mod:`~phalanx_api.pages.listings` holds what their listings share and
  :mod:`~phalanx_api.pages.stored_json` reads stored JSON without trusting it.
- :mod:`~phalanx_api.pages.formatting`: numbers, bytes and times for people.
- :mod:`~phalanx_api.pages.errors`: error answers as pages for a browser.
- :mod:`~phalanx_api.pages.docs`: the OpenAPI explorer, served from ``static/``.

The routes are in :mod:`phalanx_api.routes.pages`.
"""
