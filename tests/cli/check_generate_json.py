#!/usr/bin/env python3
"""`troupe generate --json-schema` (and --json, --grammar) on stories260K (a story model that never
writes JSON by itself): the output is a document Python's jsonschema accepts,
greedy and sampled, and a schema the compiler refuses is a clear error."""
import json
import pathlib
import subprocess
import sys

import jsonschema

troupe, shared = sys.argv[1], pathlib.Path(sys.argv[2])
model = str(shared / "models/stories260K/stories260K.gguf")
schema = {
    "type": "object",
    "properties": {
        "hero": {"type": "string", "minLength": 1, "maxLength": 16},
        "friends": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
        "age": {"type": "integer", "minimum": 3, "maximum": 12},
        "ending": {"enum": ["happy", "sad"]},
    },
    "required": ["hero", "friends", "age", "ending"],
    "additionalProperties": False,
}


def generate(*extra, n=1000):
    return subprocess.run([troupe, "generate", "--model", model, "-p", "", "-n", str(n), "--no-stats", *extra],
                          capture_output=True, text=True, timeout=120)


for sampling in (["--temperature", "0"], ["--temperature", "1", "--seed", "7"], ["--temperature", "0.8", "--seed", "3"]):
    r = generate("--json-schema", json.dumps(schema), *sampling)
    if r.returncode != 0:
        print(f"failed ({sampling}):", r.stderr)
        sys.exit(1)
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema)
    print("ok:", sampling, json.dumps(doc))

# JSON mode leaves strings unbounded, and a story model may never close one:
# only the start of the object is certain within a budget.
r = generate("--json", "--temperature", "0", n=40)
if r.returncode != 0 or not r.stdout.lstrip().startswith("{"):
    print("--json failed:", r.stdout, r.stderr)
    sys.exit(1)

# A GBNF grammar, as llama-cli's --grammar takes it.
r = generate("--grammar", 'root ::= "The " animal " ate " [1-9] " " food "."\nanimal ::= "cat" | "dog"\n'
             'food ::= "apples" | "fish"\n', "--temperature", "0.9", "--seed", "2")
if r.returncode != 0 or not __import__("re").fullmatch(r"The (cat|dog) ate [1-9] (apples|fish)\.\n", r.stdout):
    print("--grammar failed:", repr(r.stdout), r.stderr)
    sys.exit(1)

r = generate("--json-schema", '{"type": "string", "pattern": "a+"}')
if r.returncode == 0 or "'pattern' is not supported" not in r.stderr:
    print("a refused schema was not reported:", r.returncode, r.stderr)
    sys.exit(1)
print("ok: JSON mode, and the refused schema is reported")
