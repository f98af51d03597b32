"""Outbound calls to what a lead types, attacked: internal addresses in every spelling, DNS rebinding, servers
that drip or stay silent, a stop from another thread. Real sockets on loopback; no database."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from judgments.lib import outbound
from judgments.lib.outbound import Connection, DeadlineExceeded, Policy, Refused, Stopped, check_url
from tests.drip import DripServer

INTERNAL = [
    "http://10.0.0.1/v1", "http://172.16.5.4/v1", "http://192.168.1.1/v1", "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/v1", "http://127.0.0.1:6379", "http://0x7f000001/", "http://2130706433/", "http://127.1/",
    "http://017700000001/", "http://0/", "http://0.0.0.0/", "http://localhost:8000/v1", "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://[fe80::1]/",
    "http://[fd00::1]/", "http://224.0.0.1/", "http://[ff02::1]/", "http://100.64.0.1/", "http://240.0.0.1/",
    "http://255.255.255.255/",
]
LOOPBACK = Policy.of(networks=["127.0.0.0/8"])


@pytest.mark.parametrize("url", INTERNAL)
def test_every_spelling_of_an_internal_address_is_refused(url):
    with pytest.raises(Refused, match="address; Verdict calls public addresses only"):
        check_url(url, Policy())


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO",
                                 "http://user:pw@example.com/", "http:///nohost", "http://example.com:99999/"])
def test_only_http_and_https_urls_without_credentials_are_accepted(url):
    with pytest.raises(Refused):
        check_url(url, Policy())


def test_a_public_address_and_a_name_that_does_not_resolve_now_pass_the_forms_check():
    check_url("https://93.184.216.34/v1", Policy())
    check_url("https://api.openai.invalid/v1", Policy())  # checked again, and refused, when it is called


def test_the_operator_allows_named_hosts_ports_and_networks():
    check_url("http://localhost:11434/v1", Policy.of(hosts=["localhost"]))
    check_url("http://localhost:11434/v1", Policy.of(hosts=["LOCALHOST:11434"]))
    with pytest.raises(Refused):
        check_url("http://localhost:6379/", Policy.of(hosts=["localhost:11434"]))
    check_url("http://10.0.5.7:8000/v1", Policy.of(networks=["10.0.5.0/24"]))
    check_url("http://[::ffff:10.0.5.7]:8000/v1", Policy.of(networks=["10.0.5.0/24"]))
    with pytest.raises(Refused):
        check_url("http://10.0.6.7:8000/v1", Policy.of(networks=["10.0.5.0/24"]))


@pytest.mark.parametrize("hosts, networks", [(["http://x"], []), (["a b"], []), (["x:port"], []), ([], ["10.0.0.300/8"]),
                                             ([], ["intranet"])])
def test_a_malformed_allowance_is_an_error_naming_it(hosts, networks):
    with pytest.raises(ValueError, match="is not a"):
        Policy.of(hosts, networks)


class Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def do_GET(self):
        if self.path == "/elsewhere":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hello():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(hello, monkeypatch):
    """DNS rebinding: the second answer (an internal address) is never asked for or used."""
    answers = [[(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", hello))],
               [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.9.9.9", hello))]]
    asked = []
    monkeypatch.setattr(outbound.socket, "getaddrinfo", lambda host, *a, **k: asked.append(host) or answers[len(asked) - 1])
    connection = Connection(f"http://rebind.test:{hello}/", LOOPBACK, timeout=5)
    for _ in range(3):
        assert connection.request("GET", "/", deadline=5, max_bytes=1000).body == b'{"ok": true}'
    assert asked == ["rebind.test"]  # one lookup for the kept-alive connection


def test_a_name_with_one_internal_address_among_public_ones_is_refused(monkeypatch):
    monkeypatch.setattr(outbound.socket, "getaddrinfo", lambda *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))])
    with pytest.raises(Refused, match=r"two-faced.test \(169.254.169.254\) is a link-local address"):
        Connection("http://two-faced.test/", Policy(), timeout=5).request("GET", "/", deadline=5, max_bytes=10)


def test_a_loopback_url_is_refused_at_call_time_too(hello):
    with pytest.raises(Refused, match="loopback"):
        Connection(f"http://127.0.0.1:{hello}/", Policy(), timeout=5).request("GET", "/", deadline=5, max_bytes=10)


def test_a_redirect_is_answered_as_it_is_never_followed(hello):
    answer = Connection(f"http://127.0.0.1:{hello}/", LOOPBACK, timeout=5).request("GET", "/elsewhere", deadline=5,
                                                                                  max_bytes=1000)
    assert answer.status == 302


def test_an_answer_longer_than_the_limit_is_cut_and_flagged(hello):
    answer = Connection(f"http://127.0.0.1:{hello}/", LOOPBACK, timeout=5).request("GET", "/", deadline=5, max_bytes=5)
    assert answer.too_large and answer.body == b'{"ok"'


@pytest.mark.parametrize("mode", ["drip", "silent"])
def test_a_server_that_drips_or_stays_silent_is_cut_off_at_the_total_deadline(mode):
    with DripServer(mode, interval=0.1) as server:
        connection = Connection(server.url, LOOPBACK, timeout=30)  # each read alone would wait 30 s
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="within 1 s"):
            connection.request("POST", "/v1/chat/completions", body=b"{}", deadline=1.0, max_bytes=1 << 20)
        took = time.monotonic() - started
        _wait_for(lambda: server.closed_after)
    assert 1.0 <= took < 1.6
    assert server.closed_after[0] < 1.7  # the socket is closed, not left to the server


def test_abort_stops_a_request_in_flight_from_another_thread_at_once():
    with DripServer("drip", interval=0.1) as server:
        connection = Connection(server.url, LOOPBACK, timeout=30)
        threading.Timer(0.5, connection.abort).start()
        started = time.monotonic()
        with pytest.raises(Stopped):
            connection.request("GET", "/", deadline=60, max_bytes=1 << 20)
        assert time.monotonic() - started < 1.0
        with pytest.raises(Stopped):  # and every later one
            connection.request("GET", "/", deadline=60, max_bytes=1 << 20)


def test_a_deadline_that_fires_after_the_answer_leaves_the_kept_connection_alone(hello):
    connection = Connection(f"http://127.0.0.1:{hello}/", LOOPBACK, timeout=5)
    connection.request("GET", "/", deadline=0.3, max_bytes=100)
    time.sleep(0.5)  # the first request's timer would have fired by now
    assert connection.request("GET", "/", deadline=5, max_bytes=100).status == 200


def _wait_for(condition, seconds: float = 3.0) -> None:
    ends = time.monotonic() + seconds
    while not condition() and time.monotonic() < ends:
        time.sleep(0.02)
