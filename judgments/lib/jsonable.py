"""Plain JSON values from what pandas, numpy and pyarrow hand back, for JSON fields and downloads.

No Django here: the sampling, agreement and evaluation results all pass through it before they are stored.
"""

import numpy as np
import pandas as pd


def jsonable(value):
    """`value` with numpy scalars as Python numbers, NaN as None, times as ISO 8601 text and tuples as lists,
    through dicts and lists."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, np.generic):
        return jsonable(value.item())
    return value


def records(frame: pd.DataFrame) -> list[dict]:
    """A frame's rows as JSON-ready dicts."""
    return [jsonable(row) for row in frame.to_dict("records")]
