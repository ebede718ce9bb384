#!/usr/bin/env python3
"""Every file and type the docs name exists as named.

Reads README.md, docs/*.md and broker-config/README.md, takes each `code span` that is
a path in this repository (Sources/..., docs/..., scripts/..., a file at the root) or
a type name (`PollLoop`, `RoomState.applyRestore`, `Engine.RoomLoad`), and checks it:
a path must exist; a type must be declared in Sources/, Tests/ or Fuzz/ (or be a
target of Package.swift, or a type of a dependency under .build/checkouts, or one of
the few standard names below), and each `.member` after it must be declared somewhere
in those files. Prints what it cannot find, with file and line, and exits 1 then.

    python3 scripts/check-docs.py
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)

# Names the docs use that no Swift file here declares: the standard library and
# concurrency runtime, HTTP's own words, tools.
STANDARD = {
    "SerialExecutor", "TaskExecutor", "Mutex", "UInt64", "Int64", "String", "Double", "Sendable", "AsyncStream",
    "Origin", "HttpOnly", "Secure", "PostgreSQL", "Dockerfile",
}
PATH = re.compile(r"^(Sources|Tests|scripts|docs|broker-config|deploy|Fuzz|\.ci)/[A-Za-z0-9_./+-]*$")
ROOT_FILES = {"Package.swift", "docker-compose.yml", "Dockerfile", "README.md"}
TYPE = re.compile(r"^([A-Z][A-Za-z0-9]+)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\(.*\))?$")
DECLARATION = re.compile(r"\b(?:struct|class|enum|actor|protocol|typealias|extension|case|func|var|let|init)\s+`?([A-Za-z_][A-Za-z0-9_]*)")
CASES = re.compile(r"\bcase\s+([a-z][A-Za-z0-9_]*(?:\s*(?:\([^)]*\))?\s*,\s*[a-z][A-Za-z0-9_]*)*)")


def swift_files(*bases):
    for base in bases:
        for folder, _, files in os.walk(base):
            for name in files:
                if name.endswith(".swift"):
                    yield os.path.join(folder, name)


def declared(paths):
    names = set()
    for path in paths:
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        names.update(DECLARATION.findall(text))
        for group in CASES.findall(text):
            names.update(re.findall(r"[a-z][A-Za-z0-9_]*", re.sub(r"\([^)]*\)", "", group)))
    return names


def main():
    own = declared(swift_files("Sources", "Tests", "Fuzz"))
    targets = set(re.findall(r'name:\s*"([A-Za-z0-9_-]+)"', open("Package.swift").read()))
    outside = declared(swift_files(".build/checkouts")) if os.path.isdir(".build/checkouts") else set()
    docs = ["README.md"] + sorted(glob.glob("docs/*.md")) + ["broker-config/README.md"]
    problems = []
    spans = 0
    for doc in docs:
        for number, line in enumerate(open(doc, encoding="utf-8"), 1):
            for match in re.finditer(r"`([^`\n]+)`", line):
                span = match.group(1).strip()
                spans += 1
                if PATH.match(span):
                    path = span.split(":")[0].rstrip("/")
                    if "*" not in path and not os.path.exists(path):
                        problems.append(f"{doc}:{number}: `{span}`: no such file or folder")
                    continue
                if span in ROOT_FILES:
                    if not os.path.exists(span):
                        problems.append(f"{doc}:{number}: `{span}`: no such file")
                    continue
                typed = TYPE.match(span)
                if not typed or not re.search(r"[a-z]", typed.group(1)) or len(typed.group(1)) < 3:
                    continue
                name = typed.group(1)
                if name in own or name in targets or name in STANDARD or name in outside:
                    known = own | outside
                    for member in filter(None, typed.group(2).split(".")):
                        if member not in known:
                            problems.append(f"{doc}:{number}: `{span}`: nothing named {member} is declared")
                            break
                else:
                    problems.append(f"{doc}:{number}: `{span}`: no type, target or member of that name in Sources/, Tests/ or Fuzz/")
    for problem in problems:
        print(problem)
    print(f"check-docs: {spans} code spans in {len(docs)} files; {len(problems)} name nothing that exists")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
