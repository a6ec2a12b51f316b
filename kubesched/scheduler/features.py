"""The scheduler's feature gates (upstream ``--feature-gates``), as far as kubesched has gated features.

``FeatureGates.parse("OpportunisticBatching=false")`` reads the flag's value (``Name=bool`` pairs, comma
separated); defaults are those of Kubernetes 1.36. ``DEFAULT`` is the process-wide set that ``kubesched
scheduler --feature-gates`` changes and frameworks read when they are built (upstream's
``utilfeature.DefaultFeatureGate``).
"""

from __future__ import annotations

OPPORTUNISTIC_BATCHING = "OpportunisticBatching"

# Name -> default in 1.36. OpportunisticBatching (KEP-5598) is beta and on by default since 1.35.
KNOWN: dict[str, bool] = {OPPORTUNISTIC_BATCHING: True}


class FeatureGateError(ValueError):
    """A malformed ``--feature-gates`` value or an unknown gate (printed as one line)."""


class FeatureGates:
    """Known gates and their values."""

    def __init__(self, values: dict[str, bool] | None = None) -> None:
        self._values = dict(KNOWN)
        for name, value in (values or {}).items():
            self.set(name, value)

    def enabled(self, name: str) -> bool:
        return self._values.get(name, False)

    def set(self, name: str, value: bool) -> None:
        if name not in KNOWN:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        self._values[name] = value

    def set_from_flag(self, flag: str) -> None:
        """Apply ``Name=true,Other=false`` (upstream's flag syntax; ``true``/``false`` in any case)."""
        for name, value in parse(flag).items():
            self.set(name, value)


def parse(flag: str) -> dict[str, bool]:
    """``"A=true, B=false"`` -> ``{"A": True, "B": False}``; unknown names and bad values raise
    ``FeatureGateError`` with upstream's wording."""
    out: dict[str, bool] = {}
    for part in flag.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise FeatureGateError(
                f"invalid value of {name}={raw.strip()}, err: strconv.ParseBool: parsing "
                f'"{raw.strip()}": invalid syntax'
            )
        if name not in KNOWN:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        out[name] = value == "true"
    return out


DEFAULT = FeatureGates()

__all__ = ["DEFAULT", "KNOWN", "OPPORTUNISTIC_BATCHING", "FeatureGateError", "FeatureGates", "parse"]
