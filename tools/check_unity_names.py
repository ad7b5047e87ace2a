#!/usr/bin/env python3
"""Finds file-local names that a unity build could bind to the wrong thing.

CI compiles each folder's .cpp files in batches, one translation unit per
batch (CMAKE_UNITY_BUILD, scripts/test). Every file of a batch then shares
one anonymous namespace: a name that file A declares there is visible to the
files after A, and hides a namespace-scope name of the same spelling that
they meant (a header's constant, a library function). Same-named
declarations in two files are compile errors, which the build reports; a
hidden outer name often is not. So for each name declared in a .cpp file's
anonymous namespace, this lists the later files of its folder that use the
name without declaring it themselves (by a heuristic reading of the text,
comments and strings removed).

Each finding is either renamed away or, once read and found to bind to the
right thing (a member function, a local variable the heuristic missed),
listed in the allow file as "folder/file.cpp: name". Exit status 1 on a
finding not allowed, naming it.

  tools/check_unity_names.py [--allow tests/unity_names_allow.txt] [--root .]
"""
import argparse
import pathlib
import re
import sys

FOLDERS = ["actors", "core", "grammar", "kernels/cpu", "kernels/cuda", "memory", "model", "net", "telemetry",
           "tokenizer", "vision", "tools/cli", "tools/make_model"]

# Declarations at namespace scope, one per line start (the code is formatted).
DECLS = [re.compile(p) for p in [
    r"^(?:template\s*<[^>]*>\s*)?(?:\[\[\w+\]\]\s*)?(?:static\s+|inline\s+|constexpr\s+|const\s+)*"
    r"[\w:<>,\*&\s]+?[\s\*&](\w+)\s*\((?!\*)",                                      # function
    r"^(?:static\s+|inline\s+)?(?:constexpr|const)\s+[\w:<>,\*&\s]+?\b(\w+)\s*(?:=|\{|\[)",  # constant
    r"^(?:struct|class|union)\s+(\w+)",
    r"^using\s+(\w+)\s*=",
    r"^namespace\s+(\w+)\s*=",
    r"^enum\s+(?:class\s+)?(\w+)",
    r"^(?:static\s+)?(?:thread_local\s+)?[\w:<>]+\s+(\w+)\s*(?:=|;|\{)",            # variable
]]
NOT_NAMES = {"if", "for", "while", "return", "switch", "namespace", "operator", "main", "else", "const", "int32_t",
             "TEST", "TEST_F", "TEST_P", "TYPED_TEST", "INSTANTIATE_TEST_SUITE_P"}
# Files compiled alone, with flags of their own (the kernels' ISA files).
ALONE = re.compile(r"_(avx2|avx512|vnni|vnni256|avxvnni|bf16|amx)\.cpp$")
# Aliases every file of a folder spells alike (boost::json, nlohmann::json, std::filesystem, Asio, Beast).
SAME_EVERYWHERE = {"json", "Json", "fs", "asio", "beast", "http", "websocket"}


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'R"(\w*)\((.*?)\)\1"', '""', text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(?:\\.|[^'\\\n])'", "''", text)


def anonymous_names(text):
    """Names declared directly in an anonymous namespace (or one nested in it)."""
    names, scopes = set(), []
    for line in text.split("\n"):
        if scopes and "anon" in scopes and all(s != "block" for s in scopes) and line.strip():
            for d in DECLS:
                m = d.match(line.strip())
                if m and m.group(1) not in NOT_NAMES:
                    names.add(m.group(1))
                    break
        for j, ch in enumerate(line):
            if ch == "{":
                before = line[:j]
                scopes.append("anon" if re.search(r"namespace\s*$", before) else
                              "ns" if re.search(r"namespace\s+[\w:]+\s*$", before) else "block")
            elif ch == "}" and scopes:
                scopes.pop()
    return names


def declares(text, name):
    """Whether the text declares `name` anywhere (a local, a parameter, a member)."""
    n = re.escape(name)
    return bool(re.search(r"[\w>&\*\]]\s+" + n + r"\s*[=;,)\[{(:]", text) or
                re.search(r"\[[^\]]*\b" + n + r"\b[^\]]*\]\s*\(", text) or
                re.search(r"\bauto\s*&?\s*\[[^\]]*\b" + n + r"\b", text))


def findings(root):
    folders = FOLDERS + sorted(str(p.relative_to(root)) for p in (root / "tests").iterdir() if p.is_dir())
    for folder in folders:
        # The unity batches' order: CMake's sorted glob.
        files = [f for f in sorted((root / folder).glob("*.cpp")) if not ALONE.search(f.name)]
        texts = {f: strip(f.read_text()) for f in files}
        names = {f: anonymous_names(texts[f]) for f in files}
        for i, a in enumerate(files):
            for name in sorted(names[a] - SAME_EVERYWHERE):
                use = re.compile(r"(?<![\w.>:])" + re.escape(name) + r"\b")
                users = [b.name for b in files[i + 1:]
                         if name not in names[b] and use.search(texts[b]) and not declares(texts[b], name)]
                if users:
                    yield f"{a.relative_to(root)}: {name}", users


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--allow", default=None, help="file of 'path: name' lines read and found safe")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    allow = set()
    if args.allow:
        for line in pathlib.Path(args.allow).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                allow.add(line)
    bad = [(k, users) for k, users in findings(root) if k not in allow]
    for k, users in bad:
        print(f"{k} <- used after it in {', '.join(users)}: rename it, or read the uses and allow it")
    if bad:
        print(f"{len(bad)} file-local names a unity build could bind wrongly (see this script's docstring)")
        return 1
    print("ok: no file-local name reaches a later file of its folder unchecked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
