"""Check that docs/cli.md is the CLI reference the Typer app generates now (or write it).

    python ci/check_cli_reference.py           # exit 1 and a diff when docs/cli.md is stale
    python ci/check_cli_reference.py --write   # regenerate docs/cli.md

The reference is Typer's own ``typer ipfi_cli.cli.app utils docs --name ipfi``, run with this
Python (``python -m typer``) in an environment that fixes what could change its bytes: the
terminal's width and colours (``COLUMNS``, ``NO_COLOR``, ``TERM``, no ``FORCE_COLOR``), the
locale, and ipfi's own environment variables (none may hold a default the help shows).
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "cli.md"


def generate(output: Path) -> None:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("IPFI_", "FORCE_COLOR", "CLICOLOR", "_TYPER", "MLFLOW_"))}
    env.update(COLUMNS="100", LINES="40", NO_COLOR="1", TERM="dumb", LC_ALL="C.UTF-8", LANG="C.UTF-8",
               PYTHONIOENCODING="utf-8")
    subprocess.run([sys.executable, "-m", "typer", "ipfi_cli.cli.app", "utils", "docs", "--name", "ipfi",
                    "--output", str(output)], check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--write"]:
        generate(REFERENCE)
        print(f"wrote {REFERENCE.relative_to(ROOT)}")
        return 0
    if argv[1:]:
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "cli.md"
        generate(fresh)
        new = fresh.read_text(encoding="utf-8")
    old = REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else ""
    if new == old:
        print(f"{REFERENCE.relative_to(ROOT)} is up to date")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                               "docs/cli.md (committed)", "docs/cli.md (generated now)"))
    print(f"\n{REFERENCE.relative_to(ROOT)} is stale: run python ci/check_cli_reference.py --write and commit it")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
