"""Values every layer shares: the bottom of the layering, importing nothing of kafkalite.

``types`` holds the value types that cross layers (``TopicPartition``, a broker's
``Endpoint``), ``structs`` the compiled big-endian layouts of Kafka's primitive
types, ``errors`` the errors several layers raise (``ConfigError``). Kafka keeps the same things in ``org.apache.kafka.common``.
"""
