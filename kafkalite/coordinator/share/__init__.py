"""Share groups (KIP-932): membership (ShareGroupHeartbeat/Describe), share partitions
(records acquired, acknowledged, released, archived), share sessions and the durable
share-partition state. See docs/share-groups.md."""
