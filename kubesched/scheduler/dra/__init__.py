"""Dynamic resource allocation for the DynamicResources plugin: CEL device selectors (``cel.py``), the
structured-parameters allocator (``allocator.py``) and the resource.k8s.io objects with the scheduler's assumed
and in-flight claims (``objects.py``)."""
