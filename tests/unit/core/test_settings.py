"""core.settings.environment: variables set for the processes started inside, each restored after."""

import os

import pytest

from bertology_utils.core import settings


def test_environment_sets_then_restores_each_variable(monkeypatch):
    monkeypatch.setenv("BERTOLOGY_TEST_SET", "before")
    monkeypatch.delenv("BERTOLOGY_TEST_UNSET", raising=False)
    with pytest.raises(RuntimeError, match="inside"):
        with settings.environment({"BERTOLOGY_TEST_SET": "inside", "BERTOLOGY_TEST_UNSET": "inside"}):
            assert os.environ["BERTOLOGY_TEST_SET"] == os.environ["BERTOLOGY_TEST_UNSET"] == "inside"
            raise RuntimeError("inside")  # restored on an error too
    assert os.environ["BERTOLOGY_TEST_SET"] == "before"
    assert "BERTOLOGY_TEST_UNSET" not in os.environ
