"""The training scripts of buttonup-env, one job each: ``train``, ``export``, ``evaluate``,
``league``, ``tune`` and ``report`` (plus ``config``, ``runfolder``, ``typed_json`` and
``common``, which they share).

Run one as ``python training/train.py`` or ``python -m training.train``; both need the
package installed from the clone (``pip install -e ".[train]"``, as the README's quick start
does), and they import each other as ``training.NAME``, as the tests do too.
"""
