"""Play, watch and replay Button Up! in the browser (``buttonup-web``; the ``web`` extra).

* :mod:`buttonup_env.ui.web.server` — the command: options, the default opponent, the address;
* :mod:`buttonup_env.ui.web.app` — the FastAPI app: the page's files and the JSON API;
* :mod:`buttonup_env.ui.web.games` — games, players and records, with no HTTP in them;
* :mod:`buttonup_env.ui.web.workers` — the threads the players think in, with a time limit;
* :mod:`buttonup_env.ui.web.schemas` — the API's request and response models (pydantic);
* ``static/`` — the page: plain HTML, CSS and JavaScript modules, no build step, no network.
"""
