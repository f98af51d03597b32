"""Outbound HTTP to addresses a lead types (an LLM endpoint's base URL, a health webhook). No Django.

A lead is not the server's administrator: what they type must not reach the server's own network, and a slow
or silent server must not hold a worker. So every call made here:

- goes to an http:// or https:// URL with no user or password in it, and follows no redirect;
- resolves the host once and refuses it when any of its addresses is loopback, private, link-local, multicast,
  reserved or otherwise not a public address, however it is spelt (``0x7f000001``, ``2130706433``, ``127.1``,
  ``[::ffff:127.0.0.1]``), unless the operator's `Policy` allows the host or its network (an on-premises
  vLLM, say); then it connects to the address it checked, so a second lookup (DNS rebinding) cannot switch it;
- ends by a total deadline: resolving, connecting, the TLS handshake, sending and every read of the answer
  together. A timer shuts the socket when the deadline passes, so a server dripping a byte a second cannot
  stretch it; `Connection.abort` does the same at once from another thread (a cancelled job).
"""

from __future__ import annotations

import errno
import functools
import http.client
import ipaddress
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
NAT64 = ipaddress.ip_network("64:ff9b::/96")
POLL = 0.2  # seconds between looks at a stop or a deadline while waiting on a resolver or a connect
SETTINGS_HINT = "the server's operator can allow it (OUTBOUND_ALLOWED_HOSTS or OUTBOUND_ALLOWED_NETWORKS)"


class Refused(ValueError):
    """A URL or an address Verdict will not call; the message says why in words a lead can act on."""


class DeadlineExceeded(TimeoutError):
    """The call did not end within its total deadline."""


class Stopped(ConnectionAbortedError):
    """The call was stopped from another thread (`Connection.abort`)."""


# ------------------------------------------------------------------------------------------- addresses


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), which is where a packet to it ends up."""
    if ip.version == 4:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_kind(ip: IPAddress) -> str | None:
    """What makes `ip` internal ("loopback", "private", ...), or None for a public unicast address."""
    inner = _embedded_ipv4(ip)
    if inner is not None:
        return address_kind(inner)
    for kind in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved", "site_local"):
        if getattr(ip, f"is_{kind}", False):
            return kind.replace("_", "-")
    return None if ip.is_global else "non-public"


def _normalised(ip: IPAddress) -> IPAddress:
    return _embedded_ipv4(ip) or ip


@dataclass(frozen=True)
class Policy:
    """What the operator allows beyond public addresses: host names (``name`` or ``name:port``), whatever they
    resolve to, and networks. The default allows public addresses only."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, hosts: Iterable[str] = (), networks: Iterable[str] = ()) -> Policy:
        """From the operator's lists; ValueError naming an entry that is not a host name or a network."""
        names = set()
        for entry in hosts:
            name, colon, port = entry.strip().lower().partition(":")
            name = name.rstrip(".")
            if not name or any(c in name for c in "/[]@ ") or (colon and not port.isdigit()):
                raise ValueError(f"{entry!r} is not a host name or name:port")
            names.add(f"{name}:{int(port)}" if colon else name)
        parsed = []
        for entry in networks:
            try:
                parsed.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is not a network such as 10.0.5.0/24 or fd00::/8") from None
        return cls(frozenset(names), tuple(parsed))

    def allows_host(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or f"{host}:{port}" in self.hosts

    def check_address(self, ip: IPAddress, host: str, port: int) -> None:
        """Refused unless `ip` is public, in an allowed network, or `host` is an allowed name."""
        kind = address_kind(ip)
        if kind is None or self.allows_host(host, port) or any(_normalised(ip) in net for net in self.networks):
            return
        shown = host if host == str(ip) else f"{host} ({ip})"
        raise Refused(f"{shown} is a {kind} address; Verdict calls public addresses only, unless {SETTINGS_HINT}")


def split_url(url: str) -> SplitResult:
    """The parts of an http(s) URL with a host and no user or password; Refused otherwise."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port out of range raises here)
    except ValueError:
        raise Refused("must be a URL such as https://api.example.com/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused("must be an http:// or https:// URL such as https://api.example.com/v1")
    if parts.username is not None or parts.password is not None:
        raise Refused("must hold no user or password (a key or secret goes in its own field)")
    return parts


def default_port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def resolve(host: str, port: int, policy: Policy, *, timeout: float,
            stopped: Callable[[], bool] = lambda: False) -> list[tuple]:
    """Every address of `host` as getaddrinfo gives them, each checked against `policy`: one refused address
    refuses the host (a name resolving to both a public and an internal address is not to be trusted).
    TimeoutError when the resolver does not answer within `timeout` seconds; Stopped once `stopped()`."""
    answer: list = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP))
        except (OSError, UnicodeError) as error:
            answer.append(error)

    # getaddrinfo takes no timeout: it runs in a thread of its own, left to the resolver's own limits if it hangs.
    thread = threading.Thread(target=lookup, daemon=True, name="outbound-resolve")
    thread.start()
    ends_at = time.monotonic() + timeout
    while not answer and time.monotonic() < ends_at and not stopped():
        thread.join(min(POLL, max(0.0, ends_at - time.monotonic())))
    if not answer:
        if stopped():
            raise Stopped("stopped")
        raise TimeoutError(f"{host} did not resolve within {timeout:g} s")
    if isinstance(answer[0], Exception):
        raise answer[0]
    found = answer[0]
    for _family, _type, _proto, _name, sockaddr in found:
        policy.check_address(ipaddress.ip_address(sockaddr[0].split("%")[0]), host, port)
    return found


def check_url(url: str, policy: Policy, *, timeout: float = 3.0) -> None:
    """For a form: Refused when `url` is not one Verdict may call. A name that does not resolve now is let
    through (it is checked again, and refused then, on every call)."""
    parts = split_url(url)
    try:
        resolve(parts.hostname, default_port(parts), policy, timeout=timeout)
    except (OSError, UnicodeError):
        pass


# ------------------------------------------------------------------------------------------- calls


@dataclass(frozen=True)
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    too_large: bool = False  # the body was cut at max_bytes


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()  # loading the CA bundle takes milliseconds: once, shared by all threads


class _CheckedHTTPConnection(http.client.HTTPConnection):
    """http.client's connection, connecting through its owner (resolve, check, connect to that address)."""

    def __init__(self, owner: Connection):
        super().__init__(owner.host, owner.port, timeout=owner.timeout)
        self.owner = owner
        self.default_port = 443 if owner.https else 80  # the Host header leaves the scheme's own port out

    def connect(self) -> None:
        self.sock = self.owner._open_socket()


class Connection:
    """A keep-alive HTTP/1.1 connection to the host of `url`, used by one thread at a time; `abort` may be
    called from any thread. `timeout` bounds each wait (connecting, each read); `request`'s deadline the whole."""

    def __init__(self, url: str, policy: Policy, *, timeout: float):
        parts = split_url(url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, default_port(parts)
        self.policy, self.timeout = policy, timeout
        self._http: _CheckedHTTPConnection | None = None
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._ends_at = float("inf")
        self._call = 0  # which request a deadline timer belongs to
        self._expired = self._stopped = False

    def _remaining(self) -> float:
        left = self._ends_at - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("the deadline passed")
        return left

    def _open_socket(self) -> socket.socket:
        found = resolve(self.host, self.port, self.policy, timeout=min(self.timeout, self._remaining()),
                        stopped=self._interrupted)
        problem: OSError | None = None
        for family, kind, proto, _name, sockaddr in found:
            sock = socket.socket(family, kind, proto)
            with self._lock:
                self._socket = sock
            try:
                self._connect(sock, sockaddr)
                sock.settimeout(self.timeout)
                if self.https:
                    sock = _tls_context().wrap_socket(sock, server_hostname=self.host)
                    with self._lock:
                        self._socket = sock
                return sock
            except OSError as error:
                sock.close()
                problem = error
                if self._interrupted():
                    break
        raise problem or OSError(f"{self.host} has no address")

    def _interrupted(self) -> bool:
        return self._stopped or self._expired

    def _connect(self, sock: socket.socket, sockaddr: tuple) -> None:
        """connect(), waiting in short slices so that `abort` and the deadline end it too: shutting a socket
        does not wake a connect() blocked on a host that never answers."""
        sock.setblocking(False)
        error = sock.connect_ex(sockaddr)
        gives_up_at = min(time.monotonic() + self.timeout, self._ends_at)
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        while error in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            if self._stopped:
                raise Stopped("stopped")
            left = gives_up_at - time.monotonic()
            if left <= 0:
                self._remaining()  # DeadlineExceeded when it is the deadline that ran out
                raise TimeoutError(f"no connection within {self.timeout:g} s")
            if poller.poll(min(POLL, left) * 1000):
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))

    def _shut(self, call: int | None) -> None:
        """Shut the socket of request `call` (None: whichever runs), waking a thread blocked on it."""
        with self._lock:
            if call is not None and call != self._call:
                return  # that request ended already
            if call is not None:
                self._expired = True
            sock = self._socket
        if sock is not None:
            try:
                # socket.socket's own shutdown, also under TLS: SSLSocket.shutdown would unwrap under the reader.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def abort(self) -> None:
        """Stop the request in flight at once, and every later one."""
        self._stopped = True
        self._shut(None)

    def close(self) -> None:
        with self._lock:
            connection, self._http, self._socket = self._http, None, None
        if connection is not None:
            connection.close()

    def request(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
                deadline: float, max_bytes: int) -> Response:
        """One request and its answer, read up to `max_bytes`. Raises DeadlineExceeded past `deadline` seconds
        in all, Stopped after `abort`, Refused for an address the policy refuses, OSError or HTTPException when
        the connection fails (the connection is then closed; the next request opens a new one)."""
        if self._stopped:
            raise Stopped("stopped")
        with self._lock:
            self._call += 1
            call = self._call
            self._expired = False
        self._ends_at = time.monotonic() + deadline
        timer = threading.Timer(deadline, self._shut, args=(call,))
        timer.daemon = True
        timer.start()
        try:
            if self._http is None:
                self._http = _CheckedHTTPConnection(self)
            self._http.request(method, path, body=body, headers=headers or {})
            answer = self._http.getresponse()
            data = answer.read(max_bytes + 1)
            if self._stopped or self._expired:
                raise OSError("shut")  # read() ends quietly on a shut socket, with what had come
            if len(data) <= max_bytes and answer.length:
                raise http.client.IncompleteRead(data, answer.length)
            response = Response(answer.status, answer.headers, data[:max_bytes], too_large=len(data) > max_bytes)
            if answer.will_close or response.too_large:
                self.close()
            return response
        except (OSError, http.client.HTTPException) as error:
            self.close()
            if self._stopped:
                raise Stopped("stopped") from None
            if self._expired or isinstance(error, DeadlineExceeded):
                raise DeadlineExceeded(f"no complete answer within {deadline:g} s") from None
            raise
        except BaseException:
            self.close()  # http.client would refuse the next request on a connection left halfway
            raise
        finally:
            with self._lock:
                self._call += 1  # a timer firing now finds its request over
            timer.cancel()
