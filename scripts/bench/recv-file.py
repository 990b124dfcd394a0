#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Receive one file over TCP: listen on ADDRESS (default 127.0.0.1, the
# guest's 10.0.2.2 with -netdev user; 10.0.2.2 itself inside make profile's
# tap namespace) on a free port, write the port number to PORTFILE, save
# the first connection's bytes to OUTFILE, exit. Gives up after TIMEOUT s.
#
#   recv-file.py PORTFILE OUTFILE TIMEOUT-SECONDS [ADDRESS]
import socket
import sys


def main():
    portfile, out, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    addr = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind((addr, 0))
    srv.listen(1)
    srv.settimeout(timeout)
    with open(portfile, "w") as f:
        f.write(f"{srv.getsockname()[1]}\n")
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        sys.exit(f"recv-file: nothing arrived within {timeout:.0f} s")
    conn.settimeout(timeout)
    n = 0
    with open(out, "wb") as f:
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            f.write(chunk)
            n += len(chunk)
    print(f"recv-file: {n} bytes into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
