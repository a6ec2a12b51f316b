"""Operating a scheduler in a cluster: ``kubesched takeover``, ``kubesched doctor``, ``kubesched chaos``.

The application edge: these commands use :mod:`kubesched.client` and :mod:`kubesched.apimachinery` only, and
nothing below imports them. Each command keeps its decisions in pure functions on plain data (``timeline.py``:
lease/event timelines and leader overlap; ``diagnose.py``: doctor's rules; ``chaosreport.py``: chaos's
bookkeeping and arithmetic) so they are unit-tested on fixtures; the command modules only gather the data.
"""
