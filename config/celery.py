import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("verdict")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _create_filesystem_broker_folders(sender: Celery, source, **kwargs) -> None:
    # Kombu's filesystem transport expects its folders to exist.
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        folder = (source.get("broker_transport_options") or {}).get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
