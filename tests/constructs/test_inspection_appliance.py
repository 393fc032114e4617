"""The inspection appliance's GENEVE reflector: the program itself, run on its own and over sockets."""

from __future__ import annotations

import ast
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpufarm.constructs.inspection import GENEVE_PORT
from gpufarm.constructs.inspection_appliance import GENEVE_REFLECTOR, REFLECTOR_PATH


@pytest.fixture(scope="module")
def reflector() -> dict[str, Any]:
    """The reflector's functions, loaded without running its main()."""
    namespace: dict[str, Any] = {"__name__": "gwlb_geneve_reflector"}
    exec(compile(GENEVE_REFLECTOR, REFLECTOR_PATH, "exec"), namespace)
    return namespace


def _ones_complement_sum(data: bytes) -> int:
    """RFC 1071, word by word (the reference the reflector's shortcut must match)."""
    if len(data) % 2:
        data += b"\0"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return total


def test_reflector_runs_on_amazon_linux_2023_python() -> None:
    # AL2023 ships python3 3.9: the script must parse as 3.9 and use the standard library only.
    tree = ast.parse(GENEVE_REFLECTOR, feature_version=(3, 9))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported <= set(sys.stdlib_module_names)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 1499, 8500])
def test_reflector_checksum_matches_rfc_1071(reflector: dict[str, Any], size: int) -> None:
    data = bytes((i * 7 + 3) % 256 for i in range(size))
    # A computed zero goes on the wire as 0xFFFF (zero means "no checksum").
    assert reflector["checksum"](data) == (0xFFFF - _ones_complement_sum(data) or 0xFFFF)


def test_reflection_swaps_addresses_keeps_ports_and_payload(reflector: dict[str, Any]) -> None:
    datagram = bytes([0x01, 0, 0x08, 0, 0, 0, 0, 0]) + b"\x01\x08\x01\x02optn" + b"\x45" + bytes(range(200))
    gwlb, local = socket.inet_aton("10.250.4.17"), socket.inet_aton("10.250.0.9")
    packet = reflector["reflection"](datagram, gwlb, 40123, local)
    version, _tos, _len, _id, flags, ttl, protocol, _csum, src, dst = struct.unpack(
        "!BBHHHBBH4s4s", packet[:20]
    )
    assert (version, ttl, protocol, src, dst, flags) == (0x45, 64, socket.IPPROTO_UDP, local, gwlb, 0x4000)
    sport, dport, length, udp_checksum = struct.unpack("!HHHH", packet[20:28])
    assert (sport, dport, length) == (40123, GENEVE_PORT, 8 + len(datagram))
    assert packet[28:] == datagram
    # A correct UDP checksum sums, with the pseudo-header, to all ones.
    pseudo = local + gwlb + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length)
    assert udp_checksum != 0
    assert _ones_complement_sum(pseudo + packet[20:]) == 0xFFFF


@pytest.mark.parametrize(
    ("datagram", "geneve"),
    [
        (bytes([0x00, 0, 0x08, 0, 0, 0, 0, 0]) + b"\x45", True),
        (bytes([0x02, 0, 0x08, 0, 0, 0, 0, 0]) + b"\x01\x08\x01\x02abcd", True),
        (bytes([0x02, 0, 0x08, 0, 0, 0, 0, 0]) + b"\x01\x08", False),  # options cut short
        (bytes([0x40, 0, 0x08, 0, 0, 0, 0, 0]), False),  # version 1
        (b"\x00\x00\x08", False),
    ],
)
def test_only_geneve_version_0_is_reflected(reflector: dict[str, Any], datagram: bytes, geneve: bool) -> None:
    assert reflector["is_geneve"](datagram) is geneve


def _free_tcp_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_reflector_returns_packets_to_the_sender_and_answers_health_checks(tmp_path: Path) -> None:
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW).close()
    except PermissionError:
        pytest.skip("raw sockets need CAP_NET_RAW")
    script = tmp_path / "gwlb-geneve-reflector"
    script.write_text(GENEVE_REFLECTOR)
    health_port = _free_tcp_port()
    # The "load balancer" is 127.0.0.2; the appliance listens on 127.0.0.1 only.
    process = subprocess.Popen([sys.executable, str(script), str(health_port), "127.0.0.1"])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", health_port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the health-check port never answered"
                time.sleep(0.1)
        with (
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gwlb_in,
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gwlb_out,
        ):
            gwlb_in.bind(("127.0.0.2", GENEVE_PORT))
            gwlb_in.settimeout(5)
            gwlb_out.bind(("127.0.0.2", 0))
            datagram = bytes([0x01, 0, 0x08, 0, 0, 0, 0, 0]) + b"\x01\x08\x01\x02flow" + b"\x45" + bytes(1200)
            gwlb_out.sendto(b"\x80not geneve", ("127.0.0.1", GENEVE_PORT))
            gwlb_out.sendto(datagram, ("127.0.0.1", GENEVE_PORT))
            received, (peer, peer_port) = gwlb_in.recvfrom(65535)
            assert received == datagram  # the non-GENEVE datagram was dropped, not returned
            assert (peer, peer_port) == ("127.0.0.1", gwlb_out.getsockname()[1])
    finally:
        process.terminate()
        process.wait(timeout=10)
