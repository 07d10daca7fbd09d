#!/usr/bin/env python3
"""Builds the Python client's sdist and wheel with the standard library only.

    pypkg.py build SRC OUTDIR VERSION LICENSE  # SRC: a copy of clients/python
    pypkg.py version ARTIFACT                  # prints the version an sdist or wheel declares

The client is pure Python with no dependency, so both archives are written
directly in the layouts their specifications give (the source distribution
format: NAME-VERSION/ with PKG-INFO and pyproject.toml; the wheel format:
a zip with NAME-VERSION.dist-info/ METADATA, WHEEL and RECORD), instead of
through setuptools and wheel: a release machine without PyPI access, or
with a Python whose setuptools cannot build wheels by itself, builds the
same bytes. pyproject.toml stays the one description of the package: its
[project] table gives the metadata, [tool.setuptools] the package and its
data files, so `pip install clients/python` and these archives agree.

The version comes from the caller (the release's), is written into the
copy's pyproject.toml and idgen_client/__init__.py (__version__), and both
must then say the same thing. Timestamps come from SOURCE_DATE_EPOCH when it
is set, so that one commit gives the same archives on every machine.
"""

import base64
import email
import gzip
import hashlib
import io
import os
import re
import sys
import tarfile
import time
import tomllib
import zipfile

DIST_NAME = "idgen_client"  # the project name normalized for file names


def epoch() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01, zip's first date


def stamp(src: str, version: str) -> None:
    """Writes version into the copy's pyproject.toml and __version__."""
    for rel, pattern in (
        ("pyproject.toml", r'(?m)^version = "[^"]*"$'),
        (os.path.join("idgen_client", "__init__.py"), r'(?m)^__version__ = "[^"]*"$'),
    ):
        path = os.path.join(src, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        key = pattern.split(" =")[0].removeprefix("(?m)^")
        new, n = re.subn(pattern, f'{key} = "{version}"', text)
        if n != 1:
            sys.exit(f"pypkg: {rel}: want exactly one {key} line to stamp, found {n}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)


def metadata(src: str, project: dict) -> bytes:
    """The core metadata (version 2.1) of pyproject.toml's [project] table:
    header lines, a blank line, then the README as the description."""
    fields = [
        ("Metadata-Version", "2.1"),
        ("Name", project["name"]),
        ("Version", project["version"]),
        ("Summary", project["description"]),
        ("License", project.get("license", {}).get("text", "")),
        ("Requires-Python", project["requires-python"]),
    ]
    fields += [("Classifier", c) for c in project.get("classifiers", [])]
    fields += [("Requires-Dist", d) for d in project.get("dependencies", [])]
    fields.append(("Description-Content-Type", "text/markdown"))
    with open(os.path.join(src, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    head = "".join(f"{k}: {v}\n" for k, v in fields if v)
    return (head + "\n" + readme).encode("utf-8")


def package_files(src: str, tool: dict) -> list[str]:
    """The files of the packages pyproject.toml lists: their .py files and
    the data files of [tool.setuptools.package-data], relative to src."""
    setuptools = tool.get("setuptools", {})
    data = setuptools.get("package-data", {})
    files = []
    for pkg in setuptools["packages"]:
        d = os.path.join(src, *pkg.split("."))
        for name in sorted(os.listdir(d)):
            if name.endswith(".py") or name in data.get(pkg, []):
                files.append(os.path.join(*pkg.split("."), name))
    return files


def read(src: str, rel: str) -> bytes:
    with open(os.path.join(src, rel), "rb") as f:
        return f.read()


def add_tar(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), epoch(), 0o644
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def sdist(src: str, out: str, version: str, meta: bytes, files: list[str], license_path: str) -> str:
    root = f"{DIST_NAME}-{version}"
    path = os.path.join(out, root + ".tar.gz")
    members = {"PKG-INFO": meta, "LICENSE": read("", license_path)}
    for rel in ["pyproject.toml", "README.md"] + files:
        members[rel] = read(src, rel)
    raw = io.BytesIO()
    # A plain ustar/pax tar, gzip with a fixed header time and no file name.
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(members):
            add_tar(tar, f"{root}/{rel.replace(os.sep, '/')}", members[rel])
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=epoch()) as gz:
            gz.write(raw.getvalue())
    return path


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel(src: str, out: str, version: str, meta: bytes, files: list[str], license_path: str) -> str:
    info = f"{DIST_NAME}-{version}.dist-info"
    path = os.path.join(out, f"{DIST_NAME}-{version}-py3-none-any.whl")
    members = {rel.replace(os.sep, "/"): read(src, rel) for rel in files}
    members[f"{info}/METADATA"] = meta
    members[f"{info}/LICENSE"] = read("", license_path)
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: idgen scripts/release/pypkg.py\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    date = max(epoch(), 315532800)
    stamp_time = time.gmtime(date)[:6]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():  # dist-info last, RECORD last of all
            zi = zipfile.ZipInfo(name, stamp_time)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return path


def build(src: str, out: str, version: str, license_path: str) -> None:
    stamp(src, version)
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    if project["version"] != version:
        sys.exit(f"pypkg: pyproject.toml says {project['version']}, want {version}")
    if project.get("dependencies"):
        sys.exit("pypkg: the client has dependencies now; build it with a PEP 517 front end instead")
    files = package_files(src, pyproject.get("tool", {}))
    meta = metadata(src, project)
    for p in (sdist(src, out, version, meta, files, license_path), wheel(src, out, version, meta, files, license_path)):
        print(os.path.basename(p))


def artifact_version(path: str) -> str:
    """The version an sdist's PKG-INFO or a wheel's METADATA declares; for a
    wheel also checks that idgen_client.__version__ says the same."""
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            metas = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
            meta = z.read(metas[0]).decode()
            init = z.read("idgen_client/__init__.py").decode()
    else:
        with tarfile.open(path) as t:
            names = t.getnames()
            meta = t.extractfile([n for n in names if n.count("/") == 1 and n.endswith("/PKG-INFO")][0]).read().decode()
            init = t.extractfile([n for n in names if n.endswith("/idgen_client/__init__.py")][0]).read().decode()
    version = email.message_from_string(meta)["Version"]
    m = re.search(r'(?m)^__version__ = "([^"]*)"$', init)
    inner = m.group(1) if m else "(none)"
    if inner != version:
        return f"{version} (but idgen_client.__version__ is {inner})"
    return version


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "build":
        build(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "version":
        print(artifact_version(sys.argv[2]))
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main()
