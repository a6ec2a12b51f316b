"""What the volume plugins share: listers of the storage objects (``listers.py``), the assumed PV/PVC bindings
(``assume.py``), the binder's vectorised decisions (``binder.py``) and the volumes of placed pods (``usage.py``)."""
