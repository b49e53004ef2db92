"""frontend.trace_site: where the trace is, read by the environment and the recorder."""
import torch

from unbroken.frontend.trace_site import TraceSite, is_internal, stack_key
from unbroken.symbolic.diagnostics import UserFrame


class _Translator:
    def __init__(self, filename):
        self._frame = UserFrame(filename, 1, "f", "")

    def frame(self):
        return self._frame


def test_user_frames_skip_torch_and_unbroken_but_never_come_back_empty():
    site = TraceSite()
    assert site.user_frames() == ()
    inner = _Translator(torch.__file__)
    site.translators.append(inner)
    assert site.user_frames() == (inner.frame(),)  # only internal frames: the innermost
    site.translators.insert(0, _Translator("/home/me/model.py"))
    assert [f.filename for f in site.user_frames()] == ["/home/me/model.py"]
    assert is_internal(torch.__file__) and not is_internal("/home/me/model.py")


def test_module_stack_and_eager_requires_grad():
    site = TraceSite()
    site.module_stack += [("", torch.nn.Module), ("enc.0", torch.nn.Linear)]
    site.module_suffixes += ["", "@1"]
    assert site.nn_module_stack() == {
        stack_key("enc.0", "@1"): ("enc.0", "torch.nn.modules.linear.Linear")}
    meta = torch.empty(2, device="meta")
    assert not site.requires_grad(meta)
    site.eager_requires_grad[id(meta)] = True
    assert site.requires_grad(meta)
