"""What plugin args have in common: the ``ArgsModel`` base and the pieces several plugins share.

Each plugin's own args model lives with the plugin (its ``PluginDefinition`` names it): the configuration
loader decodes a ``pluginConfig`` entry with it strictly (an unknown field is an error), which fills in the
defaults kube-scheduler applies, then calls ``validate_args(path)`` for upstream-style field errors.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel

from kubesched.apimachinery.validation import is_qualified_name

from .errors import FieldError, invalid


@runtime_checkable
class ValidatesArgs(Protocol):
    """Args that check their own values; an out-of-tree ``args_model`` may implement this too."""

    def validate_args(self, path: str) -> list[FieldError]: ...


class ArgsModel(BaseModel):
    """Base for plugin args: camelCase on the wire, strict about unknown fields, immutable once built."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )

    def validate_args(self, path: str) -> list[FieldError]:
        return []


class ResourceSpec(ArgsModel):
    name: StrictStr
    weight: StrictInt = 1

    @model_validator(mode="before")
    @classmethod
    def _default_weight(cls, data: Any) -> Any:
        # Upstream treats an unset or zero resource weight as 1.
        if isinstance(data, dict) and data.get("weight", 0) in (0, None):
            return {**data, "weight": 1}
        return data


def default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


def validate_resource_weights(path: str, resources: tuple[ResourceSpec, ...]) -> list[FieldError]:
    errs = []
    for i, res in enumerate(resources):
        if not 0 < res.weight <= 100:
            errs.append(
                invalid(
                    f"{path}[{i}].weight",
                    res.weight,
                    f"resource weight of {res.name} not in valid range (0, 100]",
                )
            )
    return errs


def validate_qualified_name(path: str, value: str) -> list[FieldError]:
    """A label-style name (optional DNS-subdomain prefix and "/", then a name), as upstream's
    ``ValidateLabelName``: one error per problem, in apimachinery's wording."""
    return [invalid(path, value, message) for message in is_qualified_name(value)]


__all__ = [
    "ArgsModel",
    "ResourceSpec",
    "ValidatesArgs",
    "default_resources",
    "validate_qualified_name",
    "validate_resource_weights",
]
