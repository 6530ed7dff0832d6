"""Compiled big-endian layouts of Kafka's primitive types, shared by every codec.

Kafka's wire and on-disk formats are big-endian throughout. Importing these binds
a module global in the importer, exactly like a private copy would: a hot loop
looks ``I32`` up with the same one LOAD_GLOBAL either way. Layouts of several
fields (a batch header, an index entry) stay next to the codec that owns them.
"""

from __future__ import annotations

import struct

__all__ = ["I8", "I16", "I32", "I64", "U32"]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
#: CRC-32C and other unsigned 32-bit fields
U32 = struct.Struct(">I")
