"""A local S3-compatible server for tests (moto's), on the loopback address only."""

from __future__ import annotations

import logging


def start_s3(server_module) -> tuple[str, object]:
    """(endpoint URL, stop) of a moto server on 127.0.0.1 at a free port, starting empty (moto
    keeps its buckets in the process, shared by every server a test session starts); its
    request log is kept quiet."""
    import urllib.request

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"),
                           timeout=30).close()
    return endpoint, server.stop
