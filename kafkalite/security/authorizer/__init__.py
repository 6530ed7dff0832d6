"""Authorization: Kafka's ACLs (``AclAuthorizer``) and the mTLS principal."""
