"""Kafka's authorization rules on the authorizer's cache (no broker), the mTLS
principal's distinguished name and Kafka's ``ssl.principal.mapping.rules``."""

from __future__ import annotations

import pytest

from kafkalite.common.principal import KafkaPrincipal
from kafkalite.security.authorizer.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kafkalite.security.authorizer.acl import (
    AclOperation as Op,
)
from kafkalite.security.authorizer.authorizer import AclAuthorizer
from kafkalite.security.ssl_principal import (
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
    principal_of,
)

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY


def _authz(*acls: tuple, **kw) -> AclAuthorizer:
    a = AclAuthorizer(**kw)
    for rtype, name, pattern, principal, host, op, perm in acls:
        a._acls[ResourcePattern(rtype, name, pattern)] = a._acls.get(
            ResourcePattern(rtype, name, pattern), frozenset()
        ) | {AccessControlEntry(principal, host, op, perm)}
    a._rebuild_index()
    return a


LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


@pytest.mark.parametrize(
    "granted, asked, allowed",
    [
        (Op.READ, Op.DESCRIBE, True),
        (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True),
        (Op.ALTER, Op.DESCRIBE, True),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
        (Op.ALL, Op.ALTER_CONFIGS, True),
        (Op.DESCRIBE, Op.READ, False),
        (Op.CREATE, Op.DESCRIBE, False),
        (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
        (Op.READ, Op.WRITE, False),
    ],
)
def test_implied_operations(granted, asked, allowed) -> None:
    a = _authz((TOPIC, "t", LIT, "User:alice", "*", granted, ALLOW))
    assert a.authorize(ALICE, "1.2.3.4", asked, TOPIC, "t") is allowed


def test_deny_wins_and_is_never_implied() -> None:
    a = _authz(
        (TOPIC, "t", LIT, "User:alice", "*", Op.ALL, ALLOW),
        (TOPIC, "t", PRE, "User:*", "*", Op.WRITE, DENY),
    )
    assert not a.authorize(ALICE, "h", Op.WRITE, TOPIC, "t")
    # DENY Write does not deny Describe (implied by the ALLOW ALL)
    assert a.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")
    assert a.authorize(ALICE, "h", Op.READ, TOPIC, "t")


def test_patterns_wildcards_principals_and_hosts() -> None:
    a = _authz(
        (TOPIC, "*", LIT, "User:*", "10.0.0.1", Op.READ, ALLOW),
        (TOPIC, "pay", PRE, "User:alice", "*", Op.WRITE, ALLOW),
        (GROUP, "g", LIT, "User:bob", "*", Op.READ, ALLOW),
    )
    assert a.authorize(BOB, "10.0.0.1", Op.READ, TOPIC, "anything")
    assert not a.authorize(BOB, "10.0.0.2", Op.READ, TOPIC, "anything")  # host
    assert a.authorize(ALICE, "x", Op.WRITE, TOPIC, "payments")  # prefix
    assert not a.authorize(ALICE, "x", Op.WRITE, TOPIC, "pa")
    assert not a.authorize(BOB, "x", Op.WRITE, TOPIC, "payments")  # principal
    assert a.authorize(BOB, "x", Op.READ, GROUP, "g")
    assert not a.authorize(BOB, "x", Op.READ, GROUP, "g2")  # literal is exact
    assert not a.authorize(KafkaPrincipal("Group", "bob"), "x", Op.READ, GROUP, "g")  # type


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    a = _authz((TOPIC, "guarded", LIT, "User:bob", "*", Op.READ, ALLOW), super_users={"User:root"})
    assert a.authorize(KafkaPrincipal("User", "root"), "h", Op.ALTER, TOPIC, "guarded")
    assert not a.authorize(ALICE, "h", Op.READ, TOPIC, "free")
    open_ = _authz(
        (TOPIC, "guarded", LIT, "User:bob", "*", Op.READ, ALLOW), allow_everyone_if_no_acl=True
    )
    assert open_.authorize(ALICE, "h", Op.READ, TOPIC, "free")  # no ACL at all: allowed
    assert not open_.authorize(ALICE, "h", Op.READ, TOPIC, "guarded")  # ACLs exist: rules


def test_authorize_any_for_idempotent_producers() -> None:
    a = _authz(
        (TOPIC, "t", PRE, "User:alice", "*", Op.WRITE, ALLOW),
        (TOPIC, "*", LIT, "User:bob", "*", Op.WRITE, ALLOW),
        (TOPIC, "*", LIT, "User:bob", "*", Op.ALL, DENY),
    )
    assert a.authorize_any(ALICE, "h", Op.WRITE, TOPIC)
    assert not a.authorize_any(BOB, "h", Op.WRITE, TOPIC)
    assert not a.authorize_any(KafkaPrincipal("User", "carol"), "h", Op.WRITE, TOPIC)


def test_decisions_are_cached_and_dropped_on_change() -> None:
    a = _authz((TOPIC, "t", LIT, "User:alice", "*", Op.READ, ALLOW))
    assert a.authorize(ALICE, "h", Op.READ, TOPIC, "t")
    assert len(a._decisions) == 1
    a._set(ResourcePattern(TOPIC, "t", LIT), [])
    assert not a._decisions
    assert not a.authorize(ALICE, "h", Op.READ, TOPIC, "t")


def test_binding_validation_and_filters() -> None:
    ok = AclBinding(
        ResourcePattern(TOPIC, "t", LIT), AccessControlEntry("User:a", "*", Op.READ, ALLOW)
    )
    ok.validate()
    for pattern, entry in [
        (ResourcePattern(TOPIC, "*", PRE), ok.entry),
        (ResourcePattern(ResourceType.CLUSTER, "c", LIT), ok.entry),
        (
            ResourcePattern(TOPIC, "t", LIT),
            AccessControlEntry("User:a", "*", Op.IDEMPOTENT_WRITE, ALLOW),
        ),
        (ResourcePattern(TOPIC, "t", PatternType.MATCH), ok.entry),
        (ResourcePattern(TOPIC, "t", LIT), AccessControlEntry("a", "*", Op.READ, ALLOW)),
    ]:
        with pytest.raises(InvalidAcl):
            AclBinding(pattern, entry).validate()
    wild = AclBinding(ResourcePattern(TOPIC, "*", LIT), ok.entry)
    pre = AclBinding(ResourcePattern(TOPIC, "tx", PRE), ok.entry)

    def f(name, pt):
        return AclBindingFilter(TOPIC, name, pt, None, None, Op.ANY, PermissionType.ANY)

    assert f("txn", PatternType.MATCH).matches(wild) and f("txn", PatternType.MATCH).matches(pre)
    assert not f("t", PatternType.MATCH).matches(pre)
    assert f("tx", PatternType.ANY).matches(pre) and not f("tx", LIT).matches(pre)


# ---- the mTLS principal -----------------------------------------------------------------
def test_distinguished_name_as_java_writes_it() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")),
        (("commonName", "#alice "),),
        (("emailAddress", "a@b.c"),),
    )
    assert distinguished_name(subject) == (
        "1.2.840.113549.1.9.1=#1605614062" + "2e63,CN=\\#alice\\ ,OU=eng+OU=ops,O=Acme\\, Inc.,C=US"
    )


@pytest.mark.parametrize(
    "dn, name",
    [
        ("CN=kafka-server,OU=ServiceUsers,O=Org,C=US", "kafka-server"),
        ("CN=Duke,OU=JavaSoft,O=Sun,L=Palo Alto,ST=CA,C=US", "duke@javasoft"),
        ("cn=duke,ou=javasoft,dc=sun,dc=com", "DUKE@JAVASOFT"),
        ("OU=x,CN=abc.def,O=z", "ABC.DEF"),
        ("O=no-cn", "O=no-cn"),
    ],
)
def test_kafkas_mapping_rules(dn: str, name: str) -> None:
    mapper = SslPrincipalMapper.from_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\n"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT"
    )
    assert mapper.name(dn) == name


def test_no_matching_rule_and_bad_rules() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*)$/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("O=x")
    for bad in ("RULE:^CN=(.*$/$1/", "NOT A RULE", "RULE:abc"):
        with pytest.raises(ValueError):
            SslPrincipalMapper.from_rules(bad)
    assert principal_of({}, mapper).name == "ANONYMOUS"
    assert principal_of({"subject": ((("commonName", "z"),),)}, mapper) == KafkaPrincipal(
        "User", "z"
    )


def test_every_api_has_an_authorization_rule() -> None:
    """A new API must say how it is authorized (kafkalite.server.authorization), or a
    broker with an authorizer refuses to build its API table."""
    from kafkalite.server.apis import build_api_table
    from kafkalite.server.authorization import _RULES, IN_HANDLER

    missing = set(build_api_table(None)) - set(_RULES) - set(IN_HANDLER)
    assert not missing, f"APIs without an authorization rule: {sorted(missing)}"


def test_config_refuses_unknown_authorizers_and_bad_mapping_rules() -> None:
    from kafkalite.server.config import BrokerConfig, ConfigError

    for key, value in (
        ("authorizer.class.name", "com.example.MyAuthorizer"),
        ("ssl.principal.mapping.rules", "RULE:^CN=(.*$/$1/"),
    ):
        with pytest.raises(ConfigError) as e:
            BrokerConfig({key: value})
        assert e.value.key == key
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafkalite.security.authorizer.AclAuthorizer",
        "",
    ):
        assert BrokerConfig({"authorizer.class.name": name})["authorizer.class.name"] == name


def test_an_api_without_a_rule_is_for_super_users_only() -> None:
    from types import SimpleNamespace

    from kafkalite.server.authorization import AuthHelper, authorize_api

    helper = AuthHelper(_authz(super_users={"User:root"}))
    api = authorize_api(helper, 9999, lambda ctx, req: "handled", lambda req, v, code: code)

    def ctx(name: str) -> SimpleNamespace:
        principal = KafkaPrincipal("User", name)
        conn = SimpleNamespace(peer=("127.0.0.1", 1), principal=principal)
        return SimpleNamespace(principal=principal, connection=conn, api_version=0)

    assert api(ctx("root"), None) == "handled"
    assert api(ctx("alice"), None) == 31
