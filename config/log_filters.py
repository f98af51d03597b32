"""Logging filters named in settings.LOGGING."""

import logging

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404


class RefusalsWithoutTraceback(logging.Filter):
    """django.request and django.security log a refused request with the exception's traceback. A refusal
    (a role without the right, a missing object, a bad query parameter, a Host header not allowed) is the
    app working, not a bug: keep the line, which names the path or the host, and drop the traceback, which
    would bury real errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], (PermissionDenied, Http404, BadRequest, SuspiciousOperation)):
            record.exc_info = record.exc_text = None
        return True
