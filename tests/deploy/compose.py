"""What `docker compose` and `docker build` make of docker-compose.yml, .env and the Dockerfile, reproduced
without a Docker engine (none runs on the project's machines): compose's variable interpolation, its env
files, a service's environment and commands, and the Dockerfile's instructions."""

import json
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

import yaml

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ComposeError(ValueError):
    """What docker compose would refuse, with its reason."""


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's interpolation: `$$` is a `$`; `$NAME` and `${NAME}` the value (empty when unset);
    `${NAME:-default}` the default when unset or empty, `${NAME-default}` when unset; `${NAME:?message}`
    and `${NAME?message}` an error; `${NAME:+other}` and `${NAME+other}` `other` when set. Defaults and
    messages are interpolated too."""
    out, i = [], 0
    while i < len(text):
        start = text.find("$", i)
        if start < 0:
            out.append(text[i:])
            break
        out.append(text[i:start])
        following = text[start + 1:start + 2]
        if following == "$":
            out.append("$")
            i = start + 2
        elif following == "{":
            end = _closing_brace(text, start + 1)
            out.append(_expand(text[start + 2:end], variables))
            i = end + 1
        elif name := NAME.match(text, start + 1):
            out.append(variables.get(name.group(), ""))
            i = name.end()
        else:
            raise ComposeError(f"invalid interpolation format in {text!r}: a lone '$' (write '$$')")
    return "".join(out)


def _closing_brace(text: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(text)):
        if text[i] == "{" and text[i - 1] == "$":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ComposeError(f"invalid interpolation format in {text!r}: '${{' is never closed")


def _expand(inner: str, variables: Mapping[str, str]) -> str:
    match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", inner, re.DOTALL)
    if not match:
        raise ComposeError(f"invalid interpolation format: ${{{inner}}}")
    name, operator, argument = match.groups()
    value = variables.get(name)
    if operator is None:
        return value or ""
    present = value is not None and (value != "" or not operator.startswith(":"))
    if operator.endswith("-"):
        return value if present else interpolate(argument, variables)
    if operator.endswith("+"):
        return interpolate(argument, variables) if present else ""
    if not present:
        raise ComposeError(f"required variable {name} is missing a value: {interpolate(argument, variables)}")
    return value


def read_env_file(path: Path, variables: Mapping[str, str] | None = None) -> dict[str, str]:
    """An env file as compose reads it: NAME=value lines, blank lines and `#` comment lines. An unquoted value
    loses a ` #` comment and the blanks around it; "double-quoted" values know \\n, \\t, \\" and \\\\ escapes;
    both are interpolated with the lines above and `variables`. 'Single-quoted' values are taken literally."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)", line)
        if not match:
            raise ComposeError(f"{path}:{number}: expected NAME=value, found {line[:80]!r}")
        name, raw = match.groups()
        values[name] = _env_value(raw, {**(variables or {}), **values}, f"{path}:{number}")
    return values


def _env_value(raw: str, variables: Mapping[str, str], where: str) -> str:
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        end = re.match(r"'[^']*'" if quote == "'" else r'"(?:[^"\\]|\\.)*"', raw)
        if not end or raw[end.end():].strip()[:1] not in ("", "#"):
            raise ComposeError(f"{where}: unterminated or trailing text after the quoted value {raw[:80]!r}")
        text = end.group()[1:-1]
        if quote == "'":
            return text
        escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
        text = re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), "\\" + m.group(1)), text)
        return interpolate(text, variables)
    return interpolate(re.split(r"\s+#", raw, maxsplit=1)[0].strip(), variables)


def load_compose(path: Path, variables: Mapping[str, str]) -> dict:
    """docker-compose.yml with every string interpolated, as compose does before anything else."""

    def walk(node):
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(value) for value in node]
        return interpolate(node, variables) if isinstance(node, str) else node

    return walk(yaml.safe_load(path.read_text()))


def service_environment(compose: dict, service: str, image_env: Mapping[str, str], project_dir: Path,
                        variables: Mapping[str, str]) -> dict[str, str]:
    """The environment the service's container starts with: the image's ENV, overridden by its env_file(s),
    overridden by its `environment:`."""
    spec = compose["services"][service]
    env = dict(image_env)
    env_files = spec.get("env_file", [])
    for name in [env_files] if isinstance(env_files, str) else env_files:
        env.update(read_env_file(project_dir / name, variables))
    environment = spec.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    env.update({key: "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in environment.items()})
    return env


def command_argv(command: str | list[str]) -> list[str]:
    """A service's `command:`: a list as is, a string split like a shell would (compose runs no shell)."""
    return list(command) if isinstance(command, list) else shlex.split(command)


def healthcheck_argv(test: list[str]) -> list[str]:
    """A health check's `test:` as the command the engine runs."""
    kind, *rest = test
    if kind == "CMD":
        return rest
    if kind == "CMD-SHELL":
        return ["sh", "-c", " ".join(rest)]
    raise ComposeError(f"unsupported health check {test!r}")


@dataclass
class Dockerfile:
    base: str = ""
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    runs: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def read_dockerfile(path: Path) -> Dockerfile:
    """The instructions of a single-stage Dockerfile that tell what the image holds and how it starts."""
    text = re.sub(r"\\\n", " ", re.sub(r"^\s*#.*\n", "", path.read_text(), flags=re.MULTILINE))
    image = Dockerfile()
    for line in filter(None, (line.strip() for line in text.splitlines())):
        instruction, _, argument = line.partition(" ")
        instruction, argument = instruction.upper(), argument.strip()
        if instruction == "FROM":
            image.base = argument
        elif instruction == "ENV":
            words = shlex.split(argument)
            pairs = [word.split("=", 1) for word in words] if "=" in words[0] else [[words[0], " ".join(words[1:])]]
            image.env.update({name: interpolate(value, image.env) for name, value in pairs})
        elif instruction == "WORKDIR":
            image.workdir = argument
        elif instruction == "RUN":
            image.runs.append(argument)
        elif instruction == "CMD":
            image.cmd = json.loads(argument)
    return image


def copy_build_context(source: Path, target: Path) -> None:
    """`COPY . .`: the build context without what .dockerignore excludes (top-level patterns and `**/name`)."""
    ignore_file = source / ".dockerignore"
    patterns = [line.strip() for line in ignore_file.read_text().splitlines() if line.strip() and not line.startswith("#")]

    def ignored(folder: str, names: list[str]) -> set[str]:
        relative = Path(folder).relative_to(source)
        return {name for name in names for pattern in patterns
                if fnmatch((relative / name).as_posix(), pattern)
                or (pattern.startswith("**/") and fnmatch(name, pattern[3:]))}

    shutil.copytree(source, target, ignore=ignored, symlinks=True)
