"""Where the tests find the repository's files."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
CORPUS = TESTS / "c_corpus"
GOLDEN = TESTS / "golden"
EXAMPLES = ROOT / "examples"
