"""The software of a pass-through inspection appliance: a GENEVE reflector for Amazon Linux 2023,
installed as a systemd service by the user data of :class:`gpufarm.constructs.TrafficInspection`'s
launch template when no vendor AMI is given. See docs/decisions/0022-gwlb-inspection.md.
"""

from __future__ import annotations

REFLECTOR_PATH = "/usr/local/sbin/gwlb-geneve-reflector"
REFLECTOR_SERVICE = "gwlb-geneve-reflector.service"

# A pass-through appliance for Amazon Linux 2023 (python3 3.9, standard library only). Each
# GENEVE datagram goes back to the load balancer unchanged, with the outer IP addresses swapped
# and both UDP ports kept: what the load balancer expects of an appliance that lets a packet
# through (the same rewrite as the iptables "hairpin" of AWS's GWLB samples, without having to
# look up the load balancer's addresses). One worker per vCPU shares the port (SO_REUSEPORT);
# the health-check port answers while every worker runs.
GENEVE_REFLECTOR = r'''#!/usr/bin/python3
"""Return every GENEVE packet to the Gateway Load Balancer that sent it (a pass-through appliance).

Usage: gwlb-geneve-reflector HEALTH_PORT [BIND_ADDRESS]
"""
import os
import signal
import socket
import struct
import sys
import threading

GENEVE_PORT = 6081
IP_PKTINFO = 8  # <netinet/in.h> on Linux; Python 3.9's socket module does not export it
PKTINFO_BYTES = 12  # struct in_pktinfo: ifindex, spec_dst, addr (the header's destination)
BUFFER_BYTES = 65535
RECEIVE_BUFFER_BYTES = 8 << 20


def is_geneve(datagram):
    """True for a GENEVE version 0 header whose options fit in the datagram."""
    if len(datagram) < 8 or datagram[0] >> 6:
        return False
    return len(datagram) >= 8 + (datagram[0] & 0x3F) * 4


def checksum(data):
    """RFC 768 checksum of data (pseudo-header and segment); 0xFFFF stands for a zero sum."""
    if len(data) % 2:
        data += b"\0"
    return 0xFFFF - int.from_bytes(data, "big") % 0xFFFF


def reflection(datagram, gwlb_ip, gwlb_port, local_ip):
    """The IPv4 packet that returns datagram to the load balancer: addresses swapped, ports kept."""
    length = 8 + len(datagram)
    header = struct.pack("!HHH", gwlb_port, GENEVE_PORT, length)
    pseudo = local_ip + gwlb_ip + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length)
    udp_checksum = checksum(pseudo + header + b"\0\0" + datagram)
    # The kernel fills in the IP checksum, the total length and the packet ID.
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 0, 0, 0x4000, 64, socket.IPPROTO_UDP, 0, local_ip, gwlb_ip)
    return ip + header + struct.pack("!H", udp_checksum) + datagram


def destination_of(ancillary):
    for level, kind, data in ancillary:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(data) >= PKTINFO_BYTES:
            return bytes(data[8:12])
    return None


def serve(bind_address):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    receiver.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    receiver.bind((bind_address, GENEVE_PORT))
    sender = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    ancillary_bytes = socket.CMSG_SPACE(PKTINFO_BYTES)
    while True:
        datagram, ancillary, _flags, (gwlb, gwlb_port) = receiver.recvmsg(BUFFER_BYTES, ancillary_bytes)
        local_ip = destination_of(ancillary)
        if local_ip is None or not is_geneve(datagram):
            continue
        try:
            sender.sendto(reflection(datagram, socket.inet_aton(gwlb), gwlb_port, local_ip), (gwlb, 0))
        except OSError:
            pass  # a full send queue or an unreachable peer loses this packet only


def answer_health_checks(listener):
    while True:
        connection, _peer = listener.accept()
        connection.close()


def main(argv):
    health_port = int(argv[1])
    bind_address = argv[2] if len(argv) > 2 else "0.0.0.0"
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((bind_address, health_port))
    listener.listen(128)
    workers = []
    for _ in range(os.cpu_count() or 1):
        pid = os.fork()
        if pid == 0:
            listener.close()
            try:
                serve(bind_address)
            finally:
                os._exit(1)
        workers.append(pid)

    def stop(*_args):
        for pid in workers:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=answer_health_checks, args=(listener,), daemon=True).start()
    # A worker that dies takes the whole service down: health checks fail until systemd has
    # restarted every worker, so the load balancer never sends flows to a half-working appliance.
    os.wait()
    stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''


def appliance_user_data(health_check_port: int) -> str:
    """The user data that makes Amazon Linux 2023 a pass-through GENEVE appliance.

    It installs :data:`GENEVE_REFLECTOR` as a systemd service (restarted on failure, started at
    boot) answering health checks on TCP `health_check_port`, and raises the socket receive
    buffer limit so bursts queue instead of dropping.
    """
    return "\n".join(
        [
            "#!/bin/bash",
            "set -euo pipefail",
            f"cat > {REFLECTOR_PATH} <<'REFLECTOR'",
            GENEVE_REFLECTOR.rstrip("\n"),
            "REFLECTOR",
            f"chmod 0755 {REFLECTOR_PATH}",
            "cat > /etc/sysctl.d/90-gwlb-geneve.conf <<'SYSCTL'",
            "net.core.rmem_max = 16777216",
            "SYSCTL",
            "sysctl --load /etc/sysctl.d/90-gwlb-geneve.conf",
            f"cat > /etc/systemd/system/{REFLECTOR_SERVICE} <<'UNIT'",
            "[Unit]",
            "Description=Return GENEVE packets to the Gateway Load Balancer (pass-through appliance)",
            "After=network-online.target",
            "Wants=network-online.target",
            "[Service]",
            f"ExecStart=/usr/bin/python3 {REFLECTOR_PATH} {health_check_port}",
            "Restart=always",
            "RestartSec=2",
            "[Install]",
            "WantedBy=multi-user.target",
            "UNIT",
            "systemctl daemon-reload",
            f"systemctl enable --now {REFLECTOR_SERVICE}",
            "",
        ]
    )
