"""LabelPreference: score 100 on nodes whose label ``labelKey`` has one of ``values`` (any value when
``values`` is empty), 0 elsewhere.

Score works on all candidate nodes at once: ``nodes.label_column(key)`` is the label's value per node slot,
so the answer is one vectorised comparison, not a Python loop over nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from pydantic.alias_generators import to_camel

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE, CycleState

NAME = "LabelPreference"


class LabelPreferenceArgs(BaseModel):
    """``pluginConfig`` args, camelCase on the wire; unknown fields are configuration errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True)

    label_key: StrictStr = Field(min_length=1)
    values: tuple[StrictStr, ...] = ()


class LabelPreference:
    name = NAME
    scores_in_range = True  # 0 or 100: no range check needed after scoring

    def __init__(self, args: LabelPreferenceArgs, handle: Any) -> None:
        self.key = args.label_key
        self.values = np.array(args.values, dtype=object)

    def score(self, state: CycleState, pod: Any, nodes: Any, idx: np.ndarray) -> np.ndarray:
        labels = nodes.label_column(self.key)[idx]
        preferred = labels != None  # noqa: E711 (elementwise over an object column)
        if len(self.values):
            preferred &= np.isin(labels, self.values)
        return np.where(preferred, MAX_NODE_SCORE, 0).astype(np.int64)


PLUGIN = PluginDefinition(NAME, LabelPreference, LabelPreferenceArgs)
