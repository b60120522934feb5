"""The timeout argument of the clients' calls, as confluent-kafka takes it: seconds, or None / negative for "no limit"."""

from __future__ import annotations

import math
import numbers
from typing import Any

from lakelog.errors import InvalidArgument, InvalidType


def check_timeout(timeout: Any) -> float | None:
    """`timeout` as seconds (None: as long as it takes); InvalidType for what is not a number, InvalidArgument for NaN.

    confluent-kafka parses a timeout as a C double, so a str is a TypeError there too; a bool is refused, as
    True seconds is no timeout anyone means. NaN would compare false with every deadline and wait forever."""
    if timeout is None:
        return None
    if timeout.__class__ is not float and timeout.__class__ is not int:
        if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool):
            raise InvalidType(f"timeout must be a number of seconds, not {type(timeout).__name__}")
        timeout = float(timeout)
    if math.isnan(timeout):
        raise InvalidArgument("timeout must be a number of seconds, not NaN")
    return timeout
