"""Recall filters: a closed, typed ``$``-operator grammar (see ``docs/filters.md``).

Pipeline: ``RecallFilter.parse`` (``ast.py``: parse + validate) -> per-backend compilers
(``sql_postgres.py``, ``sql_sqlite.py``, ``cypher.py``) -> ``evaluate.py`` (the in-memory
evaluator every channel runs as a defensive re-check) -> ``report.py``
(``FilterPushdownReport``).
"""
