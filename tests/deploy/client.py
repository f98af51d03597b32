"""A browser's share of HTTP for the deploy tests, which talk to real servers: the site's Host, the cookies a browser
keeps (with their Secure and HttpOnly flags), forms posted with their CSRF token, files uploaded as multipart."""

import http.client
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPMessage
from http.cookies import SimpleCookie
from urllib.parse import urlencode


@dataclass
class Reply:
    status: int
    headers: HTTPMessage
    text: str
    sent: dict[str, str]  # the request's headers

    def json(self):
        return json.loads(self.text)


class SiteClient:
    """`connect` opens a connection to the server in front (gunicorn, or a proxy); `headers` adds the headers every
    request of this client carries."""

    def __init__(self, host: str, connect: Callable[[], http.client.HTTPConnection],
                 headers: Callable[[], dict[str, str]] = dict, scheme: str = "https"):
        self.host, self.connect, self.headers, self.scheme = host, connect, headers, scheme
        self.cookies: dict[str, str] = {}
        self.flags: dict[str, set[str]] = {}

    def request(self, method: str, path: str, form: dict | None = None, files: dict[str, tuple[str, bytes]] | None = None,
                data: dict | None = None, headers: dict[str, str] | None = None) -> Reply:
        """`form` (and `files`) as a browser posts them; `data` as a JSON body."""
        sent = {"Host": self.host, **self.headers(), **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = None
        if form is not None:
            fields = {**form, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")}
            body, sent["Content-Type"] = multipart(fields, files) if files else (urlencode(fields).encode(),
                                                                                   "application/x-www-form-urlencoded")
            sent["Origin"] = f"{self.scheme}://{self.host}"
        elif data is not None:
            body, sent["Content-Type"] = json.dumps(data).encode(), "application/json"
        connection = self.connect()
        connection.request(method, path, body, sent)
        response = connection.getresponse()
        reply = Reply(response.status, response.headers, response.read().decode(), sent)
        connection.close()
        for header in reply.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
                self.flags[name] = {flag for flag in ("secure", "httponly") if morsel[flag]}
        return reply

    def get(self, path: str, **headers: str) -> Reply:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, form: dict, files: dict[str, tuple[str, bytes]] | None = None) -> Reply:
        return self.request("POST", path, form, files)

    def log_in(self, username: str, password: str) -> None:
        self.get("/accounts/login/")
        answer = self.post("/accounts/login/", {"username": username, "password": password})
        assert (answer.status, answer.headers["Location"]) == (302, "/"), answer.text[-2000:]


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    """A multipart/form-data body of text fields and files ({field: (filename, bytes)}), and its Content-Type."""
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
             for name, value in fields.items()]
    parts += [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
              f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n"
              for name, (filename, data) in files.items()]
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"
