"""What every ``kafkalite <tool>`` shares: the bootstrap and ``--command-config``
options, a quick reachability probe (one clean line instead of a client library
retrying for a minute), admin clients with short timeouts, and :class:`CliError`.

The tools use confluent-kafka (and kafka-python's admin where confluent-kafka's
Python AdminClient has no call, e.g. partition reassignment), imported lazily so
``kafkalite-server`` and the older wire-client tools work without them.
"""

from __future__ import annotations

import argparse
import logging
import re
import socket
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

#: seconds a tool waits for one admin call (Kafka's tools default to 30 s; a CLI
#: user at a prompt would rather know sooner)
REQUEST_TIMEOUT = 15.0
#: seconds the probe waits for a TCP connection to a bootstrap server
PROBE_TIMEOUT = 3.0


class CliError(Exception):
    """A failure the tool reports as one line on stderr, exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_bootstrap(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT[,HOST:PORT]")
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties file (librdkafka names, e.g. security.protocol, sasl.*)",
    )


def probe(bootstrap: str, timeout: float = PROBE_TIMEOUT) -> None:
    """Raise CliError unless at least one bootstrap server accepts a TCP connection."""
    errors = []
    for hp in bootstrap.split(","):
        hp = hp.strip()
        if not hp:
            continue
        host, sep, port = hp.rpartition(":")
        if not sep or not port.isdigit():
            raise CliError(f"invalid --bootstrap-server {hp!r}: expected HOST:PORT", 2)
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
            return
        except OSError as e:
            errors.append(f"{hp} ({e.strerror or e})")
    raise CliError(f"cannot connect to any broker at {'; '.join(errors) or repr(bootstrap)}")


def load_properties(path: str | None) -> dict[str, str]:
    """A Java-style properties file (``k=v`` or ``k: v`` lines, ``#``/``!`` comments)."""
    if not path:
        return {}
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line[0] in "#!":
                    continue
                sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
                if sep < 0:
                    out[line] = ""
                else:
                    out[line[:sep].strip()] = line[sep + 1 :].strip()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    return out


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a tool reaches a secured listener, from a Kafka client properties file
    (``--command-config`` / ``--consumer.config`` / ``--producer.config``): the Java
    client's names (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` or
    ``sasl.username``/``sasl.password``, ``ssl.truststore.*``/``ssl.keystore.*`` of type
    PEM, or librdkafka's ``ssl.ca.location`` ...), turned into what each of the three
    client libraries of the tools wants."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)""")

#: Java client keys librdkafka has no counterpart of (dropped once translated)
_JAVA_ONLY = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "default.api.timeout.ms",
    }
)


def client_security(props: dict[str, str]) -> ClientSecurity:
    """The security settings of a properties file (Java or librdkafka names)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).upper()
    username, password = props.get("sasl.username"), props.get("sasl.password")
    jaas = props.get("sasl.jaas.config")
    if jaas and username is None:
        opts = {
            m[1]: re.sub(r"\\(.)", r"\1", m[2]) if m[2] is not None else m[3]
            for m in _JAAS_OPTION.finditer(jaas)
        }
        username, password = opts.get("username"), opts.get("password")
        if username is None:
            raise CliError('sasl.jaas.config has no username="..." option', 2)
    cafile = props.get("ssl.ca.location")
    certfile, keyfile = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if "ssl.truststore.location" in props:
        if props.get("ssl.truststore.type", "JKS").upper() != "PEM":
            raise CliError(
                "ssl.truststore.location: only ssl.truststore.type=PEM is read by these "
                "tools (or give ssl.ca.location)",
                2,
            )
        cafile = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:
        if props.get("ssl.keystore.type", "JKS").upper() != "PEM":
            raise CliError(
                "ssl.keystore.location: only ssl.keystore.type=PEM is read by these tools "
                "(or give ssl.certificate.location and ssl.key.location)",
                2,
            )
        certfile = keyfile = props["ssl.keystore.location"]
    return ClientSecurity(
        protocol=protocol,
        mechanism=mechanism,
        username=username,
        password=password,
        cafile=cafile,
        certfile=certfile,
        keyfile=keyfile,
        key_password=props.get("ssl.key.password"),
        check_hostname=props.get("ssl.endpoint.identification.algorithm", "https").lower()
        not in ("", "none"),
    )


def librdkafka_properties(props: dict[str, Any]) -> dict[str, Any]:
    """``props`` for confluent-kafka: the Java client's security names translated to
    librdkafka's (the other keys pass unchanged: most names are shared)."""
    sec = client_security({k: str(v) for k, v in props.items() if isinstance(v, str | int)})
    out = {k: v for k, v in props.items() if k not in _JAVA_ONLY}
    if sec.sasl and sec.username is not None:
        out.setdefault("sasl.username", sec.username)
        out.setdefault("sasl.password", sec.password or "")
    if sec.cafile:
        out["ssl.ca.location"] = sec.cafile
    if sec.certfile and "ssl.keystore.location" in props:
        out.pop("ssl.keystore.location", None)
        out.pop("ssl.keystore.password", None)
        out["ssl.certificate.location"] = sec.certfile
        out["ssl.key.location"] = sec.keyfile
    if "ssl.endpoint.identification.algorithm" in out:
        out["ssl.endpoint.identification.algorithm"] = "https" if sec.check_hostname else "none"
    return out


def tool_properties(args: argparse.Namespace) -> dict[str, str]:
    """The tool's client properties file: ``--command-config``, ``--consumer.config`` or
    ``--producer.config`` (whichever the tool has)."""
    for attr in ("command_config", "consumer_config", "producer_config"):
        path = getattr(args, attr, None)
        if path:
            return load_properties(path)
    return {}


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for a tool: bootstrap, command-config, short timeouts."""
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        "socket.connection.setup.timeout.ms": int(PROBE_TIMEOUT * 1000),
        "log_level": 0,
        "logger": _quiet_logger,
    }
    conf.update(load_properties(getattr(args, "command_config", None)))
    conf.update(extra)
    return librdkafka_properties(conf)


#: librdkafka logs connection failures to stderr; the tools report errors themselves
_quiet_logger = logging.getLogger("kafkalite.cli.librdkafka")
_quiet_logger.addHandler(logging.NullHandler())
_quiet_logger.propagate = False


def admin(args: argparse.Namespace, **extra: Any) -> Any:
    """A confluent-kafka AdminClient for ``args.bootstrap_server``."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise CliError("this tool needs confluent-kafka: pip install 'kafkalite[cli]'", 2) from None
    return AdminClient(client_config(args, **extra))


def kadmin(args: argparse.Namespace) -> Any:
    """A kafka-python KafkaAdminClient, for the calls confluent-kafka's lacks."""
    try:
        from kafka.admin import KafkaAdminClient
    except ImportError:
        raise CliError("this tool needs kafka-python: pip install 'kafkalite[cli]'", 2) from None
    # kafka-python logs every refused connection (a dead broker of the cluster) at
    # WARNING, which Python's last-resort handler would print: the tool reports errors
    quiet = logging.getLogger("kafka")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    sec = client_security(tool_properties(args))
    kw: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap_server,
        "client_id": "kafkalite-cli",
        "request_timeout_ms": int(REQUEST_TIMEOUT * 1000),
        "security_protocol": sec.protocol,
    }
    if sec.sasl:
        kw["sasl_mechanism"] = sec.mechanism
        kw["sasl_plain_username"] = sec.username
        kw["sasl_plain_password"] = sec.password
    if sec.tls:
        kw["ssl_cafile"] = sec.cafile
        kw["ssl_certfile"] = sec.certfile
        kw["ssl_keyfile"] = sec.keyfile
        kw["ssl_password"] = sec.key_password
        kw["ssl_check_hostname"] = sec.check_hostname
    return KafkaAdminClient(**kw)


def result(f: Future[Any], what: str = "", timeout: float = REQUEST_TIMEOUT) -> Any:
    """The future's value, or CliError with the Kafka error's name and message."""
    try:
        return f.result(timeout=timeout)
    except TimeoutError:
        raise CliError(f"{what + ': ' if what else ''}timed out after {timeout:g} s") from None
    except Exception as e:  # KafkaException and friends
        raise CliError(f"{what + ': ' if what else ''}{error_text(e)}") from None


def error_text(e: BaseException) -> str:
    """``NAME: message`` for a confluent-kafka KafkaException, str(e) otherwise."""
    err = e.args[0] if e.args else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        name, msg = err.name(), err.str()
        return name if not msg or msg == name else f"{name}: {msg}"
    return str(e) or type(e).__name__


def topic_id(u: object) -> str:
    """Kafka's Uuid.toString (URL-safe base64); librdkafka prints the standard alphabet."""
    return str(u).replace("+", "-").replace("/", "_")


def timeout_kw() -> dict[str, float]:
    return {"request_timeout": REQUEST_TIMEOUT}


def parse_tp_list(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (kafka-consumer-groups.sh's --topic)."""
    name, _, parts = spec.partition(":")
    if not parts:
        return name, None
    try:
        return name, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise CliError(f"invalid partitions in {spec!r}", 2) from None


def pretty_table(headers: list[str], rows: list[list[str]]) -> None:
    """Kafka's ToolsUtils.prettyPrintTable: each column padded to its widest value, and a
    tab after every column."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("".join(f"{v:<{w}}\t" for v, w in zip(row, widths, strict=True)))
