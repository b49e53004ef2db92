"""Hugging Face architectures nobody here wrote a case for, exported side by side.

Each model type named (transformers' ``model_type``: ``qwen3_next``, ``mra``...) is built
from its default config shrunk to 2 layers (hidden 64, 4 heads, vocabulary 128: the keys a
config has), as ``AutoModelForCausalLM`` or else ``AutoModel``, in eval mode, and called on
``input_ids`` and a padded ``attention_mask`` (batch 2, sequence 12; ``decoder_input_ids`` for
encoder-decoders). unbroken and torch's default (non-strict) export each export it, without
or with ``Dim.AUTO`` on both dims, and each program's first output is compared with eager's.
With ``--grad`` each program is also differentiated (the mean square of its first output, with
grad enabled) and every parameter's gradient compared with eager's (``rtol=1e-3``,
``atol=1e-5``): a row whose values match but whose gradients do not says so.
One fresh process per model type (a crash or a hang is that row's), printed as a table:

    python benchmarks/hf_probe.py glm4 qwen3_next mra --dynamic
    python benchmarks/hf_probe.py --from-file types.txt --json out.json

``--images``: image-classification architectures instead (``vit``, ``segformer``...: the
``AutoModelForImageClassification`` class of the type, its int config fields shrunk as above,
called on ``pixel_values`` of batch 2 at the config's image size, at most 64; 224 when eager
fails there; the default config at its image size when eager fails with the shrunk one),
``Dim.AUTO`` on the batch under ``--dynamic``, each program then also called at
batch 1 and 3 and compared with eager there (``python benchmarks/hf_probe.py --images --all
--dynamic``: every type transformers maps to such a head).

A row whose config cannot be shrunk so, or whose eager call fails, says so: a probe, not a
corpus case (``benchmarks/corpus_models.py`` holds those, with configs written per model).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings

_SHRINK = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, intermediate_size=128, vocab_size=128,
               max_position_embeddings=64, head_dim=16, use_cache=False, pad_token_id=0,
               d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
               num_layers=2, num_heads=4, d_ff=128, d_kv=16, moe_intermediate_size=32,
               num_experts=4, num_local_experts=4, num_experts_per_tok=2,
               shared_expert_intermediate_size=64, n_routed_experts=4, n_shared_experts=1)


def _first_tensor(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def _gradients(module, kwargs) -> dict:
    """Each parameter's gradient of the mean square of ``module``'s first output."""
    module.zero_grad(set_to_none=True)
    _first_tensor(module(**kwargs)).float().pow(2).mean().backward()
    return {name: p.grad for name, p in module.named_parameters()}


def _gradients_differ(want: dict, got: dict) -> list:
    import torch

    return [name for name, grad in want.items()
            if (grad is None) != (got.get(name) is None) or (grad is not None and not
                                                             torch.allclose(got[name], grad,
                                                                            rtol=1e-3, atol=1e-5))]


def probe(model_type: str, dynamic: bool, grad: bool = False) -> dict:
    """One model type, in this process: the row (see the module docstring)."""
    import torch
    import transformers

    import unbroken

    row = {"model_type": model_type, "dynamic": dynamic}
    try:
        default = transformers.AutoConfig.for_model(model_type)
        config = transformers.AutoConfig.for_model(
            model_type, **{k: v for k, v in _SHRINK.items() if hasattr(default, k)})
        layer_types = getattr(config, "layer_types", None)
        if isinstance(layer_types, list) and len(layer_types) > 2:
            config.layer_types = layer_types[:2]
        torch.manual_seed(0)
        try:
            model = transformers.AutoModelForCausalLM.from_config(config)
        except ValueError:
            model = transformers.AutoModel.from_config(config)
        model.eval()
    except Exception as exc:  # a probe: the row says why
        return {**row, "status": "not built", "error": f"{type(exc).__name__}: {exc}"[:300]}
    row["class"] = type(model).__name__
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 120, (2, 12), generator=generator)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :3] = 0
    kwargs = {"input_ids": ids, "attention_mask": mask}
    if getattr(config, "is_encoder_decoder", False):
        kwargs["decoder_input_ids"] = torch.randint(3, 120, (2, 7), generator=generator)
    try:
        with torch.no_grad():
            expected = _first_tensor(model(**kwargs))
    except Exception as exc:
        return {**row, "status": "eager fails", "error": f"{type(exc).__name__}: {exc}"[:300]}
    spec = {k: {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO} for k in kwargs} \
        if dynamic else None
    row["status"] = "probed"
    for side, export in (("torch", torch.export.export), ("unbroken", unbroken.export)):
        start = time.perf_counter()
        try:
            program = export(model, (), kwargs, dynamic_shapes=spec)
            with torch.no_grad():
                got = _first_tensor(program.module()(**kwargs))
            same = got is not None and got.shape == expected.shape and torch.allclose(
                got, expected, rtol=1e-4, atol=1e-4)
            row[side] = "exported, same as eager" if same else "exported, DIFFERS from eager"
            if grad and same:
                differ = _gradients_differ(_gradients(model, kwargs),
                                           _gradients(program.module(), kwargs))
                if differ:
                    row[side] = (f"exported, gradients DIFFER from eager ({len(differ)} "
                                 f"parameters: {', '.join(differ[:3])})")[:200]
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            row[side] = f"{type(exc).__name__}: {first}"[:200]
        row[f"{side}_s"] = round(time.perf_counter() - start, 2)
    return row


def _image_config(transformers, model_type: str):
    """The type's default config with its int fields of ``_SHRINK`` (and a 32-pixel image)
    shrunk; list-valued ones (per-stage widths) kept, as the stages must agree."""
    default = transformers.AutoConfig.for_model(model_type)
    wanted = {**_SHRINK, "image_size": 32, "num_labels": 3}
    return transformers.AutoConfig.for_model(model_type, **{
        key: value for key, value in wanted.items()
        if type(getattr(default, key, None)) is int})


def probe_images(model_type: str, dynamic: bool) -> dict:
    """One image-classification type, in this process (see ``--images``)."""
    import torch
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as HEADS,
    )

    import unbroken

    row = {"model_type": model_type, "dynamic": dynamic}
    generator = torch.Generator().manual_seed(0)

    def logits(call, batch_pixels):
        with torch.no_grad():
            return _first_tensor(call(pixel_values=batch_pixels))

    failure = None
    # the shrunk config, else (its stages disagreeing) the default one at its own image size
    for shrunk in (True, False):
        try:
            config = _image_config(transformers, model_type) if shrunk else \
                transformers.AutoConfig.for_model(model_type, num_labels=3)
            if hasattr(config, "vision_config") or not isinstance(HEADS.get(model_type), str):
                return {**row, "status": "not built", "error": "a composite or multi-head type"}
            torch.manual_seed(0)
            model = getattr(transformers, HEADS[model_type])(config).eval()
        except Exception as exc:  # a probe: the row says why
            failure = failure or f"not built: {type(exc).__name__}: {exc}"[:300]
            continue
        size = getattr(config, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(config, "num_channels", 3)
        for side in ((min(size, 64), 224) if shrunk else (size,)):
            try:
                example = torch.randn(2, channels, side, side, generator=generator)
                expected = logits(model, example)
                break
            except Exception as exc:
                failure = failure or f"eager fails: {type(exc).__name__}: {exc}"[:300]
        else:
            continue
        break
    else:
        status, _, error = failure.partition(": ")
        return {**row, "status": status, "error": error}
    row["class"] = type(model).__name__
    row["config"] = "shrunk" if shrunk else "default"

    def pixels(batch, side):
        return torch.randn(batch, channels, side, side, generator=generator)
    spec = {"pixel_values": {0: torch.export.Dim.AUTO}} if dynamic else None
    others = [pixels(1, side), pixels(3, side)] if dynamic else []
    row["status"] = "probed"
    for name, export in (("torch", torch.export.export), ("unbroken", unbroken.export)):
        start = time.perf_counter()
        try:
            program = export(model, (), {"pixel_values": example}, dynamic_shapes=spec)
            verdict = "exported, same as eager"
            for batch_pixels, want in [(example, expected),
                                       *((p, logits(model, p)) for p in others)]:
                try:
                    got = logits(program.module(), batch_pixels)
                except Exception as exc:
                    verdict = (f"exported, batch {batch_pixels.shape[0]} refused: "
                               f"{type(exc).__name__}: {str(exc).splitlines()[0]}")[:200]
                    break
                if got is None or got.shape != want.shape or not torch.allclose(
                        got, want, rtol=1e-4, atol=1e-4):
                    verdict = f"exported, DIFFERS from eager at batch {batch_pixels.shape[0]}"
                    break
            row[name] = verdict
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            row[name] = f"{type(exc).__name__}: {first}"[:200]
        row[f"{name}_s"] = round(time.perf_counter() - start, 2)
    return row


def _run(model_type: str, dynamic: bool, timeout: float, images: bool = False,
         grad: bool = False) -> dict:
    command = [sys.executable, __file__, "--one", model_type] + (["--dynamic"] if dynamic else [])
    command += ["--images"] if images else []
    command += ["--grad"] if grad else []
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model_type": model_type, "dynamic": dynamic, "status": f"timeout {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return {"model_type": model_type, "dynamic": dynamic, "status": "crashed",
                "error": tail[:300]}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_types", nargs="*", help="transformers model types")
    parser.add_argument("--from-file", help="a file of model types, one per line")
    parser.add_argument("--dynamic", action="store_true", help="Dim.AUTO on both input dims")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per model type")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--images", action="store_true",
                        help="image-classification types on pixel_values (Dim.AUTO: batch)")
    parser.add_argument("--all", action="store_true",
                        help="with --images: every type transformers maps to such a head")
    parser.add_argument("--grad", action="store_true",
                        help="also compare every parameter's gradient with eager's (text)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the worker: one row, as JSON
    args = parser.parse_args(argv)
    if args.one:  # a worker process of its own: its warnings and logs are not the table's
        warnings.simplefilter("ignore")
        import transformers
        transformers.logging.set_verbosity_error()
        row = probe_images(args.one, args.dynamic) if args.images else \
            probe(args.one, args.dynamic, args.grad)
        print(json.dumps(row))
        return 0
    types = list(args.model_types)
    if args.all and args.images:
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as HEADS,
        )
        types += list(HEADS)
    if args.from_file:
        with open(args.from_file) as listed:
            types += [line.strip() for line in listed if line.strip()]
    rows = []
    for model_type in types:
        row = _run(model_type, args.dynamic, args.timeout, args.images, args.grad)
        rows.append(row)
        sides = " | ".join(f"{side}: {row[side]} ({row.get(side + '_s')} s)"
                           for side in ("torch", "unbroken") if side in row)
        print(f"{model_type}: {sides or row['status'] + ' ' + row.get('error', '')}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    probed = [r for r in rows if r.get("status") == "probed"]
    torch_ok = [r for r in probed if str(r.get("torch", "")).endswith("same as eager")]
    ours_ok = [r for r in probed if str(r.get("unbroken", "")).endswith("same as eager")]
    print(f"{len(probed)} probed of {len(rows)}; same as eager: torch {len(torch_ok)}, "
          f"unbroken {len(ours_ok)}; torch only: "
          f"{[r['model_type'] for r in torch_ok if r not in ours_ok]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
