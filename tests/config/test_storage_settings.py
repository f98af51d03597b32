"""STORAGE_BACKEND and the S3_* settings: parsed strictly at start-up, as every setting is."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
S3 = {"STORAGE_BACKEND": "s3", "S3_BUCKET": "verdict-files"}


def storage(**env: str) -> subprocess.CompletedProcess:
    """STORAGES["default"] as the settings make it in a fresh process with `env` (and DEBUG on)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "STORAGE_BACKEND", "AWS_"))}
    script = ("import json, config.settings as s; d = s.STORAGES['default']; o = d.get('OPTIONS', {});"
              "t = o.pop('transfer_config', None); c = o.pop('client_config', None);"
              "print(json.dumps({'backend': d['BACKEND'], **o, 'part': t and t.multipart_chunksize,"
              " 'threshold': t and t.multipart_threshold, 'style': c and c.s3['addressing_style']}))")
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**clean, "DEBUG": "true", **env},
                          capture_output=True, text=True, timeout=60)


def loaded(**env: str) -> dict:
    result = storage(**env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_default_is_the_file_system():
    assert loaded()["backend"] == "django.core.files.storage.FileSystemStorage"
    assert loaded(STORAGE_BACKEND="filesystem")["backend"] == "django.core.files.storage.FileSystemStorage"


def test_a_dotted_storage_class_path_still_works():
    assert loaded(STORAGE_BACKEND="django.core.files.storage.InMemoryStorage")["backend"] == "django.core.files.storage.InMemoryStorage"


def test_s3_takes_every_setting_from_the_environment():
    options = loaded(**S3, S3_ENDPOINT_URL="http://minio:9000", S3_REGION="eu-west-1", S3_ACCESS_KEY_ID="key",
                     S3_SECRET_ACCESS_KEY="secret", S3_PREFIX="/verdict/", S3_ADDRESSING_STYLE="path", S3_PART_SIZE_MB="16")
    assert options["backend"] == "storages.backends.s3.S3Storage"
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"]) == ("verdict-files", "http://minio:9000", "eu-west-1")
    assert (options["access_key"], options["secret_key"], options["location"]) == ("key", "secret", "verdict")
    assert options["addressing_style"] == options["style"] == "path"
    assert options["part"] == options["threshold"] == 16 << 20
    assert options["file_overwrite"] is False


def test_s3_without_credentials_leaves_them_to_boto3():
    options = loaded(**S3)
    assert options["access_key"] is None and options["secret_key"] is None and options["endpoint_url"] is None
    assert options["part"] == 8 << 20 and options["addressing_style"] == "auto"


@pytest.mark.parametrize("env,message", [
    ({"STORAGE_BACKEND": "s3"}, "STORAGE_BACKEND=s3 needs S3_BUCKET"),
    ({"STORAGE_BACKEND": "S3Storage"}, "STORAGE_BACKEND='S3Storage': use filesystem, s3 or the dotted path"),
    ({**S3, "S3_ENDPOINT_URL": "minio:9000"}, "S3_ENDPOINT_URL='minio:9000' must start with http:// or https://"),
    ({**S3, "S3_ACCESS_KEY_ID": "key"}, "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together"),
    ({**S3, "S3_ADDRESSING_STYLE": "dns"}, "S3_ADDRESSING_STYLE='dns': use auto, path or virtual"),
    ({**S3, "S3_PART_SIZE_MB": "4"}, "S3_PART_SIZE_MB=4 must be at least 5"),
])
def test_a_bad_storage_setting_stops_start_up_naming_it(env, message):
    result = storage(**env)
    assert result.returncode != 0 and message in result.stderr, result.stderr
