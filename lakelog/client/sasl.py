"""`set_sasl_credentials(username, password)` of confluent-kafka's Producer and Consumer, on a root."""

from __future__ import annotations

import logging
from typing import Any

from lakelog.errors import InvalidType


def set_sasl_credentials(client_logger: logging.Logger | logging.LoggerAdapter, username: Any, password: Any) -> None:
    """Accept new SASL credentials as confluent-kafka does (both strings, else TypeError) and use none of them:
    there is no broker connection to authenticate; a root's access is its store's (`lakelog.storage.*`)."""
    for name, value in (("username", username), ("password", password)):
        if not isinstance(value, str):
            raise InvalidType(f"set_sasl_credentials() argument {name!r} must be str, not {type(value).__name__}")
    client_logger.debug("set_sasl_credentials: accepted and unused, a root authenticates through its store")


__all__ = ["set_sasl_credentials"]
