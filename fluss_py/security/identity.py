"""What a process presents when it calls a server: TLS files and/or a user's password.

``PeerIdentity`` is built from config (``security.tls.*``, ``security.user``, ``security.password``) by the
client, the CLI and by servers for their calls to other servers. The password travels as request metadata
(``fluss-user`` / ``fluss-password``) and only inside TLS: an identity with a password but no TLS is refused
at construction. ``repr`` never shows the password.

Who may call: anyone; immutable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fluss_py import config as cfg
from fluss_py.errors import ConfigError
from fluss_py.security.tls import TlsFiles

USER_HEADER = "fluss-user"
PASSWORD_HEADER = "fluss-password"


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """TLS files (None: plaintext) and an optional user + password sent with every request."""

    tls: TlsFiles | None = None
    user: str = ""
    password: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.password and self.tls is None:
            raise ConfigError(cfg.AUTH_PASSWORD.key, "a password is only sent over TLS: set security.tls.enabled")
        if bool(self.user) != bool(self.password):
            raise ConfigError(cfg.AUTH_USER.key, "security.user and security.password go together")

    @classmethod
    def from_config(cls, config: cfg.Config) -> PeerIdentity:
        return cls(TlsFiles.from_config(config), config[cfg.AUTH_USER], config.secret(cfg.AUTH_PASSWORD))

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> PeerIdentity:
        """From client settings (``security.*`` keys of a properties file or env); ConfigError naming a bad key."""
        return cls.from_config(cfg.Config(cfg.CLIENT, settings))

    def metadata(self) -> tuple[tuple[str, str], ...] | None:
        """Request metadata carrying the credentials (None without a user)."""
        if not self.user:
            return None
        return ((USER_HEADER, self.user), (PASSWORD_HEADER, self.password))


PLAINTEXT = PeerIdentity()


def read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines (Kafka's client properties convention); ``#``/``!`` comments and blanks skipped.
    ConfigError naming the file when it cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(str(path), f"cannot read the client config file: {e}") from None
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out
