import os
import sys

from .cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:
    # The reader went away (`python -m grader drill --list | head`): stop quietly, as Unix tools do.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
except ModuleNotFoundError as missing:  # the commands import what they need when they run
    if (missing.name or "grader").split(".")[0] == "grader":
        raise
    raise SystemExit(f"python -m grader: this Python ({sys.executable}) lacks the course's packages (no module "
                     f"{missing.name!r}); run `make setup` once, then `.venv/bin/python -m grader ...` "
                     "(or `source .venv/bin/activate` first)") from None
sys.exit(code)
