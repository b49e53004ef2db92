"""Attacks on unbroken.load (issue 5). Each crafted file must be refused with a
SerializationError, quickly, and no payload may run: every payload would create a marker file.

The first three are the code-execution vectors the issue measured on format 1 (sympify of a
size, a placeholder target and a keyword-argument name pasted into fx's generated code); they
are tried on format-1 and format-2 files alike.
"""
import io
import json
import pickle
import stat
import zipfile
from pathlib import Path

import pytest
import torch

import unbroken
from tests.cpu_time import cpu_clock
from unbroken.ir.serialize import Limits

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def _members(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


V1, V2 = _members(GOLDEN / "program_v1.ubp"), _members(GOLDEN / "program_v2.ubp")


def _zip(members, *, infos=()) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for info, data in infos:
            archive.writestr(info, data)
    buffer.seek(0)
    return buffer


def _with_document(members, change) -> io.BytesIO:
    document = json.loads(members["program.json"])
    change(document)
    return _zip({**members, "program.json": json.dumps(document).encode()})


def _payload(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}')"


def _refused(file, marker: Path, match: str = "", limits=None, run=None):
    with cpu_clock() as clock, pytest.raises(unbroken.SerializationError, match=match):
        program = unbroken.load(file, limits=limits)
        if run is not None:
            run(program)
    assert clock.seconds < 1.0
    assert not marker.exists(), "the payload ran"


def _nodes(document):
    return document["graph"]["nodes"]


def _node(document, name):
    return next(n for n in _nodes(document) if n["name"] == name)


@pytest.fixture(scope="module", autouse=True)
def _warm_up():
    """The first load in a process imports torch's meta kernels (about a second); time the
    attacks, not that."""
    unbroken.load(GOLDEN / "program_v2.ubp")


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "pwned"


# -- the three vectors of the issue ---------------------------------------------------------------
@pytest.mark.parametrize("members", [V1, V2], ids=["v1", "v2"])
def test_size_strings_are_never_sympified(members, marker):
    def change(document):
        _node(document, "x")["val"]["tensor"]["shape"][0] = f"{_payload(marker)} + s0"
    _refused(_with_document(members, change), marker, "bad expression")


@pytest.mark.parametrize("members", [V1, V2], ids=["v1", "v2"])
def test_placeholder_targets_are_never_pasted_into_code(members, marker):
    def change(document):
        _node(document, "x")["target"] = f"x={_payload(marker)}"
    _refused(_with_document(members, change), marker, "not a plain Python identifier")


@pytest.mark.parametrize("target", ["torch", "self", "mul"])
def test_placeholder_targets_never_shadow_what_generated_code_reads(target, marker):
    """A target may differ from its node's name (fx snake-cases names: p_LayerNorm_weight is
    named p_layer_norm_weight; an argument named ``input`` is named input_1) but must not shadow
    a global the generated code reads (``torch``), ``self`` or another node."""
    def change(document):
        _node(document, "x")["target"] = target
    _refused(_with_document(V2, change), marker, "would shadow")


@pytest.mark.parametrize("members", [V1, V2], ids=["v1", "v2"])
def test_keyword_argument_names_are_never_pasted_into_code(members, marker):
    key = f"**{{'q': {_payload(marker)}}}, z"

    def change(document):
        node = _node(document, "mul")
        node["kwargs"] = {"dict": {key: 1}} if isinstance(node["kwargs"], dict) else [[key, 1]]
    x = torch.randn(3, 4)
    _refused(_with_document(members, change), marker, "not a plain Python identifier",
             run=lambda program: program.module()(x))


def test_keyword_arguments_must_be_arguments_of_the_op(marker):
    def change(document):
        _node(document, "mul")["kwargs"] = [["alpha", 1]]
    _refused(_with_document(V2, change), marker, "'alpha' is not an argument of aten.mul.Tensor")


# -- more names that reach generated code ---------------------------------------------------------
@pytest.mark.parametrize("field, value, match", [
    ("name", "x; import os", "node name"),
    ("name", "__class__", "node name"),
    ("target", "builtin:builtins.eval", "unknown call target"),
    ("target", "builtin:posix.system", "unknown call target"),
    ("target", "op:aten::__class__.default", "does not name|may not be called|not registered"),
    ("target", "op:aten::from_file.default", "may not be called from a file"),
    ("target", "hop:run_with_rng_state", "unknown call target"),
])
def test_names_and_targets_are_checked(field, value, match, marker):
    def change(document):
        _node(document, "relu")[field] = value
    _refused(_with_document(V2, change), marker, match)


def test_stack_traces_cannot_break_out_of_their_comment(marker):
    trace = f'  File "m.py", line 1, in forward\n    x\r{_payload(marker)}\n'

    def change(document):
        _node(document, "relu")["stack_trace"] = trace
    _refused(_with_document(V2, change), marker, "control characters")


@pytest.mark.parametrize("target", ["forward", "lin.__class__", "lin.weight; import os"])
def test_state_paths_are_attribute_paths(target, marker):
    def change(document):
        document["signature"]["inputs"][0]["target"] = target
    _refused(_with_document(V2, change), marker, "invalid component|not an attribute path")


# -- tensors: no pickle ---------------------------------------------------------------------------
class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickle_in_the_safetensors_member_is_refused(marker):
    members = {**V2, "tensors.safetensors": pickle.dumps(_Evil(marker))}
    _refused(_zip(members), marker, "tensors.safetensors: is not a valid safetensors file")


def test_pickle_in_a_v1_tensor_member_is_refused(marker):
    _refused(_zip({**V1, "tensors.pt": pickle.dumps(_Evil(marker))}), marker, "tensors.pt")


def test_reduce_payload_inside_a_torch_save_archive_is_refused(marker):
    buffer = io.BytesIO()
    torch.save({"state_dict": {}, "constants": {}}, buffer)
    with zipfile.ZipFile(buffer) as archive:
        inner = {n: archive.read(n) for n in archive.namelist()}
    name = next(n for n in inner if n.endswith("data.pkl"))
    inner[name] = pickle.dumps(_Evil(marker), protocol=2)
    rebuilt = io.BytesIO()
    with zipfile.ZipFile(rebuilt, "w") as archive:
        for member, data in inner.items():
            archive.writestr(member, data)
    _refused(_zip({**V1, "tensors.pt": rebuilt.getvalue()}), marker, "not a tensor")


def test_weights_are_checked_against_the_graph(marker):
    import safetensors.torch
    tensors = safetensors.torch.load(V2["tensors.safetensors"])
    document = json.loads(V2["program.json"])
    bias = next(e["tensor"] for e in document["tensors"]["state_dict"] if e["name"] == "lin.bias")
    tensors[bias] = torch.zeros(1)
    members = {**V2, "tensors.safetensors": safetensors.torch.save(tensors)}
    _refused(_zip(members), marker, r"lin.bias.*is torch.float32\[1\] but the graph says "
                                    r"torch.float32\[3\]")


def test_unreferenced_tensors_are_refused(marker):
    import safetensors.torch
    tensors = {**safetensors.torch.load(V2["tensors.safetensors"]), "extra": torch.zeros(2)}
    members = {**V2, "tensors.safetensors": safetensors.torch.save(tensors)}
    _refused(_zip(members), marker, "does not use")


# -- the archive ----------------------------------------------------------------------------------
def test_path_traversal_member_names_are_refused(marker):
    _refused(_zip({**V2, "../../evil.py": b"import os"}), marker, "unexpected member")


def test_symlink_entries_are_refused(marker):
    info = zipfile.ZipInfo("program.json")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    members = {k: v for k, v in V2.items() if k != "program.json"}
    _refused(_zip(members, infos=[(info, b"/etc/passwd")]), marker, "link")


def test_duplicate_member_names_are_refused(marker):
    info = zipfile.ZipInfo("program.json")
    with pytest.warns(UserWarning, match="Duplicate name"):
        file = _zip(V2, infos=[(info, b"{}")])
    _refused(file, marker, "appears 2 times")


def test_a_zip_bomb_stops_at_the_limit(marker):
    bomb = b"[" + b" " * (200 << 20) + b"]"  # 200 MB of JSON in about 200 KB
    file = _zip({**V2, "program.json": bomb})
    _refused(file, marker, "program.json: declares")


def test_an_inflated_member_that_lies_about_its_size_stops_at_the_limit(marker):
    file = _zip({**V2, "program.json": b" " * (8 << 20) + V2["program.json"]})
    data = bytearray(file.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo("program.json")
    real = info.file_size.to_bytes(4, "little")
    data = bytes(data).replace(real, (1000).to_bytes(4, "little"))  # local and central headers
    _refused(io.BytesIO(data), marker, "program.json", limits=Limits(json_bytes=1 << 20))


def test_too_many_entries_are_refused(marker):
    _refused(_zip({**V2, **{f"m{i}": b"" for i in range(40)}}), marker, "entries exceed")


# -- JSON -----------------------------------------------------------------------------------------
def test_version_true_is_not_version_1(marker):
    header = json.dumps({"format": "unbroken.exported_program", "version": True}).encode()
    _refused(_zip({**V1, "format.json": header}), marker, "format version 'True'")


@pytest.mark.parametrize("depth", [100, 200_000])
def test_deep_json_is_refused(depth, marker):
    _refused(_zip({**V2, "program.json": b"[" * depth + b"]" * depth}), marker, "nests deeper")


def test_huge_integers_are_refused(marker):
    def change(document):
        _node(document, "x")["val"]["tensor"]["shape"][1] = 10 ** 4000
    _refused(_with_document(V2, change), marker, "digits exceeds the limit")


def test_power_towers_are_refused_at_once(marker):
    def change(document):
        _node(document, "x")["val"]["tensor"]["shape"][0] = "9**9**9**9"
    _refused(_with_document(V2, change), marker, "exponent")


def test_unknown_symbols_are_refused(marker):
    def change(document):
        _node(document, "x")["val"]["tensor"]["shape"][0] = "s0 + q"
    _refused(_with_document(V2, change), marker, "unknown symbol 'q'")


def test_expression_cost_is_bounded_per_file(marker):
    heavy = ["%".join(f"(s0+{i + j})" for j in range(6)) for i in range(200)]

    def change(document):
        for index, text in enumerate(heavy):
            node = dict(_node(document, "relu"), name=f"heavy_{index}",
                        val={"sym": text, "type": "SymInt"})
            _nodes(document).insert(-1, node)
    _refused(_with_document(V2, change), marker, "budget|operations")


def test_node_count_is_bounded(marker):
    def change(document):
        for index in range(40):
            _nodes(document).insert(-1, dict(_node(document, "relu"), name=f"extra_{index}"))
    _refused(_with_document(V2, change), marker, "more than 20 nodes", limits=Limits(nodes=20))


def test_placeholders_take_no_default_values(marker):
    def change(document):
        _node(document, "x")["args"] = {"tuple": [f"{_payload(marker)}"]}
    _refused(_with_document(V2, change), marker, "takes no arguments")


# -- the metadata must be what the ops compute ----------------------------------------------------
def test_saved_values_must_be_what_the_ops_compute(marker):
    def change(document):
        _node(document, "relu")["args"] = {"tuple": [{"node": "add"}]}  # an int64 scalar
    _refused(_with_document(V2, change), marker, r"node relu \(aten.relu.default\): the saved "
                                                 r"value torch.float32\[s0, 3\] is not what")


def test_ops_that_fail_on_their_saved_inputs_are_refused(marker):
    def change(document):
        _node(document, "linear")["args"]["tuple"][1] = {"node": "x"}
    _refused(_with_document(V2, change), marker, "linear.*fails on its saved inputs")


def test_mutation_outputs_must_fit_their_buffer(marker):
    def change(document):
        _nodes(document)[-1]["args"]["tuple"][0]["tuple"][0] = {"node": "mul"}
        document["signature"]["outputs"][0]["arg"]["name"] = "mul"
    _refused(_with_document(V2, change), marker, "does not fit|fails the verifier")
