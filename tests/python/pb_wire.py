"""The protobuf wire format, by hand, for tests that speak to a ps-server
without the generated classes (proto/pstrain.proto): encoding varints and
fields, and reading a message's fields by number."""
from __future__ import annotations


def varint(n: int) -> bytes:
    """n as a protobuf varint (a negative n as its 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def parse(message: bytes) -> dict[int, list] | None:
    """Fields by number (varints as int, length-delimited as bytes); None when
    the bytes are not a message this reader fully understands."""
    out: dict[int, list] = {}
    i = 0
    n = len(message)

    def read_varint() -> int:
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= n or shift > 63:
                raise ValueError
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    try:
        while i < n:
            key = read_varint()
            number, wire = key >> 3, key & 7
            if wire == 0:
                out.setdefault(number, []).append(read_varint())
            elif wire == 2:
                size = read_varint()
                if i + size > n:
                    return None
                out.setdefault(number, []).append(message[i:i + size])
                i += size
            elif wire == 1 and i + 8 <= n:
                out.setdefault(number, []).append(message[i:i + 8])
                i += 8
            elif wire == 5 and i + 4 <= n:
                out.setdefault(number, []).append(message[i:i + 4])
                i += 4
            else:
                return None
    except ValueError:
        return None
    return out


def fields(message: bytes) -> dict[int, list]:
    """parse(), for messages that must be well formed: ValueError otherwise."""
    out = parse(message)
    if out is None:
        raise ValueError(f"not a protobuf message this reader understands: {message[:32]!r}")
    return out
