"""SCRAM credentials in the metadata store, as Kafka's ZooKeeper mode keeps them.

``/config/users/<user>`` (the name sanitized as Kafka's ``Sanitizer``) is an
``{"version":1,"config":{...}}`` whose ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` entries
are ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (Kafka's
``ScramCredentialUtils.credentialToString``); the same znode holds the user's quotas,
which this module never touches. Every change writes a ``/config/changes``
notification; each broker watches them and reloads its cache, so a credential
altered through any broker authenticates on every broker within the store's
notification latency. Only salted keys are stored: never the password.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.entity_config import update_entity_config
from kafkalite.metadata.store import MetadataStore, MetadataStoreError, NoNodeError
from kafkalite.protocol import scram
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["CredentialCache", "ScramCredential", "ScramCredentialStore", "ScramRequestError"]

RESOURCE_NOT_FOUND = int(ErrorCode.resource_not_found)
DUPLICATE_RESOURCE = int(ErrorCode.duplicate_resource)
UNACCEPTABLE_CREDENTIAL = int(ErrorCode.unacceptable_credential)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, even in a debug log
        return f"ScramCredential(iterations={self.iterations})"

    def to_config(self) -> str:
        return (
            f"salt={scram.b64(self.salt)},stored_key={scram.b64(self.stored_key)},"
            f"server_key={scram.b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)
        try:
            return cls(
                scram.unb64(fields["salt"], "salt"),
                scram.unb64(fields["stored_key"], "stored key"),
                scram.unb64(fields["server_key"], "server key"),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError):
            raise ValueError("not a SCRAM credential") from None

    @classmethod
    def from_salted_password(
        cls, mech: scram.ScramMechanism, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        return cls(salt, scram.stored_key(mech, salted), scram.server_key(mech, salted), iterations)

    @classmethod
    def from_password(
        cls, mech: scram.ScramMechanism, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        import os

        salt = salt if salt is not None else os.urandom(32)
        salted = scram.salted_password(mech, password.encode(), salt, iterations)
        return cls.from_salted_password(mech, salt, salted, iterations)


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize`` (URL-encoding), as the quota znodes use."""
    return urllib.parse.quote(name, safe="")


class CredentialCache:
    """``(user, mechanism) -> ScramCredential``, what the SCRAM server reads per login."""

    def __init__(self) -> None:
        self.credentials: dict[tuple[str, str], ScramCredential] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        out: dict[str, dict[str, ScramCredential]] = {}
        for (user, mech), cred in self.credentials.items():
            out.setdefault(user, {})[mech] = cred
        return out


class ScramRequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.user!r}, {self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int


class ScramCredentialStore:
    """Loads, watches and writes the SCRAM entries of ``/config/users``."""

    def __init__(self, cache: CredentialCache | None = None) -> None:
        self.cache = cache or CredentialCache()
        self._store: MetadataStore | None = None
        self._watcher = ChangeWatcher(self._load_and_watch, "SCRAM credentials", 1.0)

    async def start(self, store: MetadataStore) -> None:
        self._store = store
        await store.ensure_path(zk_paths.CONFIG_CHANGES)
        await self._load_and_watch()

    async def stop(self) -> None:
        await self._watcher.stop()

    async def load(self) -> dict[tuple[str, str], ScramCredential]:
        assert self._store is not None
        out: dict[tuple[str, str], ScramCredential] = {}
        try:
            users = await self._store.get_children(zk_paths.CONFIG_USERS)
        except NoNodeError:
            return out
        for u in sorted(users):
            try:
                raw, _ = await self._store.get(f"{zk_paths.CONFIG_USERS}/{u}")
                config = zk_data.EntityConfig.decode(raw).config
            except (NoNodeError, zk_data.MetadataFormatError):
                continue
            name = urllib.parse.unquote(u)
            for mech in scram.MECHANISMS:
                text = config.get(mech)
                if text is None:
                    continue
                try:
                    out[(name, mech)] = ScramCredential.from_config(text)
                except ValueError:
                    log.warning("ignoring a malformed %s credential of user %s", mech, name)
        return out

    async def _load_and_watch(self) -> None:
        assert self._store is not None
        await self._store.get_children(zk_paths.CONFIG_CHANGES, watch=self._watcher.on_change)
        self.cache.credentials = await self.load()

    # ---- DescribeUserScramCredentials / AlterUserScramCredentials --------------
    def describe(
        self, users: Sequence[str] | None
    ) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """Per user: (name, error code, message, [(mechanism type, iterations)])."""
        known = self.cache.users()
        if users is None:
            names = sorted(known)
        else:
            names = list(users)
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        out: list[tuple[str, int, str | None, list[tuple[int, int]]]] = []
        for n in dict.fromkeys(names):
            if counts[n] > 1:
                out.append(
                    (
                        n,
                        DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice in a single request",
                        [],
                    )
                )
            elif n not in known:
                out.append(
                    (
                        n,
                        RESOURCE_NOT_FOUND,
                        "Attempt to describe a user credential that does not exist",
                        [],
                    )
                )
            else:
                infos = sorted(
                    (scram.MECHANISMS[m].type_id, c.iterations) for m, c in known[n].items()
                )
                out.append((n, 0, None, infos))
        return out

    async def alter(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> list[tuple[str, int, str | None]]:
        """Kafka's checks per user (duplicates, mechanism, iterations, existence); a user's
        changes are applied together or not at all. Returns (user, code, message)."""
        order: list[str] = []
        errors: dict[str, tuple[int, str]] = {}
        seen: dict[tuple[str, int], int] = {}
        for d in deletions:
            order.append(d.user)
            seen[(d.user, d.mechanism)] = seen.get((d.user, d.mechanism), 0) + 1
        for u in upsertions:
            order.append(u.user)
            seen[(u.user, u.mechanism)] = seen.get((u.user, u.mechanism), 0) + 1
        for (user, _), n in seen.items():
            if n > 1:
                errors.setdefault(
                    user,
                    (
                        DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request",
                    ),
                )

        def fail(user: str, code: int, message: str) -> None:
            errors.setdefault(user, (code, message))

        for d in deletions:
            mech = scram.BY_TYPE.get(d.mechanism)
            if not d.user:
                fail(d.user, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif mech is None:
                fail(d.user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif self.cache.get(d.user, mech.name) is None:
                fail(
                    d.user,
                    RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
        for u in upsertions:
            mech = scram.BY_TYPE.get(u.mechanism)
            if not u.user:
                fail(u.user, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif mech is None:
                fail(u.user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif u.iterations < mech.min_iterations:
                fail(u.user, UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif u.iterations > scram.MAX_ITERATIONS:
                fail(u.user, UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            elif not u.salt or not u.salted_password:
                fail(u.user, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        results: list[tuple[str, int, str | None]] = []
        for user in dict.fromkeys(order):
            if user in errors:
                code, message = errors[user]
                results.append((user, code, message))
                continue
            try:
                await self._apply(
                    user,
                    [d for d in deletions if d.user == user],
                    [u for u in upsertions if u.user == user],
                )
                results.append((user, 0, None))
            except MetadataStoreError as e:
                results.append((user, int(ErrorCode.unknown_server_error), f"store error: {e}"))
        return results

    async def _apply(
        self, user: str, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> None:
        assert self._store is not None, "start() first"
        new: dict[str, ScramCredential] = {}
        for u in upsertions:
            mech = scram.BY_TYPE[u.mechanism]
            new[mech.name] = ScramCredential.from_salted_password(
                mech, u.salt, u.salted_password, u.iterations
            )
        gone = {scram.BY_TYPE[d.mechanism].name for d in deletions}

        def update(current: dict[str, str]) -> dict[str, str]:
            for m in gone:
                current.pop(m, None)
            for m, cred in new.items():
                current[m] = cred.to_config()
            return current

        name = sanitize(user)
        await update_entity_config(
            self._store, f"{zk_paths.CONFIG_USERS}/{name}", f"users/{name}", update
        )
        for m in gone:
            self.cache.credentials.pop((user, m), None)
        for m, cred in new.items():
            self.cache.credentials[(user, m)] = cred
