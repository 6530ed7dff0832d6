"""Authentication (SASL, TLS client certificates) and authorization (ACLs).

Layer 4, beside ``quota``: the transport (``network``) runs the SASL exchange
and the server's handlers ask the authorizer, so both sit above it; it keeps
its state (SCRAM credentials, ACLs) in the metadata store below it.
"""
