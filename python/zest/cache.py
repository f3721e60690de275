"""The compile cache: an imported model and a compiled step are kept under
a hash of what made them (the model's file, the factory, the options and
the tools' versions), so a second run with the same inputs starts at once.
An imported model also records the hashes of the source files its import
loaded besides the factory's (the user's modules it imports): an entry
whose sources changed is stale and built again. Each build gets an id that
the entries made from it (the compiled step, the data) are keyed by.

Entries are built in a scratch folder and renamed into place: an
interrupted build leaves no half entry."""

import functools
import importlib.metadata
import hashlib
import json
import os
import shutil
import tempfile
import uuid

from .tools import ROOT, build_dir


# The source files an entry was made from, with their hashes.
SOURCES = "sources.json"

# The installed packages whose versions an entry depends on.
TRACKED_PACKAGES = ("torch", "torch-mlir", "transformers", "numpy", "safetensors")


def cache_root(explicit=None):
    if explicit:
        return explicit
    if os.environ.get("ZEST_CACHE_DIR"):
        return os.environ["ZEST_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(base, "zest")


def _hash_file(digest, path):
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)


def file_hash(path):
    """The SHA-256 of a file's contents, or None where it cannot be read."""
    digest = hashlib.sha256()
    try:
        _hash_file(digest, path)
    except OSError:
        return None
    return digest.hexdigest()


def write_sources(folder, paths):
    """Records the hashes of `paths` in an entry being built."""
    with open(os.path.join(folder, SOURCES), "w") as f:
        json.dump({path: file_hash(path) for path in paths}, f, indent=1)


@functools.lru_cache(maxsize=None)
def tools_version():
    """A hash of the tools that make an entry: zestc, the runtime
    libraries it links, the importer's sources and the versions of the
    packages it runs (read once a run)."""
    digest = hashlib.sha256()
    paths = [os.path.join(build_dir(), "bin", "zestc")]
    lib = os.path.join(build_dir(), "lib")
    if os.path.isdir(lib):
        paths += sorted(
            os.path.join(lib, name) for name in os.listdir(lib) if name.endswith(".a")
        )
    for folder in ("zest_import", "zest"):
        path = os.path.join(ROOT, "python", folder)
        paths += sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if name.endswith(".py")
        )
    for path in paths:
        if os.path.exists(path):
            digest.update(path.encode())
            _hash_file(digest, path)
    # The packages the import runs: an upgraded transformers may trace a
    # model differently.
    for package in TRACKED_PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}".encode())
    return digest.hexdigest()


def key_of(**fields):
    """The key of an entry made from `fields` (JSON-serializable; a field
    named file_* is a path whose contents count)."""
    digest = hashlib.sha256()
    for name in sorted(fields):
        value = fields[name]
        digest.update(name.encode())
        if name.startswith("file_"):
            _hash_file(digest, value)
        else:
            digest.update(json.dumps(value, sort_keys=True).encode())
    return digest.hexdigest()[:20]


class Entry:
    """One cached artifact set, `root/kind-key/`."""

    def __init__(self, root, kind, key, fields):
        self.path = os.path.join(root, f"{kind}-{key}")
        self.root, self.fields = root, fields
        self._changed = None  # changed_sources, once computed

    def exists(self):
        return os.path.isfile(self.file("entry.json")) and not self.changed_sources()

    def changed_sources(self):
        """The recorded source files whose contents changed since the
        entry was built (write_sources), or that are gone; hashed once."""
        if self._changed is None:
            try:
                with open(self.file(SOURCES)) as f:
                    sources = json.load(f)
            except (OSError, ValueError):
                sources = {}
            self._changed = [
                path for path, sha in sources.items() if file_hash(path) != sha
            ]
        return self._changed

    def build_id(self):
        """The id of this entry's build: entries made from it key by it."""
        with open(self.file("entry.json")) as f:
            return json.load(f)["build"]

    def build(self, make):
        """Calls make(folder) to fill a scratch folder, then publishes it."""
        os.makedirs(self.root, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".building-", dir=self.root)
        try:
            make(scratch)
            with open(os.path.join(scratch, "entry.json"), "w") as f:
                fields = dict(self.fields, build=uuid.uuid4().hex)
                json.dump(fields, f, indent=1, sort_keys=True, default=str)
            if os.path.exists(self.path):  # a half entry of an older build
                shutil.rmtree(self.path)
            os.rename(scratch, self.path)
            self._changed = []
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def file(self, name):
        return os.path.join(self.path, name)
