"""Play, watch and replay Button Up! in the browser (``buttonup-web``; the ``web`` extra).

* :mod:`buttonup_env.ui.web.server` — the command: options, the default opponent, the address;
* :mod:`buttonup_env.ui.web.app` — the FastAPI app: the page's files and the JSON API;
* :mod:`buttonup_env.ui.web.games` — a game: the match, its players, its requests;
* :mod:`buttonup_env.ui.web.offered` — the players offered, by key;
* :mod:`buttonup_env.ui.web.views` — what the API says about a position;
* :mod:`buttonup_env.ui.web.store` — the games kept, per client;
* :mod:`buttonup_env.ui.web.replays` — the records offered, played out;
* :mod:`buttonup_env.ui.web.errors` — what a request can meet;
* :mod:`buttonup_env.ui.web.workers` — the threads the players think in, with a time limit;
* :mod:`buttonup_env.ui.web.schemas` — the API's request and response models (pydantic);
* ``static/`` — the page: plain HTML, CSS and JavaScript modules, no build step, no network.
"""
