#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_client_codec (client protocol, docs/design.md §1): a few valid requests
and responses and a few broken datagrams, one file each. Run once from anywhere; re-running rewrites
the same bytes."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_client_codec")

LOGIN, HEARTBEAT, LOOKUP, LOGOUT, PING = 1, 2, 3, 4, 5
RESP = 0x80


def tlv(t, value):
    return bytes([t, len(value)]) + value


def endpoint4(a, b, c, d, port):
    return tlv(1, struct.pack(">BH4B", 4, port, a, b, c, d))


def endpoint6(addr16, port):
    return tlv(1, struct.pack(">BH", 6, port) + addr16)


def age(s):
    return tlv(2, struct.pack(">I", s))


def token(user_id, expiry):
    return tlv(3, struct.pack(">QI", user_id, expiry) + bytes(range(0xA0, 0xB0)))


def table_version(v):
    return tlv(4, struct.pack(">Q", v))


def datagram(op, body=b"", request_id=1, user_id=0, status=0, flags=0, version=1, pad=True,
             body_len=None):
    if pad and 20 + len(body) < 48:
        n = max(48 - 20 - len(body), 2)
        body += tlv(0, bytes(n - 2))
    if body_len is None:
        body_len = len(body)
    header = b"IH" + struct.pack(">BBIQBBH", version, op, request_id, user_id, status, flags,
                                 body_len)
    return header + body


V6 = bytes.fromhex("20010db8000000000000000000000001")
MAPPED = bytes.fromhex("00000000000000000000ffff0a000001")

SEEDS = {
    # Valid requests.
    "login_v4": datagram(LOGIN, endpoint4(192, 0, 2, 1, 5222), user_id=0x1122334455667788),
    "heartbeat_v6_token": datagram(HEARTBEAT, endpoint6(V6, 443) + token(7, 1700000000),
                                   request_id=2, user_id=7),
    "lookup": datagram(LOOKUP, request_id=3, user_id=42),
    "logout_token": datagram(LOGOUT, token(9, 1), user_id=9),
    "ping": datagram(PING, request_id=5),
    "lookup_padded_636": datagram(LOOKUP, tlv(0, bytes(255)) * 2 + tlv(0, bytes(100)), user_id=8),
    "login_mapped_unknown_tlv": datagram(LOGIN, tlv(0, b"") + tlv(0x77, b"xyz")
                                         + endpoint6(MAPPED, 80), user_id=1),
    # Valid responses (never padded).
    "resp_lookup_ok": datagram(LOOKUP | RESP, endpoint6(V6, 443) + age(90), request_id=0xDEADBEEF,
                               user_id=42, pad=False),
    "resp_ping_ok": datagram(PING | RESP, table_version(0x0102030405060708), pad=False),
    "resp_error": datagram(LOOKUP | RESP, user_id=5, status=7, pad=False),
    # Broken datagrams.
    "bad_magic": b"HI" + datagram(LOOKUP)[2:],
    "bad_version": datagram(LOOKUP, version=2, user_id=42),
    "too_short": datagram(LOOKUP, pad=False),
    "length_mismatch": datagram(LOOKUP, body_len=200),
    "tlv_overrun": datagram(LOGIN, tlv(0, bytes(25)) + b"\x02\x04\x00"),
    "duplicate_endpoint": datagram(LOGIN, endpoint4(10, 0, 0, 1, 1) + endpoint4(10, 0, 0, 2, 2)),
    "bad_field_ping_user": datagram(PING, user_id=3),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
