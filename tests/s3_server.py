"""A local S3-compatible server for tests (moto's), on the loopback address only."""

from __future__ import annotations

import logging


def start_s3(server_module) -> tuple[str, object]:
    """(endpoint URL, stop) of a moto server on 127.0.0.1 at a free port; its request log is
    kept quiet."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", server.stop
