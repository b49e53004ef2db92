"""A fuzz campaign against unbroken.load (issue 5), larger than the suite's.

Usage: python benchmarks/fuzz_load.py [files per mutation, default 500] [seed]

Mutates the format-2 golden program (bit flips, truncation, byte edits inside members,
inflated members, JSON edits with random values and deep nesting, small plausible edits of
scalars) and the format-1 golden
(bit flips, byte edits) and loads each file; a loaded program is run on its example inputs.
Prints, per mutation: files tried, refused cleanly (SerializationError), loaded and ran,
anything else (by exception type, with one example), and the mean / max time per file.
"""
import io
import json
import random
import sys
import time
import traceback
import zipfile
from collections import Counter
from pathlib import Path

import unbroken
from unbroken.ir.serialize import Limits

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
LIMITS = Limits(json_bytes=1 << 20, tensor_bytes=1 << 20)


def members_of(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def rezip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def bit_flips(rng, original, members):
    data = bytearray(original)
    for _ in range(rng.randint(1, 8)):
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


def truncation(rng, original, members):
    return original[:rng.randrange(len(original))]


def byte_edits(rng, original, members):
    name = rng.choice(sorted(members))
    content = bytearray(members[name])
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(max(len(content), 1))
        content[at:at + 1] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3)))
    return rezip({**members, name: bytes(content)})


def inflated(rng, original, members):
    name = rng.choice(sorted(members))
    return rezip({**members, name: members[name] + b" " * rng.randint(1, 8 << 20)})


def random_json(rng, depth=0):
    choice = rng.randrange(9 if depth < 3 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.randint(-2 ** 70, 2 ** 70)
    if choice == 3:
        return rng.uniform(-1e9, 1e9)
    if choice == 4:
        return rng.choice(["s0", "u0", "x", "mul", "BUFFER", "(s0//2)", "9**9**9", "", "\r"])
    if choice == 5:
        return rng.randint(-3, 70)
    if choice == 6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if choice == 7:
        tag = rng.choice(["node", "tuple", "list", "dict", "tensor", "sym", "value", "x"])
        return {tag: random_json(rng, depth + 1)}
    return json.loads("[" * 90 + "]" * 90)


def paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        yield from paths(item, prefix + (key,))


def json_edits(rng, original, members):
    document = json.loads(members["program.json"])
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in paths(document) if p])
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = random_json(rng)
    return rezip({**members, "program.json": json.dumps(document).encode()})


def leaf_tweaks(rng, original, members):
    """Small plausible edits of scalars: ints moved by a little, strings swapped for other
    strings of the same document (op names, node names, kinds, dtypes, expressions)."""
    document = json.loads(members["program.json"])
    leaves = [p for p in paths(document) if p and not isinstance(get(document, p), (dict, list))]
    strings = sorted({get(document, p) for p in leaves if isinstance(get(document, p), str)})
    for _ in range(rng.randint(1, 2)):
        path = rng.choice(leaves)
        value = get(document, path)
        if isinstance(value, bool) or value is None:
            value = rng.choice([True, False, None, 0, 1])
        elif isinstance(value, (int, float)):
            value = value + rng.choice([-2, -1, 1, 2, 64])
        else:
            value = rng.choice(strings)
        get(document, path[:-1])[path[-1]] = value
    return rezip({**members, "program.json": json.dumps(document).encode()})


def get(document, path):
    for key in path:
        document = document[key]
    return document


def outcome(data: bytes):
    try:
        program = unbroken.load(io.BytesIO(data), limits=LIMITS)
        args, kwargs = program.example_inputs or ((), {})
        if program.example_inputs is not None:
            program.module()(*args, **kwargs)
        return "loaded", None
    except unbroken.SerializationError:
        return "refused", None
    except Exception as error:  # what the campaign is looking for: report, do not stop
        return f"other: {type(error).__name__}", traceback.format_exc(limit=-3)


def campaign(label, original, mutation, count, rng):
    members = members_of(original)
    counts, examples, times = Counter(), {}, []
    for _ in range(count):
        data = mutation(rng, original, members)
        start = time.perf_counter()
        result, detail = outcome(data)
        times.append(time.perf_counter() - start)
        counts[result] += 1
        if detail:
            examples.setdefault(result, detail)
    print(f"{label:<28} tried {count:5d}  refused {counts['refused']:5d}  loaded "
          f"{counts['loaded']:5d}  other {count - counts['refused'] - counts['loaded']:3d}  "
          f"mean {1000 * sum(times) / len(times):6.1f} ms  max {1000 * max(times):6.1f} ms")
    for result, detail in examples.items():
        print(f"    {result}\n{detail}")
    return counts


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    v2 = (GOLDEN / "program_v2.ubp").read_bytes()
    v1 = (GOLDEN / "program_v1.ubp").read_bytes()
    total = Counter()
    for label, original, mutation in [
            ("v2 bit flips", v2, bit_flips), ("v2 truncation", v2, truncation),
            ("v2 byte edits in members", v2, byte_edits), ("v2 inflated members", v2, inflated),
            ("v2 JSON edits", v2, json_edits), ("v2 leaf tweaks", v2, leaf_tweaks),
            ("v1 bit flips", v1, bit_flips),
            ("v1 byte edits in members", v1, byte_edits), ("v1 JSON edits", v1, json_edits),
            ("v1 leaf tweaks", v1, leaf_tweaks)]:
        total.update(campaign(label, original, mutation, count, rng))
    tried = sum(total.values())
    print(f"{'total':<28} tried {tried:5d}  refused {total['refused']:5d}  loaded "
          f"{total['loaded']:5d}  other {tried - total['refused'] - total['loaded']:3d}")


if __name__ == "__main__":
    main()
