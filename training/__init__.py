"""The training scripts of buttonup-env, one job each: ``train``, ``export``, ``evaluate``,
``league``, ``tune`` and ``report``, and the modules below them that they share (the training
floor, drawn in docs/contributing.md and held by the import-linter contract in pyproject.toml).

Run one as ``python training/train.py`` or ``python -m training.train``; both need the
package installed from the clone (``pip install -e ".[train]"``, as the README's quick start
does), and they import the shared modules as ``training.NAME``, as the tests do too.
"""
