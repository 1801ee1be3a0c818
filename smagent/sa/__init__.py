"""The Subnet Administrator (management class 0x03) of `smagent run`: `SaAgent` answers
SA queries from the last published `smagent.model.subnet.Subnet` (agent.py); the records of a
snapshot (records.py) and its PathRecords (paths.py)."""
from smagent.sa.agent import SaAgent

__all__ = ["SaAgent"]
