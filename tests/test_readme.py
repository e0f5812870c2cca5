"""The README's quick start stays true: CI runs exactly the README's test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", quick)


def test_quick_start_has_two_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert "reportgen demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci


def test_readme_documents_every_command():
    from reportgen.cli import main

    text = (ROOT / "README.md").read_text()
    for name in main.commands:
        assert f"reportgen {name}" in text, name
