"""Test-wide environment: progress goes to a throwaway home, Inductor's cache stays in the checkout."""
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Set before any kernel starts (nbval and the run pipeline inherit the environment).
os.environ["GRADER_HOME"] = tempfile.mkdtemp(prefix="grader-test-home-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
