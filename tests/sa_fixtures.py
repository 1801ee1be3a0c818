"""The in-process SA tests' shared fixtures: one swept simulated fabric's `Subnet` per
module, and a fresh `SaAgent` answering from it per test (imported by the test files that
use them)."""
import pytest

import smagent
from smagent.sa import SaAgent
from smagent.subnet import Subnet


@pytest.fixture(scope="module")
def subnet():
    with smagent.connect("sim") as fabric:
        r = fabric.sweep()
    return Subnet.from_sweep(r)


@pytest.fixture
def agent(subnet):
    a = SaAgent()
    a.publish(subnet)
    return a
