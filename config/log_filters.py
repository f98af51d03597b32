"""Logging filters named in settings.LOGGING."""

import logging

from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404


class RefusalsWithoutTraceback(logging.Filter):
    """django.request logs a refused request with the exception's traceback. A refusal (a role without the
    right, a missing object, a bad query parameter) is the app working, not a bug: keep the warning line,
    which names the path and the status, and drop the traceback, which would bury real errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], (PermissionDenied, Http404, BadRequest)):
            record.exc_info = record.exc_text = None
        return True
