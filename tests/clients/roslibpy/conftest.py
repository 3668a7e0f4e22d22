"""Fixtures shared by rosgate's own roslibpy tests (test_rosgate_*.py),
which scripts/clients.sh runs from this directory against a gateway at
ROSGATE_WS_PORT over ROSLIBPY_TRANSPORT (roslibpy's own suite runs from
its sdist and does not see this file)."""

import os

import pytest
import roslibpy

PORT = int(os.environ.get("ROSGATE_WS_PORT") or 0)
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")


@pytest.fixture
def connect():
    """Opens roslibpy connections for one test; closes them afterwards."""
    opened = []

    def make():
        ros = roslibpy.Ros("127.0.0.1", PORT, transport=TRANSPORT)
        ros.run(timeout=10)
        assert ros.is_connected
        opened.append(ros)
        return ros

    yield make
    for ros in opened:
        ros.close()
