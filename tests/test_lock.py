"""Installs are the locked ones: requirements/<extra>.txt pins every package of an extra (with its
hashes); scripts/install installs exactly that, scripts/lock refreshes it. Here every package locked
for an installed extra must have its locked version, and every lock must still fit pyproject.toml.
"""
import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCKS = Path(__file__).resolve().parent.parent / "requirements"
EXTRAS = sorted(path.stem for path in LOCKS.glob("*.txt") if path.stem != "all")  # all: the joint
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)         # resolution


def locked(extra):
    """{package name: locked version} of requirements/<extra>.txt."""
    text = (LOCKS / f"{extra}.txt").read_text()
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


def installed_version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def labkit_requirements(extra):
    """labkit's requirements with `extra` installed (its own and the extra's), from its metadata."""
    try:
        requires = metadata.requires("labkit")
    except metadata.PackageNotFoundError:
        pytest.fail("labkit is not installed as a package: run scripts/install")
    requirements = [Requirement(text) for text in requires]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": extra})]


def test_every_extra_has_a_lock():
    declared = set(metadata.metadata("labkit").get_all("Provides-Extra"))
    assert declared == set(EXTRAS), (
        f"pyproject.toml declares the extras {sorted(declared)}, requirements/ locks {EXTRAS}: "
        "run scripts/lock")


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda extra: f"{extra}.txt")
def test_locks_fit_pyproject(extra):
    pins, stale = locked(extra), []
    for requirement in labkit_requirements(extra):
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None or not requirement.specifier.contains(pin, prereleases=True):
            stale.append(f"{requirement.name}{requirement.specifier}: locked {pin or 'nothing'}")
    assert not stale, (f"requirements/{extra}.txt no longer fits pyproject.toml "
                       f"({'; '.join(stale)}): run scripts/lock")


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda extra: f"{extra}.txt")
def test_installed_versions_are_the_locked_ones(extra):
    if not all(installed_version(r.name) for r in labkit_requirements(extra)):
        pytest.skip(f"the extra {extra!r} is not installed")
    wrong = []
    for name, version in sorted(locked(extra).items()):
        have = installed_version(name)
        if have is None or Version(have) != Version(version):
            wrong.append(f"{name}: locked {version}, installed {have or 'nothing'}")
    assert not wrong, (f"installed packages differ from requirements/{extra}.txt: "
                       f"{'; '.join(wrong)} (scripts/install {extra} installs the lock)")
