"""What a user does in a new process: load a saved program and decompose it, with nothing of
unbroken imported beforehand but the package itself (an import that only a test process has
done cannot hide a missing dependency)."""
import subprocess
import sys
import textwrap

import torch

import unbroken


class Silu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.silu(x) * 2


def test_load_then_decompose_in_a_fresh_process(tmp_path):
    path = tmp_path / "silu.ub"
    unbroken.save(unbroken.export(Silu(), (torch.randn(3),)), path)
    script = textwrap.dedent(f"""
        import torch, unbroken
        core = unbroken.load({str(path)!r}).run_decompositions()
        targets = {{n.target for n in core.graph.nodes if n.op == "call_function"}}
        assert torch.ops.aten.silu.default not in targets, targets
        x = torch.randn(3)
        torch.testing.assert_close(core.module()(x), torch.nn.functional.silu(x) * 2)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
