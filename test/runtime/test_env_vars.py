"""Source hygiene: README's variable tables match the code, one reader of the environment in C++,
and no oversized C++ file.

- The runtime variables are the rows of MSLK_ENV_VARS (include/mslk/utils/env.h) and PYTHON_VARS
  (mslk/utils/env.py); README.md's tables are generated from them by tools/env_table.py.
- Only env.h calls getenv under csrc/ and include/.
- A C++ file under csrc/ or include/ holds at most MAX_LINES lines, unless one of its first 5 lines
  is a comment with the word "long" saying why (e.g. "// long: one table of every tile row").
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
CPP_SUFFIXES = {".h", ".hpp", ".cuh", ".cu", ".cpp", ".cc", ".inl"}


def _table_module():
    spec = importlib.util.spec_from_file_location("_env_table", ROOT / "tools" / "env_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = _table_module()


def _readme_names(readme: str) -> list[str]:
    begin, end = readme.index(T.BEGIN.split(" (")[0]), readme.index(T.END)
    return re.findall(r"^\| `([A-Z0-9_]+)` \|", readme[begin:end], flags=re.M)


def test_env_h_rows_parse():
    rows = T.cpp_vars()
    text = (ROOT / "include/mslk/utils/env.h").read_text()
    block = text[text.index("#define MSLK_ENV_VARS(X)"):text.index("enum class Var")]
    assert len(rows) == len(re.findall(r"\bX\(", block)) > 0, "a row of MSLK_ENV_VARS did not parse"
    for v in rows:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", v.name) and v.values and v.meaning, v


def test_python_vars_are_what_env_py_and_native_read():
    listed = {v.name for v in T.python_vars()}
    read = set()
    for rel in ("mslk/utils/env.py", "mslk/_native.py"):
        src = (ROOT / rel).read_text()
        code = re.sub(r"\nPYTHON_VARS\b.*?\n\)\n", "\n", src, flags=re.S)  # the list itself does not count
        read |= set(re.findall(r"[\"'](MSLK_[A-Z0-9_]+)[\"']", code))  # names in string literals
    assert read == listed, f"read but not in PYTHON_VARS: {read - listed}; listed but not read: {listed - read}"


def test_build_and_test_vars_have_readers():
    build_src = "".join(p.read_text() for p in [ROOT / "tools/build.sh", ROOT / "CMakeLists.txt",
                                                  *(ROOT / "cmake").glob("*.cmake")])
    for v in T.BUILD_VARS:
        assert v.name in build_src, f"{v.name}: no reader in tools/build.sh or CMake"
    conftest = (ROOT / "test/conftest.py").read_text()
    read = set(re.findall(r"environ(?:\.get\(|\[)\"(MSLK_[A-Z0-9_]+)\"", conftest))
    assert read == {v.name for v in T.TEST_VARS}


def test_readme_lists_exactly_the_variables():
    readme = (ROOT / "README.md").read_text()
    names = _readme_names(readme)
    runtime = [v.name for _, v in T.runtime_rows(T.cpp_vars(), T.python_vars())]
    other = [v.name for v in (*T.BUILD_VARS, *T.TEST_VARS)]
    assert sorted(names) == sorted(runtime + other), (
        f"README lacks {set(runtime + other) - set(names)}; README has extra {set(names) - set(runtime + other)}")
    assert len(names) == len(set(names)), "a variable is listed twice"


def test_readme_tables_are_up_to_date():
    readme = (ROOT / "README.md").read_text()
    assert T.splice(readme, T.render()) == readme, "README.md is stale: run python3 tools/env_table.py"


def _cpp_files():
    for top in ("csrc", "include"):
        for dirpath, _, files in os.walk(ROOT / top):
            for f in files:
                if Path(f).suffix in CPP_SUFFIXES:
                    yield Path(dirpath) / f


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def test_only_env_h_reads_the_environment():
    env_h = ROOT / "include/mslk/utils/env.h"
    offenders = [str(p.relative_to(ROOT)) for p in _cpp_files()
                 if p != env_h and re.search(r"\b(?:secure_)?getenv\s*\(", _strip_comments(p.read_text()))]
    assert not offenders, f"getenv outside include/mslk/utils/env.h (use env::* there): {offenders}"


def test_cpp_files_stay_small_or_say_why():
    offenders = []
    for p in _cpp_files():
        lines = p.read_text().splitlines()
        if len(lines) <= MAX_LINES:
            continue
        head = [l.strip() for l in lines[:5]]
        if not any(l.startswith(("//", "/*", "*")) and re.search(r"\blong\b", l, re.I) for l in head):
            offenders.append(f"{p.relative_to(ROOT)} ({len(lines)} lines)")
    assert not offenders, (f"over {MAX_LINES} lines without a 'long ...' reason in the first 5 lines: "
                           + ", ".join(sorted(offenders)))


def test_readme_is_no_diary():
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"\bsessions?\b", readme, re.I)
