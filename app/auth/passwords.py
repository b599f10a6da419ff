"""Password hashing with Argon2id (argon2-cffi defaults: RFC 9106 "low memory" profile, 64 MiB, t=3, p=4).

Hashes carry their own parameters, so raising the cost later only needs `needs_rehash` on the next login.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024  # bounds the hashing work a single request can ask for

_hasher = PasswordHasher()
# Verified against when the e-mail is unknown, so a miss costs as much time as a wrong password.
_DUMMY_HASH = _hasher.hash("clusterplan-dummy-password")


def check_password_policy(password: str) -> None:
    """Raise ValueError when a new password is too short or too long."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"password must have at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValueError(f"password must have at most {MAX_PASSWORD_LENGTH} characters")


def hash_password(password: str) -> str:
    check_password_policy(password)
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches; a None hash (unknown user) still spends the same hashing time."""
    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)
