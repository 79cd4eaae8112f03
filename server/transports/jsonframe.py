"""JSON text frames from clients: whatever they send, decoding fails with one short ValueError, never anything else."""

from __future__ import annotations

import json


def load_json(raw: str | bytes) -> object:
    """json.loads; invalid JSON, nesting deeper than Python's recursion limit, and over-long numbers raise ValueError."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(e.msg) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:  # an integer of more than 4300 digits
        raise ValueError("a number is too long") from None
