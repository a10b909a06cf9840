"""The container runner: the same `Command`s as the local runner, each in a fresh container
from the pinned image, the folders a stage works in bind-mounted at the same paths; made
cheaply, it contacts the engine (and checks the image) only on entry or first use."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.buildrecord import RunnerFacts
from vllm_plugin_release.core.cache import write_json
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure, PythonUnavailable
from vllm_plugin_release.edges import settings, uv
from vllm_plugin_release.edges.interpreters import Interpreter
from vllm_plugin_release.edges.runner import (
    HOST_NETWORK,
    Command,
    LocalRunner,
    Network,
    Runner,
    _tail,
    free_space_note,
)

LABEL = "vllm-plugin-release.owner"
# In an environment made by the container runner: the image and mounts it runs with.
MARKER = ".vpr-runner.json"
# Set by `vpr build-image`: the image carries uv and needs no Dockerfile layer on top.
UV_LABEL = "vllm-plugin-release.uv"
PINNED = re.compile(r"^(?P<name>[^@\s]+)@sha256:(?P<digest>[0-9a-f]{64})$")
# The Docker Engine API version asked for. Named, not "auto": auto asks /version first,
# which Podman 4 answers slowly. 1.41 is served by Docker 20.10+ and Podman 3+.
ENGINE_API = "1.41"


def connect() -> Any:
    """A docker client with a reachable engine, or exit 3 saying why."""
    try:
        from docker.errors import DockerException
        from requests.exceptions import ConnectionError as Unreachable  # docker's transport

        import docker
    except ImportError:
        raise OutsideFailure("the docker backend needs the `docker` package (pip install docker)")
    try:
        client = docker.from_env(version=ENGINE_API, timeout=600)
        client.ping()  # the reachability check (`version=` alone contacts nothing)
        return client
    except (DockerException, Unreachable) as exc:
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock (the default)"
        raise OutsideFailure(
            f"no reachable container engine at {where} for the docker backend ({exc})",
            hint="start Docker, or Podman's API: `podman system service --time=0 "
            "unix:///run/vpr-podman/podman.sock &` and DOCKER_HOST=unix:///run/vpr-podman/"
            "podman.sock (scripts/engine.sh start does it); or use [build] backend = 'local'",
        )


def split_pinned(ref: str) -> tuple[str, str]:
    """(name, digest hex) of `name@sha256:<hex>`; BadInput for anything else."""
    m = PINNED.match(ref)
    if not m:
        raise BadInput(f"[build] base_image = {ref!r} is not pinned by digest (name@sha256:...)")
    return m.group("name"), m.group("digest")


def verify_image(client: Any, ref: str) -> Any:
    """The engine's image for `ref` when its digest is the pinned one (its ID, or one of
    its registry digests); GateFailed naming both digests when it differs."""
    from docker.errors import APIError, ImageNotFound

    name, digest = split_pinned(ref)
    image = None
    for candidate in (name, ref):
        try:
            image = client.images.get(candidate)
            break
        except ImageNotFound:
            continue
    if image is None:  # pulled by digest from its registry (the engine checks it)
        with contextlib.suppress(APIError):  # unreachable, or not there
            image = client.images.pull(ref)
    if image is None:  # no image carrying the spec's Python here
        raise PythonUnavailable(
            f"image {ref} is not in the container engine",
            hint="`vpr build-image --spec SPEC` makes the Debian-based image here; "
            f"or `docker pull {ref}` where a registry is reachable",
        )
    found = [image.id.removeprefix("sha256:")]
    found += [d.split("@sha256:", 1)[1] for d in image.attrs.get("RepoDigests") or [] if "@" in d]
    if digest not in found:
        raise GateFailed(
            f"image {name}: digest sha256:{found[0]} is not the pinned sha256:{digest}",
            hint="rebuild it (`vpr build-image`) or pin the digest you trust in [build] "
            "base_image; nothing was run in it",
        )
    return image


def owner_label(pid: int | None = None) -> str:
    """The label value of a run's containers: this machine and the run's pid."""
    return f"{os.uname().nodename}:{pid or os.getpid()}"


def stale_owner(label: str) -> bool:
    """True when the run on this machine that labelled a container is gone (its pid no
    longer exists); a container of another machine's run is never taken for stale."""
    host, _, pid = label.rpartition(":")
    if host != os.uname().nodename:
        return False
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return True
    except PermissionError:
        return False
    return False


def _network_mode(network: Network) -> str | None:
    """The engine's network mode for a command's `network` (None: the engine's default)."""
    if not network:
        return "none"
    return "host" if network == HOST_NETWORK else None


def mount_roots(paths: Iterable[Path]) -> list[str]:
    """Existing folders to bind at their own path, without one that another contains."""
    roots = sorted({str(Path(p).resolve()) for p in paths if Path(p).exists()})
    kept: list[str] = []
    for root in roots:
        if not any(root == k or root.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(root)
    return kept


def _within(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or inside it."""
    return path == folder or folder in path.parents


def _remove_stale(client: Any) -> list[str]:
    """Remove containers left by a killed run (their owner pid is gone); their names."""
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if stale_owner(container.labels.get(LABEL, "")):
            container.remove(force=True)
            removed.append(container.name)
    return removed


class ContainerRunner:
    """Runs each `Command` in a fresh container from the pinned image (see module doc)."""

    kind = "docker"
    isolate = True  # a command that asks for no network always gets none

    def __init__(
        self,
        base_image: str | None,
        dockerfile: Path,
        mounts: Sequence[Path],
        uv_cache: Path | None = None,
        probes: Path | None = None,
    ) -> None:
        if not base_image:
            raise BadInput("[build] base_image is required for backend = 'docker'")
        from vllm_plugin_release.core.image import lint_file

        if not dockerfile.exists():
            raise BadInput(f"{dockerfile}: Dockerfile not found", hint="see [build] dockerfile")
        problems = lint_file(dockerfile, {"BASE_IMAGE": base_image})
        if problems:
            raise BadInput(
                f"{dockerfile}:{problems[0].line}: {problems[0].message}",
                hint="pin every base image by digest: FROM name@sha256:<digest>",
            )
        split_pinned(base_image)
        self.base_image = base_image
        self.dockerfile = dockerfile
        cert = os.environ.get("SSL_CERT_FILE")
        self.cert = cert if cert and Path(cert).is_file() else None
        self.uv_cache = str(uv_cache) if uv_cache else None
        self._interpreters: dict[str, Interpreter] = {}
        # where the image's answers to IMAGE_PROBE are kept, by image ID (None: asked
        # again by each process)
        self.probes = probes
        self._scratch_binds: dict[str, dict[str, str]] = {}  # set by `scratch_root`
        self.binds = {root: {"bind": root, "mode": "rw"} for root in mount_roots(mounts)}
        if self.cert:
            self.binds[str(Path(self.cert).resolve())] = {"bind": self.cert, "mode": "ro"}
        # (client, image ID): set by `open` (the engine's work), cleared by `close`
        self._engine: tuple[Any, str] | None = None
        self.base_id: str | None = None
        self._opening = threading.Lock()  # parallel builds share one runner

    def open(self) -> ContainerRunner:
        """The engine's work, done once until `close`: connect, remove containers a killed run
        left, check the pinned image and build the Dockerfile's layer."""
        self._opened()
        return self

    def _opened(self) -> tuple[Any, str]:
        engine = self._engine
        if engine is not None:
            return engine
        with self._opening:
            if self._engine is not None:
                return self._engine
            client = connect()
            try:
                _remove_stale(client)
                base = verify_image(client, self.base_image)
                labels = base.attrs.get("Config", {}).get("Labels") or {}
                image_id = base.id if UV_LABEL in labels else self._layer_dockerfile(client)
            except BaseException:
                client.close()
                raise
            self.base_id = base.id
            self._engine = (client, str(image_id))
            return self._engine

    def close(self) -> None:
        """Release the engine's client (idempotent); a later use opens it again."""
        with self._opening:
            engine, self._engine = self._engine, None
        self._interpreters.clear()  # asked of the image, which a reopen checks again
        if engine is not None:
            engine[0].close()

    def __enter__(self) -> ContainerRunner:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> Any:
        """The engine's client (`open`ed on first use)."""
        return self._opened()[0]

    @property
    def image_id(self) -> str:
        """The ID of the image commands run in: the pinned base, or the Dockerfile's layer
        on it (`open`ed on first use)."""
        return self._opened()[1]

    @property
    def uv(self) -> str:
        return "uv"

    @property
    def env_key(self) -> str | None:
        """What an environment made by this runner depends on (it lives in the image)."""
        return self.image_id

    def describe(self) -> RunnerFacts:
        return RunnerFacts(self.kind, self.base_image, self.image_id)

    def scratch_root(self) -> Path | None:
        """Builds' scratch in memory (`settings.build_scratch_root`), bound into every later
        container at its own path; None when unusable: then `.vpr/tmp`, inside the mounted cache."""
        root = settings.build_scratch_root()
        if root is not None and not any(_within(root, Path(b)) for b in self.binds):
            self._scratch_binds[str(root)] = {"bind": str(root), "mode": "rw"}
        return root

    def mark(self, env_dir: Path) -> None:
        """Note in an environment made here that its programs run in this image (read by
        `runner_of`, so whoever runs the environment's python later runs it here too)."""
        marker = {
            "base_image": self.base_image,
            "dockerfile": str(self.dockerfile),
            "mounts": sorted(self.binds_rw()),
            "uv_cache": self.uv_cache,
        }
        (env_dir / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")

    def binds_rw(self) -> list[str]:
        return [path for path, bind in self.binds.items() if bind["mode"] == "rw"]

    def _layer_dockerfile(self, client: Any) -> str:
        """A registry base without uv: build the spec's Dockerfile (git + pinned uv) on it."""
        from docker.errors import APIError, BuildError

        root = self.dockerfile.parent.parent
        try:
            image, _ = client.images.build(
                path=str(root),
                dockerfile=str(self.dockerfile.relative_to(root)),
                buildargs={"BASE_IMAGE": self.base_image},
                rm=True,
                pull=False,
            )
        except (BuildError, APIError) as exc:
            raise GateFailed(f"{self.dockerfile}: image build failed: {exc}")
        return str(image.id)

    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        out = dict(env)
        if self.cert:
            out.setdefault("SSL_CERT_FILE", self.cert)
        if self.uv_cache:  # HOME may not be writable in the container; keep uv's cache
            out.setdefault("UV_CACHE_DIR", self.uv_cache)
            # the cache is its own bind mount: a hard link into an environment across
            # mounts fails (EXDEV), so copy, and say so rather than warn every install
            out.setdefault("UV_LINK_MODE", "copy")
        return out

    def _binds_for(self, argv: Sequence[str | Path]) -> dict[str, dict[str, str]]:
        """The runner's binds plus the private temporary folders `argv` names (a request
        and result file of an in-env run, `--junitxml=PATH`), each at its own path."""
        binds = {**self.binds, **self._scratch_binds}
        tmp = Path(tempfile.gettempdir()).resolve()
        for arg in map(str, argv):
            path = Path(arg.split("=", 1)[-1] if arg.startswith("-") else arg)
            if not path.is_absolute() or tmp not in path.parents:
                continue
            folder = tmp / path.relative_to(tmp).parts[0]
            covered = any(folder == Path(b) or Path(b) in folder.parents for b in binds)
            if folder.is_dir() and not covered:
                binds[str(folder)] = {"bind": str(folder), "mode": "rw"}
        return binds

    def call(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        network: Network = True,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` in a container to completion; its exit status and output (text).
        `network`: False, none; HOST_NETWORK, this machine's; True, the engine's default."""
        container = self._create(argv, env=env, cwd=cwd, network=network)
        try:
            container.start()
            status = container.wait(timeout=timeout) if timeout else container.wait()
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            code = int(status.get("StatusCode", 1))
        except Exception as exc:  # the engine's and requests' errors: an outside failure
            raise OutsideFailure(f"running {argv[0]!s} in the container failed: {exc}")
        finally:
            container.remove(force=True)  # also stops it when the run is interrupted
        return subprocess.CompletedProcess([str(a) for a in argv], code, out, err)

    def _create(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None,
        cwd: Path | str | None,
        network: Network,
    ) -> Any:
        from docker.errors import APIError

        try:
            return self.client.containers.create(
                self.image_id,
                command=[str(a) for a in argv],
                environment=self._env(env or {}),
                working_dir=str(cwd) if cwd else "/",
                volumes=self._binds_for(argv),
                network_mode=_network_mode(network),
                labels={LABEL: owner_label()},
                user=f"{os.getuid()}:{os.getgid()}",
            )
        except APIError as exc:
            raise OutsideFailure(f"the container engine refused to create a container: {exc}")

    def run(self, cmd: Command, log: Path) -> None:
        """Run one recipe step in a fresh container, its output streamed into `log` as it
        comes (a long step is followed live, and uv's downloads said as for a local run)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            out.write(f"$ [container {self.image_id[:19]}] {' '.join(cmd.argv)}\n".encode())
            out.flush()
            start = out.tell()
            container = self._create(cmd.argv, env=cmd.env, cwd=cmd.cwd, network=cmd.network)
            watch = (
                uv.watching(cmd.label, log, start) if cmd.downloads else contextlib.nullcontext()
            )
            try:
                with progress.working(f"{cmd.label} (in a container)", log), watch:
                    code = self._stream(container, out)
            finally:
                container.remove(force=True)  # also stops it when the run is interrupted
        if code != 0:
            raise GateFailed(
                f"{cmd.label} failed in the container (exit {code}); log: {log}\n{_tail(log)}",
                hint="read the log above; nothing was written to dist/",
            )

    @staticmethod
    def _stream(container: Any, out: Any) -> int:
        """Start `container`, copy its output (stdout and stderr, as they come) to `out`
        until it ends; its exit status."""
        try:
            container.start()
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                out.write(chunk)
                out.flush()
            return int(container.wait().get("StatusCode", 1))
        except Exception as exc:  # the engine's and requests' errors: an outside failure
            raise OutsideFailure(f"running a step in the container failed: {exc}")

    def interpreter(self, version: str) -> Interpreter:
        """The image's CPython `version`, asked in a container and kept in `probes` by the image's
        ID; PythonUnavailable when the image has none."""
        if not re.fullmatch(r"3\.\d{1,2}", version):
            raise BadInput(f"[build] python = {version!r}: expected 3.X")
        if version in self._interpreters:
            return self._interpreters[version]
        kept = self._kept_probe(version)
        answer = kept or self._probe(version)
        if answer is None:
            raise PythonUnavailable(
                f"image {self.base_image} has no CPython {version} (the spec's [build] python)",
                hint=f"make an image that carries it (`vpr build-image --spec SPEC`: Debian's "
                f"python3 where it is {version}, else this machine's CPython {version} copied "
                "in by its hash) and pin it in [build] base_image",
            )
        if answer is not kept and self.probes is not None:
            write_json(self._probe_path(version), dict(answer.raw))
        found = Interpreter(answer.executable, answer.version, "CPython", answer.sha256, "image")
        self._interpreters[version] = found
        return found

    def _probe_path(self, version: str) -> Path:
        assert self.probes is not None
        return self.probes / f"{self.image_id.removeprefix('sha256:')}-py{version}.json"

    def _kept_probe(self, version: str) -> ImageProbe | None:
        """The image's answer a run kept (`probes`), or None (none, unreadable, or not a
        CPython `version` with its fields)."""
        if self.probes is None:
            return None
        path = self._probe_path(version)
        return records.read_object(path, lambda data: parse_probe(data, version))  # bounded

    def _probe(self, version: str) -> ImageProbe | None:
        """IMAGE_PROBE run by the image's `pythonX.Y` in a container: its answer, or None."""
        # Through the shell: an image without the program is an answer, not an engine error.
        done = self.call(
            ["/bin/sh", "-c", f'exec python{version} -I -S -c "$0"', IMAGE_PROBE], network=False
        )
        answer = None
        with contextlib.suppress(ValueError, IndexError):
            answer = json.loads(done.stdout.strip().splitlines()[-1])
        return parse_probe(answer, version) if done.returncode == 0 else None


class ImageProbe(NamedTuple):
    """IMAGE_PROBE's answer for one CPython of an image: its executable there, version and
    the executable's sha256; `raw` the answer as given, kept in `probes` as is."""

    executable: str
    version: str
    sha256: str
    raw: Mapping[str, Any]


def parse_probe(data: Any, version: str) -> ImageProbe | None:
    """IMAGE_PROBE's answer typed, when it is a CPython `version` with its fields; None
    otherwise (a kept answer that is not is asked again)."""
    if not isinstance(data, dict) or data.get("implementation") != "CPython":
        return None
    found = str(data.get("version", ""))
    executable, sha256 = data.get("executable"), data.get("sha256")
    if ".".join(found.split(".")[:2]) != version or not isinstance(executable, str):
        return None
    if not isinstance(sha256, str) or re.fullmatch(r"[0-9a-f]{64}", sha256) is None:
        return None
    return ImageProbe(executable, found, sha256, data)


# Asked of the image's python: what it is, and its fingerprint as
# `edges/interpreters.fingerprint` computes it (the executable and a shared libpython).
IMAGE_PROBE = """
import hashlib, json, os, platform, sys, sysconfig
def sha(p):
    return hashlib.sha256(open(os.path.realpath(p), "rb").read()).hexdigest()
v = sysconfig.get_config_var
lib = os.path.join(v("LIBDIR") or "", v("INSTSONAME") or "") if v("Py_ENABLE_SHARED") else ""
parts = ["executable " + sha(sys.executable)]
if lib and os.path.isfile(lib):
    parts.append("libpython " + sha(lib))
print(json.dumps({"implementation": platform.python_implementation(),
    "version": platform.python_version(), "executable": sys.executable,
    "sha256": hashlib.sha256("\\n".join(parts).encode()).hexdigest()}))
"""


# The Debian-based image (`vpr build-image`): a rootfs from Debian packages, then loaded.


def debian_rootfs(
    dest: Path, *, suite: str, packages: Sequence[str], epoch: int, mirror: str, log: Path
) -> None:
    """`mmdebstrap` a rootfs tarball with SOURCE_DATE_EPOCH (same packages, same bytes)."""
    if not shutil.which("mmdebstrap"):
        raise OutsideFailure(
            "mmdebstrap is not installed",
            hint="apt-get install -y mmdebstrap (see scripts/engine.sh)",
        )
    argv = ["mmdebstrap", "--mode=root", "--variant=apt", "--quiet"]
    argv += [f"--include={','.join(packages)}", "--", suite, str(dest), mirror]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SOURCE_DATE_EPOCH": str(epoch), "LC_ALL": "C"}
    runner_log = log.open("a")
    with runner_log:
        done = subprocess.run(argv, env=env, stdout=runner_log, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not dest.is_file():
        dest.unlink(missing_ok=True)
        space = free_space_note(Path(tempfile.gettempdir()), dest.parent)
        raise OutsideFailure(
            f"mmdebstrap {suite} failed (exit {done.returncode}); log: {log}\n{_tail(log)}",
            hint=f"is {mirror} reachable? mmdebstrap needs root (--mode=root) and about "
            f"1 GiB in TMPDIR for the rootfs ({space})",
        )


def debian_packages_for(files: Sequence[Path]) -> list[str]:
    """The Debian packages (but libc) holding the shared libraries `files` load (`ldd`, `dpkg -S`);
    OutsideFailure when the tools are missing or a library belongs to no package."""
    if not (shutil.which("ldd") and shutil.which("dpkg")):
        raise OutsideFailure(
            "ldd and dpkg are needed to find the Debian packages a copied-in Python links against",
            hint="run `vpr build-image` on a Debian or Ubuntu machine",
        )
    libraries: set[str] = set()
    for file in files:
        done = subprocess.run(["ldd", "--", str(file)], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            parts = line.split("=>")
            target = parts[1].split("(")[0].strip() if len(parts) == 2 else ""
            if target.startswith(("/lib", "/usr/lib")):
                libraries.add(os.path.realpath(target))
    packages: set[str] = set()
    for library in sorted(libraries):
        candidates = [library, library.replace("/usr/lib/", "/lib/", 1)]
        candidates.append(library.replace("/lib/", "/usr/lib/", 1))
        owner = None
        for candidate in dict.fromkeys(candidates):
            done = subprocess.run(["dpkg", "-S", "--", candidate], capture_output=True, text=True)
            if done.returncode == 0:
                owner = done.stdout.split(":", 1)[0].strip()
                break
        if owner is None:
            raise OutsideFailure(f"{library}: no Debian package holds it (dpkg -S)")
        packages.add(owner)
    return sorted(packages - {"libc6"})


def check_python_runs(client: Any, image_id: str, python: str) -> None:
    """The image's `pythonX.Y` starts and imports the standard library's extension modules;
    GateFailed naming the error."""
    from docker.errors import APIError, ContainerError

    code = "import bz2, ctypes, decimal, lzma, sqlite3, ssl, uuid, zlib, venv; print('ok')"
    try:
        out = client.containers.run(
            image_id, [f"python{python}", "-I", "-c", code], remove=True, network_mode="none"
        )
    except (ContainerError, APIError) as exc:
        raise GateFailed(
            f"the image's python{python} does not run its standard library: {exc}",
            hint="a library it links against is missing from the image",
        )
    if b"ok" not in out:
        raise GateFailed(f"the image's python{python} said {out[-300:]!r}, not ok")


def download_wheel(requirements: Path, dest: Path) -> Path:
    """The manylinux x86_64 wheel a hash-pinned requirements file names (pip checks hashes)."""
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    argv += ["--only-binary=:all:", "--platform", "manylinux_2_17_x86_64", "--require-hashes"]
    argv += ["-d", str(dest), "-r", str(requirements)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise OutsideFailure(
            f"downloading the wheel pinned in {requirements} failed:\n{done.stderr}"
        )
    return wheels[0]


def load_archive(client: Any, archive: Path) -> str:
    """Load a `docker save` archive into the engine; the loaded image's ID (hex)."""
    from docker.errors import APIError

    try:
        with archive.open("rb") as fh:
            images = client.images.load(fh)
    except APIError as exc:
        raise OutsideFailure(f"the container engine refused {archive}: {exc}")
    if len(images) != 1:
        raise OutsideFailure(f"loading {archive} gave {len(images)} images, expected 1")
    return str(images[0].id).removeprefix("sha256:")


# The runners `runner_of` made, by marker text: each opens on its first use and stays open
# for the process (an environment's python is run many times); closed when it ends.
_MARKED: dict[str, ContainerRunner] = {}
_MARKED_LOCK = threading.Lock()


def _from_marker(text: str) -> ContainerRunner:
    with _MARKED_LOCK:
        if text not in _MARKED:
            marker = json.loads(text)
            runner = ContainerRunner(
                marker["base_image"],
                Path(marker["dockerfile"]),
                [Path(m) for m in marker["mounts"]],
                uv_cache=Path(marker["uv_cache"]) if marker.get("uv_cache") else None,
            )
            if not _MARKED:
                atexit.register(_close_marked)
            _MARKED[text] = runner
        return _MARKED[text]


def _close_marked() -> None:
    for runner in _MARKED.values():
        with contextlib.suppress(Exception):  # the process is ending: nothing to tell
            runner.close()


def marker_of(python: Path | str) -> Path:
    """Where an environment's runner marker is (`mark`): beside its bin/ folder."""
    return Path(python).parent.parent / MARKER


def runner_of(python: Path | str) -> Runner:
    """The runner an environment's `python` runs on: the container runner that made it (its marker),
    else this machine; one runner per marker for the process."""
    marker = marker_of(python)
    if not marker.is_file():
        return LocalRunner("off")
    try:
        return _from_marker(marker.read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{marker}: unreadable runner marker ({exc})", hint="run `vpr env` again")
