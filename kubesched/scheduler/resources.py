"""Resource columns of the node table, and Kubernetes quantities turned into integers.

Every resource the scheduler accounts for is a column: 0 = cpu (millicores), 1 = memory (bytes),
2 = ephemeral-storage (bytes), 3 = pods (count), then extended/scalar resources (hugepages, devices...) in the
order they were first seen. ``ResourceIndex`` owns that numbering; it only ever grows, so a column number stays
valid for the life of the scheduler and a request vector built earlier is a prefix of today's layout.

Quantities are ``kubesched.apimachinery.quantity``'s (upstream ``resource.Quantity``): ``Value()`` and
``MilliValue()`` round up, so ``"1.5m"`` of cpu is 2 millicores and ``"0.5"`` bytes of memory is 1 byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# parse_quantity is re-exported for the scheduler modules that import it from here (simulate).
from kubesched.apimachinery.quantity import parse_quantity as parse_quantity
from kubesched.apimachinery.quantity import quantity_to_int, quantity_to_milli

CPU = 0
MEMORY = 1
EPHEMERAL_STORAGE = 2
PODS = 3
CORE_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pods")

# Upstream's non-zero defaults (pkg/scheduler/util): what a container without a cpu/memory request is taken to
# use when nodes are scored, so that request-less pods still spread.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

# ``Quantity.Value()`` and ``Quantity.MilliValue()`` under the names the scheduler's modules use; one parser
# (``kubesched.apimachinery.quantity``) for the API server and the scheduler, memoised for the hot path.
quantity_value = quantity_to_int
quantity_milli_value = quantity_to_milli


def resource_amount(name: str, value: Any) -> int:
    """The integer the scheduler keeps for ``name``: millicores for cpu, the plain value for anything else.

    An unparsable quantity counts as 0 (the API server validates quantities; a bad one must not stop the
    scheduler).
    """
    try:
        return quantity_to_milli(value) if name == "cpu" else quantity_to_int(value)
    except (ValueError, ZeroDivisionError):
        return 0


def is_native_resource(name: str) -> bool:
    """In the ``kubernetes.io`` namespace (an unprefixed name counts as such)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """A device-plugin style resource (``example.com/foo``): not native and not a ``requests.`` quota name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_scalar_resource_name(name: str) -> bool:
    """What upstream keeps in ``Resource.ScalarResources``: extended, hugepages, attachable volumes."""
    return (
        is_extended_resource_name(name)
        or is_hugepages(name)
        or name.startswith("attachable-volumes-")
        or name.startswith("requests.")
    )


class ResourceIndex:
    """Resource name -> column number; grows when a new resource name appears, never shrinks."""

    __slots__ = ("_cols", "_interned", "memo", "names")

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.names: list[str] = list(CORE_RESOURCES)
        self._cols: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        # Identical request vectors are shared (read-only): tens of thousands of pods have a handful of shapes.
        self._interned: dict[tuple[int, ...], np.ndarray] = {}
        # Results computed against this numbering (PodInfo keeps parsed requests here, by pod resources).
        self.memo: dict[Any, Any] = {}
        for name in extra:
            self.col(name)

    @property
    def count(self) -> int:
        return len(self.names)

    def col(self, name: str) -> int:
        """The column of ``name``, adding one if the name is new."""
        c = self._cols.get(name)
        if c is None:
            c = len(self.names)
            self.names.append(name)
            self._cols[name] = c
        return c

    def get(self, name: str) -> int | None:
        """The column of ``name`` if known, else None (does not grow the index)."""
        return self._cols.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def vector(self, amounts: Mapping[str, int]) -> np.ndarray:
        """A read-only int64 vector over the current columns, adding columns for new names."""
        cols = [(self.col(n), v) for n, v in amounts.items() if v]
        values = [0] * len(self.names)
        for c, v in cols:
            values[c] = v
        key = tuple(values)
        vec = self._interned.get(key)
        if vec is None:
            vec = np.array(key, dtype=np.int64)
            vec.flags.writeable = False
            if len(self._interned) < 65536:
                self._interned[key] = vec
        return vec

    def parse_list(self, resources: Mapping[str, Any] | None) -> np.ndarray:
        """A ResourceList (``{"cpu": "4", "memory": "32Gi", "pods": "110"}``) as a vector over the columns."""
        if not resources:
            return self.vector({})
        return self.vector({name: resource_amount(name, q) for name, q in resources.items()})
