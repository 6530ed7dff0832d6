"""Compiled big-endian layouts of Kafka's primitive types, shared by every codec.

Kafka's wire and on-disk formats are big-endian throughout. Use them as
``structs.I32.unpack_from(...)`` after ``from kafkalite.common import structs``,
not through ``from kafkalite.common.structs import I32``: CPython 3.11 compiles a
method call on a name bound by ``from ... import`` as an attribute load plus a
call (it assumes the name is a module), which allocates a bound method per call,
~30 ns, 6% of the Produce request parser. Through the module the call compiles
to the method-call opcodes, as fast as a private module-level copy. Layouts of
several fields (a batch header, an index entry) stay with the codec that owns them.
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
