"""Loaded before Django's settings (`-p tests.environment` in pyproject.toml): the suite runs on the
development settings, as `make run` does, with DEBUG on when the settings load (the placeholder SECRET_KEY,
local static files); pytest-django then serves every test request with DEBUG off, as production does.
A DEBUG set in the environment wins."""

import os

os.environ.setdefault("DEBUG", "true")

from tests.embed_standin import install as install_embed_standin  # noqa: E402

install_embed_standin()  # issue #29: the `embed` branch's modules until it lands; a no-op after (delete at merge)
