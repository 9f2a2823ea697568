"""Where code first reads a value back from its device, found on PyTorch's meta device (shapes, no values).

A read of a value there fails: where a GPU run would first wait for the device is where a meta run fails.
"""

import traceback

import pytest


def first_read(call):
    """The project's deepest frame where ``call`` failed on the meta device: its first read of a device value."""
    with pytest.raises((RuntimeError, NotImplementedError), match="meta") as failure:
        call()
    return [frame for frame in traceback.extract_tb(failure.tb) if "bertology_utils" in frame.filename][-1]


def on_meta(batches: list[dict]) -> list[dict]:
    """Model inputs moved to the meta device."""
    return [{name: tensor.to("meta") for name, tensor in batch.items()} for batch in batches]
