"""mad: a construct-based codec for InfiniBand Subnet Management Packets.

Pure: no I/O, imports nothing from `smagent`.
"""
from mad.errors import MadError, MadFieldError, MadLengthError, UnknownAttributeError, UnknownVersionError

__all__ = ["MadError", "MadFieldError", "MadLengthError", "UnknownAttributeError", "UnknownVersionError"]
