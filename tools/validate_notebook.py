#!/usr/bin/python3
"""Checks analyst notebooks without running them: valid nbformat (schema), outputs cleared (so they diff
cleanly), and every code cell compiles as Python.

Usage: /usr/bin/python3 tools/validate_notebook.py [NOTEBOOK ...]   (default: notebooks/*.ipynb)
Needs nbformat (Debian: python3-nbformat). Exit status 1 when any check fails.
"""
import ast
import sys
from pathlib import Path

import nbformat


def check(path):
    problems = []
    nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as e:
        problems.append(f"nbformat schema: {e.message}")
    code_cells = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code_cells += 1
        if cell.get("outputs") or cell.get("execution_count") is not None:
            problems.append(f"cell {i}: outputs not cleared")
        source = cell.source
        # IPython line magics and shell escapes are not Python; the notebooks avoid them, so any is a finding
        if any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()):
            problems.append(f"cell {i}: IPython magic or shell escape (keep cells plain Python)")
            continue
        try:
            ast.parse(source, filename=f"{path}#cell{i}")
            compile(source, f"{path}#cell{i}", "exec")
        except SyntaxError as e:
            problems.append(f"cell {i}: line {e.lineno}: {e.msg}")
    if code_cells == 0:
        problems.append("no code cells")
    return problems


def main(argv):
    root = Path(__file__).resolve().parent.parent
    paths = [Path(a) for a in argv] or sorted((root / "notebooks").glob("*.ipynb"))
    if not paths:
        print("validate_notebook: no notebooks found")
        return 1
    failed = 0
    for path in paths:
        problems = check(path)
        for p in problems:
            print(f"{path}: {p}")
        print(f"{path}: {'FAILED' if problems else 'ok'}")
        failed += bool(problems)
    print(f"{len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
