"""Request bodies are refused from their headers, before a byte is read: anonymous ones meant for pages that
need a login, and ones over the limits. An upload over UPLOAD_MAX_BYTES is stopped as it arrives.
(tests/integration/test_upload_limits_server.py measures the same against a real gunicorn.)"""

import io

import pytest
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.test import Client
from django.urls import reverse

from config.http_limits import ANONYMOUS_BODY_MAX_BYTES, FORM_ALLOWANCE_BYTES
from judgments.models import Job, StoredRun
from tests.factory import upload

pytestmark = pytest.mark.django_db

GIB = 1 << 30
BOUNDARY = "BoUnDaRy"


class Tripwire(io.BytesIO):
    """A request body that fails the test when anything reads it."""

    def read(self, *args):
        raise AssertionError("the request body was read")

    readline = read


def visitor(user=None) -> Client:
    """A browser as an attacker's script would be: CSRF checks on (the test client skips them by default,
    and with them CsrfViewMiddleware reads the body) and a csrftoken cookie, logged in as `user` if given."""
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "a" * 32
    if user is not None:
        client.force_login(user)
    return client


def post_unread(client: Client, url: str, length: int, content_type: str = f"multipart/form-data; boundary={BOUNDARY}", **extra):
    """POST that declares `length` bytes of body, none of which may be read."""
    return client.generic("POST", url, b"", CONTENT_TYPE=content_type, CONTENT_LENGTH=str(length),
                          **{"wsgi.input": Tripwire()}, **extra)


def corpus_import(people) -> str:
    return reverse("judgments:corpus-import", args=[people.project.slug])


def test_an_anonymous_upload_is_sent_to_log_in_without_its_body_being_read(people):
    response = post_unread(visitor(), corpus_import(people), 300 * 2**20)

    assert response.status_code == 302
    assert response["Location"] == reverse("login") + "?next=" + corpus_import(people)


def test_an_anonymous_body_to_any_page_behind_the_login_is_never_read(people):
    for url in (reverse("judgments:project-create"), reverse("judgments:grade", args=[people.project.slug, "00000000-0000-0000-0000-000000000000"])):
        assert post_unread(visitor(), url, 1000, content_type="application/x-www-form-urlencoded").status_code == 302


def test_the_login_form_still_works_and_takes_only_a_small_body(people):
    from tests.factory import PASSWORD

    client = Client()
    response = client.post(reverse("login"), {"username": people.lead.username, "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("judgments:projects")).status_code == 200

    big = post_unread(visitor(), reverse("login"), ANONYMOUS_BODY_MAX_BYTES + 1)
    assert big.status_code == 413
    assert "log in first" in big.content.decode()


def test_anonymous_password_reset_forms_are_let_through(people, settings):
    settings.EMAIL_ENABLED = True
    response = Client().post(reverse("password_reset"), {"email": people.lead.email})
    assert response.status_code == 302
    assert "login" not in response["Location"]


def test_a_member_upload_over_the_limit_is_refused_from_its_length_naming_the_limit(people, settings):
    settings.UPLOAD_MAX_BYTES = GIB
    response = post_unread(visitor(people.lead), corpus_import(people), GIB + FORM_ALLOWANCE_BYTES + 1)

    assert response.status_code == 413
    page = response.content.decode()
    assert "1,025.0 MB" in page and "UPLOAD_MAX_BYTES" in page
    assert not Job.objects.exists()


def test_a_form_without_files_over_its_limit_is_refused_from_its_length(people, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    url = reverse("judgments:project-settings", args=[people.project.slug])
    response = post_unread(visitor(people.lead), url, 10_001, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.content.decode()


def test_too_much_text_beside_a_file_is_a_clear_400_not_a_500(people, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = people.client("lead").post(corpus_import(people), {"file": upload("d.jsonl", b'{"doc_id": "d1"}\n'),
                                                                    "note": "x" * 20_000})
    assert response.status_code == 400
    assert "more than 0.0 MB besides its files" in response.content.decode()


def test_a_body_without_a_length_is_refused_instead_of_read_as_empty(people):
    response = visitor(people.lead).generic("POST", corpus_import(people), b"", CONTENT_LENGTH="",
                                             HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input": Tripwire()})
    assert response.status_code == 411


def test_a_malformed_length_is_a_400(people):
    response = visitor(people.lead).generic("POST", corpus_import(people), b"", CONTENT_LENGTH="lots",
                                             **{"wsgi.input": Tripwire()})
    assert response.status_code == 400


def test_a_nul_in_the_address_is_a_400(people):
    response = people.client("lead").get(f"/p/{people.project.slug}/corpus/d/a%00b/")
    assert response.status_code == 400


class SpyingTemporaryHandler(TemporaryFileUploadHandler):
    """The handler that writes uploads to temporary files, counting what it is given."""

    largest = 0

    def receive_data_chunk(self, raw_data, start):
        SpyingTemporaryHandler.largest = max(SpyingTemporaryHandler.largest, start + len(raw_data))
        return super().receive_data_chunk(raw_data, start)


@pytest.fixture
def spied_uploads(settings, tmp_path):
    settings.FILE_UPLOAD_HANDLERS = ["config.http_limits.UploadLimitHandler", "django.core.files.uploadhandler.MemoryFileUploadHandler",
                                     f"{__name__}.SpyingTemporaryHandler"]
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    SpyingTemporaryHandler.largest = 0
    return SpyingTemporaryHandler


def test_an_upload_passing_the_limit_is_stopped_there_and_its_form_says_why(people, settings, spied_uploads):
    settings.UPLOAD_MAX_BYTES = 300_000
    run = b"q1 Q0 d1 1 2.0 x\n" * 20_000  # 340,000 bytes: within the body allowance, over the file limit
    response = people.client("lead").post(reverse("judgments:run-upload", args=[people.project.slug]),
                                          {"name": "big", "system": "X", "file": upload("big.run", run)})

    assert response.status_code == 200
    assert "over the limit of 0 MB (UPLOAD_MAX_BYTES): the upload was stopped there" in response.content.decode()
    assert 0 < spied_uploads.largest <= settings.UPLOAD_MAX_BYTES
    assert not Job.objects.exists() and not StoredRun.objects.exists()


def test_an_upload_at_the_limit_goes_through(people, settings, spied_uploads):
    run = b"q1 Q0 d1 1 2.0 x\n" * 20_000
    settings.UPLOAD_MAX_BYTES = len(run)
    response = people.client("lead").post(reverse("judgments:run-upload", args=[people.project.slug]),
                                          {"name": "big", "system": "X", "file": upload("big.run", run)})

    assert response.status_code == 302
    assert spied_uploads.largest == len(run)
    assert Job.objects.get().params["name"] == "big"


def test_a_stopped_judgment_import_says_why_in_its_message(people, settings, spied_uploads):
    from tests.factory import make_round

    round = make_round(people.project, people.lead, [people.rater])
    settings.UPLOAD_MAX_BYTES = 100_000
    response = people.client("lead").post(reverse("judgments:round-import", args=[people.project.slug, round.uuid]),
                                          {"file": upload("q.qrels", b"q1 0 d11 1\n" * 20_000)}, follow=True)

    assert "Nothing was imported: The file is over the limit" in response.content.decode()
