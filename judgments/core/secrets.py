"""Secrets at rest (a project's LLM API key): encrypted and authenticated under keys derived from SECRET_KEY.

Standard library only: HMAC-SHA256 as a pseudo-random function in counter mode gives the keystream (XORed
with the text) and, under a second key, the tag over nonce and ciphertext (encrypt-then-MAC). Both keys are
derived from SECRET_KEY and a `purpose` (the owning object), so a sealed value copied to another row does
not open there. A new SECRET_KEY voids every sealed value: `unseal` raises SecretUnreadable and the lead
enters the key again.
"""

import base64
import hashlib
import hmac
import secrets

from django.utils.crypto import salted_hmac

VERSION = "v1"
NONCE_BYTES = 16
BLOCK = hashlib.sha256().digest_size


class SecretUnreadable(ValueError):
    """A sealed value that does not open: SECRET_KEY changed, or the stored value was altered."""


def _keys(purpose: str) -> tuple[bytes, bytes]:
    return (salted_hmac("judgments.core.secrets.encrypt", purpose, algorithm="sha256").digest(),
            salted_hmac("judgments.core.secrets.authenticate", purpose, algorithm="sha256").digest())


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = (hmac.digest(key, nonce + counter.to_bytes(8, "big"), "sha256") for counter in range(-(-length // BLOCK)))
    return b"".join(blocks)[:length]


def seal(text: str, *, purpose: str) -> str:
    encrypt, authenticate = _keys(purpose)
    nonce = secrets.token_bytes(NONCE_BYTES)
    plain = text.encode("utf-8")
    cipher = bytes(a ^ b for a, b in zip(plain, _keystream(encrypt, nonce, len(plain))))
    tag = hmac.digest(authenticate, nonce + cipher, "sha256")
    return f"{VERSION}:{base64.urlsafe_b64encode(nonce + tag + cipher).decode()}"


def unseal(sealed: str, *, purpose: str) -> str:
    encrypt, authenticate = _keys(purpose)
    version, _, body = sealed.partition(":")
    try:
        raw = base64.urlsafe_b64decode(body.encode())
    except ValueError:
        raw = b""
    nonce, tag, cipher = raw[:NONCE_BYTES], raw[NONCE_BYTES:NONCE_BYTES + BLOCK], raw[NONCE_BYTES + BLOCK:]
    if version != VERSION or len(tag) != BLOCK or not hmac.compare_digest(tag, hmac.digest(authenticate, nonce + cipher, "sha256")):
        raise SecretUnreadable("the stored API key cannot be read (SECRET_KEY changed?): enter it again")
    return bytes(a ^ b for a, b in zip(cipher, _keystream(encrypt, nonce, len(cipher)))).decode("utf-8")
