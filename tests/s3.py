"""A real S3-compatible server on a loopback port (moto's server mode) and the app's storage pointed at it
through the settings' own S3 configuration (STORAGE_BACKEND=s3 and the S3_* variables)."""

import logging
import socket
import uuid

CREDENTIALS = {"S3_ACCESS_KEY_ID": "verdict-test", "S3_SECRET_ACCESS_KEY": "verdict-test-secret", "S3_REGION": "us-east-1"}


def start_server():
    """moto's server mode in a thread of this process, on a free loopback port; returns it and its URL."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_bucket(endpoint: str) -> "Bucket":
    client = s3_client(endpoint)
    name = f"verdict-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return Bucket(client, name)


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name=CREDENTIALS["S3_REGION"],
                        aws_access_key_id=CREDENTIALS["S3_ACCESS_KEY_ID"],
                        aws_secret_access_key=CREDENTIALS["S3_SECRET_ACCESS_KEY"])


def s3_settings(monkeypatch, endpoint: str, bucket: str, **extra: str) -> dict:
    """STORAGES["default"] as config/settings.py makes it from these variables."""
    from config.settings import _default_storage

    for name, value in {**CREDENTIALS, "S3_BUCKET": bucket, "S3_ENDPOINT_URL": endpoint, "S3_ADDRESSING_STYLE": "path",
                        "S3_PART_SIZE_MB": "5", **extra}.items():
        monkeypatch.setenv(name, value)
    return _default_storage("s3")


class Bucket:
    def __init__(self, client, name: str):
        self.client, self.name = client, name

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def head(self, key: str) -> dict:
        return self.client.head_object(Bucket=self.name, Key=key)
