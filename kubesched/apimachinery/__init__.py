"""The ground floor: Kubernetes API conventions that every other part of kubesched shares.

Quantities (``quantity``), label/field/node selectors (``labels``), name and label validation (``validation``) and
API timestamps (``timefmt``), each implemented once. Nothing here imports the rest of kubesched, so the API
server, the client and the scheduler can all depend on it.
"""
