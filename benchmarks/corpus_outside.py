"""The ``outside2`` cases of the corpus: code nobody on this project wrote, chosen before any
fix for it was made (issue 21 item 3).

- more ``transformers`` 5.23.0 architectures (not in ``corpus_models``) from tiny configs;
- transformers' own export wrappers around ``StaticCache`` (``TorchExportableModuleWithStaticCache``
  and ``...WithHybridCache``, prefill and decode; the seq2seq decoder wrapper): the cache
  tensors are registered buffers the forward writes in place, as LLMs are deployed via export;
- ``diffusers`` models (UNets, VAE, DiT, SD3 transformer, ...) from tiny configs;
- lucidrains' einops-based libraries (``x-transformers``, ``local-attention``,
  ``perceiver-pytorch``, ``vector-quantize-pytorch``, ``rotary-embedding-torch``) and two
  attention blocks in the style those libraries are copied in (``einops.rearrange``,
  ``einops.layers.torch.Rearrange``);
- normalizing flows (``zuko``: MAF, neural spline flow) and an ODE solver (``torchdiffeq``:
  fixed-step RK4 and adaptive Dopri5);
- ``torch.nn`` blocks with masks (``nn.Transformer``, ``nn.TransformerEncoder`` with a padding
  mask, ``nn.MultiheadAttention`` with attention and padding masks, ...).

Wrappers written here only call the library as its documentation does (a flow's ``log_prob``,
``odeint`` on a small vector field); the modelled code is the library's.
"""
from __future__ import annotations

import torch
from corpus_cases import (
    HIDDEN,
    IMAGE,
    VOCAB,
    Case,
    Inputs,
    _gen,
    audio,
    bert_like,
    hf,
    llama_like,
    padding_mask,
    pixels,
    seq2seq,
    text,
    with_,
)

G = "outside2"
_TT = with_(text, token_types=True)
_NO_MASK = with_(text, mask=False)
_GPT = dict(vocab_size=VOCAB, use_cache=False)
_T5 = dict(vocab_size=VOCAB, d_model=HIDDEN, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
           use_cache=False, decoder_start_token_id=0)
_ENC_DEC = dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                decoder_ffn_dim=128, max_position_embeddings=64, use_cache=False,
                pad_token_id=1, decoder_start_token_id=2)
_VIT = dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, image_size=32, patch_size=8)

TRANSFORMERS = [
    # decoders
    hf("granite", G, "GraniteForCausalLM", "GraniteConfig", text, **llama_like()),
    hf("cohere", G, "CohereForCausalLM", "CohereConfig", text, **llama_like()),
    hf("olmo2", G, "Olmo2ForCausalLM", "Olmo2Config", text, **llama_like()),
    hf("glm", G, "GlmForCausalLM", "GlmConfig", text, head_dim=16, pad_token_id=0,
       **llama_like()),
    hf("helium", G, "HeliumForCausalLM", "HeliumConfig", text, head_dim=16, **llama_like()),
    hf("nemotron", G, "NemotronForCausalLM", "NemotronConfig", text, head_dim=16,
       **llama_like()),
    hf("persimmon", G, "PersimmonForCausalLM", "PersimmonConfig", text, hidden_size=HIDDEN,
       num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
       max_position_embeddings=64, **_GPT),
    hf("mpt", G, "MptForCausalLM", "MptConfig", text, d_model=HIDDEN, n_heads=4, n_layers=2,
       max_seq_len=64, **_GPT),
    hf("ctrl", G, "CTRLLMHeadModel", "CTRLConfig", text, n_embd=HIDDEN, n_layer=2, n_head=4,
       dff=128, n_positions=64, **_GPT),
    hf("openai_gpt", G, "OpenAIGPTLMHeadModel", "OpenAIGPTConfig", text, n_embd=HIDDEN,
       n_layer=2, n_head=4, n_positions=64, vocab_size=VOCAB),
    hf("smollm3", G, "SmolLM3ForCausalLM", "SmolLM3Config", text, pad_token_id=0,
       **llama_like()),
    hf("gemma3_text", G, "Gemma3ForCausalLM", "Gemma3TextConfig", text, head_dim=16,
       sliding_window=8, **llama_like()),
    hf("qwen3_moe", G, "Qwen3MoeForCausalLM", "Qwen3MoeConfig", text, head_dim=16,
       num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, **llama_like()),
    # encoders
    hf("squeezebert", G, "SqueezeBertModel", "SqueezeBertConfig", text, embedding_size=HIDDEN,
       **bert_like()),
    hf("megatron_bert", G, "MegatronBertModel", "MegatronBertConfig", _TT, **bert_like()),
    hf("data2vec_text", G, "Data2VecTextModel", "Data2VecTextConfig", text, **bert_like()),
    hf("rembert", G, "RemBertModel", "RemBertConfig", text, input_embedding_size=32,
       output_embedding_size=32, **bert_like()),
    hf("xlm", G, "XLMModel", "XLMConfig", text, emb_dim=HIDDEN, n_layers=2, n_heads=4,
       vocab_size=VOCAB, max_position_embeddings=64),
    # vision
    hf("levit", G, "LevitModel", "LevitConfig", with_(pixels, size=64), image_size=64,
       patch_size=16, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4],
       depths=[1, 1, 1], key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2]),
    hf("poolformer", G, "PoolFormerModel", "PoolFormerConfig", pixels, hidden_sizes=[16, 32],
       depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2],
       padding=[2, 1]),
    hf("mobilenet_v2", G, "MobileNetV2Model", "MobileNetV2Config", pixels, depth_multiplier=0.25,
       image_size=32),
    hf("efficientnet", G, "EfficientNetModel", "EfficientNetConfig", pixels, image_size=32,
       width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
    hf("convnextv2", G, "ConvNextV2Model", "ConvNextV2Config", pixels, hidden_sizes=[16, 32],
       depths=[1, 1], num_stages=2),
    hf("swinv2", G, "Swinv2Model", "Swinv2Config", pixels, image_size=32, patch_size=2,
       embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    hf("pvt_v2", G, "PvtV2Model", "PvtV2Config", pixels, image_size=32, num_encoder_blocks=2,
       depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
       patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]),
    hf("focalnet", G, "FocalNetModel", "FocalNetConfig", pixels, image_size=32, patch_size=4,
       embed_dim=16, depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3]),
    hf("siglip_vision", G, "SiglipVisionModel", "SiglipVisionConfig", pixels, **_VIT),
    # audio
    hf("wav2vec2_conformer", G, "Wav2Vec2ConformerModel", "Wav2Vec2ConformerConfig", audio,
       hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
       conv_dim=(32, 32, 32), conv_stride=(5, 4, 4), conv_kernel=(10, 4, 4),
       num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
       conv_depthwise_kernel_size=7, position_embeddings_type="rotary"),
    # encoder-decoders
    hf("mt5", G, "MT5Model", "MT5Config", seq2seq, **_T5),
    hf("umt5", G, "UMT5Model", "UMT5Config", seq2seq, **_T5),
    hf("longt5", G, "LongT5Model", "LongT5Config", seq2seq, local_radius=4, **_T5),
    hf("m2m_100", G, "M2M100Model", "M2M100Config", seq2seq, **_ENC_DEC),
    hf("plbart", G, "PLBartModel", "PLBartConfig", seq2seq, **_ENC_DEC),
]


# --- transformers' StaticCache export wrappers ----------------------------------------------

_CACHE_LEN = 16


def _decoder(config_name: str, class_name: str, **config):
    import transformers

    cfg = getattr(transformers, config_name)(**{**llama_like(), "use_cache": True, **config})
    model = getattr(transformers, class_name)(cfg).eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    return model


def _static_llama():
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    return TorchExportableModuleWithStaticCache(
        _decoder("LlamaConfig", "LlamaForCausalLM"), batch_size=1, max_cache_len=_CACHE_LEN)


def _hybrid_gemma2():
    from transformers.integrations.executorch import TorchExportableModuleWithHybridCache

    return TorchExportableModuleWithHybridCache(
        _decoder("Gemma2Config", "Gemma2ForCausalLM", head_dim=16, sliding_window=8),
        batch_size=1, max_cache_len=_CACHE_LEN)


def _t5_static_decoder():
    import transformers
    from transformers.integrations.executorch import (
        Seq2SeqLMDecoderExportableModuleWithStaticCache,
    )

    cfg = transformers.T5Config(**{**_T5, "use_cache": True})
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    return Seq2SeqLMDecoderExportableModuleWithStaticCache(model, _CACHE_LEN, 1)


def _prefill(batch: int, seq: int) -> Inputs:
    """A prompt of ``seq // 2`` tokens at cache positions 0..: batch 1 (the cache's)."""
    n = max(2, seq // 2)
    ids = torch.randint(3, VOCAB, (1, n), generator=_gen(batch, seq))
    return Inputs(kwargs={"input_ids": ids, "cache_position": torch.arange(n)},
                  auto_dims={"input_ids": (1,), "cache_position": (0,)})


def _decode(batch: int, seq: int) -> Inputs:
    """One token at cache position ``seq // 2`` (after a prompt of that length)."""
    ids = torch.randint(3, VOCAB, (1, 1), generator=_gen(batch, seq))
    return Inputs(kwargs={"input_ids": ids, "cache_position": torch.tensor([seq // 2])})


def _t5_decode(batch: int, seq: int) -> Inputs:
    g = _gen(batch, seq)
    return Inputs(kwargs={"decoder_input_ids": torch.randint(3, VOCAB, (1, 1), generator=g),
                          "encoder_hidden_states": torch.randn(1, seq, HIDDEN, generator=g),
                          "cache_position": torch.tensor([seq // 2])})


STATIC_CACHE = [
    Case("static_cache_prefill", G, _static_llama, inputs=_prefill),
    Case("static_cache_decode", G, _static_llama, inputs=_decode),
    Case("hybrid_cache_prefill", G, _hybrid_gemma2, inputs=_prefill),
    Case("hybrid_cache_decode", G, _hybrid_gemma2, inputs=_decode),
    Case("t5_static_cache_decode", G, _t5_static_decoder, inputs=_t5_decode),
]


# --- diffusers ------------------------------------------------------------------------------

def _diffusers(class_name: str, **config):
    def build():
        import diffusers

        return getattr(diffusers, class_name)(**config).eval()
    return build


def _latents(batch, seq, *, channels=4, size=8, timestep=True, text=0, pooled=0,
             labels=False, image_key="sample"):
    g = _gen(batch, seq)
    kwargs = {image_key: torch.randn(batch, channels, size, size, generator=g)}
    if timestep:
        kwargs["timestep"] = torch.randint(0, 1000, (batch,), generator=g)
    if text:
        kwargs["encoder_hidden_states"] = torch.randn(batch, 6, text, generator=g)
    if pooled:
        kwargs["pooled_projections"] = torch.randn(batch, pooled, generator=g)
    if labels:
        kwargs["class_labels"] = torch.randint(0, 10, (batch,), generator=g)
    return Inputs(kwargs=kwargs, auto_dims={k: (0,) for k in kwargs})


DIFFUSERS = [
    Case("unet2d", G, _diffusers(
        "UNet2DModel", sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D")),
        inputs=with_(_latents, channels=3, size=16)),
    Case("unet2d_condition", G, _diffusers(
        "UNet2DConditionModel", sample_size=16, in_channels=4, out_channels=4,
        layers_per_block=1, block_out_channels=(16, 32), norm_num_groups=8,
        cross_attention_dim=32, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")),
        inputs=with_(_latents, size=16, text=32)),
    Case("autoencoder_kl", G, _diffusers(
        "AutoencoderKL", in_channels=3, out_channels=3, block_out_channels=(16, 32),
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4, norm_num_groups=8, layers_per_block=1, sample_size=IMAGE),
        inputs=with_(_latents, channels=3, size=IMAGE, timestep=False)),
    Case("vq_model", G, _diffusers(
        "VQModel", in_channels=3, out_channels=3, block_out_channels=(16, 32),
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4, norm_num_groups=8, layers_per_block=1, num_vq_embeddings=32,
        sample_size=IMAGE),
        inputs=with_(_latents, channels=3, size=IMAGE, timestep=False)),
    Case("dit", G, _diffusers(
        "DiTTransformer2DModel", num_attention_heads=2, attention_head_dim=16, in_channels=4,
        out_channels=4, num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10),
        inputs=with_(_latents, labels=True, image_key="hidden_states")),
    Case("transformer2d_continuous", G, _diffusers(
        "Transformer2DModel", num_attention_heads=2, attention_head_dim=16, in_channels=32,
        norm_num_groups=8, cross_attention_dim=32, num_layers=1),
        inputs=with_(_latents, channels=32, timestep=False, text=32,
                     image_key="hidden_states")),
    Case("sd3_transformer", G, _diffusers(
        "SD3Transformer2DModel", sample_size=8, patch_size=2, in_channels=4, num_layers=2,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        caption_projection_dim=32, pooled_projection_dim=32, out_channels=4,
        pos_embed_max_size=16),
        inputs=with_(_latents, text=32, pooled=32, image_key="hidden_states")),
]


# --- einops-based libraries -----------------------------------------------------------------

def _tokens(batch, seq, *, vocab=VOCAB, mask=False, key="x"):
    g = _gen(batch, seq)
    kwargs = {key: torch.randint(0, vocab, (batch, seq), generator=g)}
    if mask:
        kwargs["mask"] = padding_mask(batch, seq).bool()
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


def _features(batch, seq, *, dim=HIDDEN, key="x", mask=False):
    g = _gen(batch, seq)
    kwargs = {key: torch.randn(batch, seq, dim, generator=g)}
    if mask:
        kwargs["mask"] = padding_mask(batch, seq).bool()
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


def _x_decoder():
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(num_tokens=VOCAB, max_seq_len=64,
                              attn_layers=Decoder(dim=HIDDEN, depth=2, heads=4,
                                                  rotary_pos_emb=True)).eval()


def _x_encoder():
    from x_transformers import Encoder, TransformerWrapper

    return TransformerWrapper(num_tokens=VOCAB, max_seq_len=64,
                              attn_layers=Encoder(dim=HIDDEN, depth=2, heads=4,
                                                  ff_glu=True)).eval()


def _x_continuous():
    from x_transformers import ContinuousTransformerWrapper, Encoder

    return ContinuousTransformerWrapper(dim_in=HIDDEN, dim_out=8, max_seq_len=64,
                                        attn_layers=Encoder(dim=HIDDEN, depth=2,
                                                            heads=4)).eval()


class _XEncDec(torch.nn.Module):
    """``XTransformer`` called as its README does: ``model(src, tgt, mask=src_mask)``."""

    def __init__(self):
        super().__init__()
        from x_transformers import XTransformer

        self.model = XTransformer(dim=HIDDEN, enc_num_tokens=VOCAB, enc_depth=2, enc_heads=4,
                                  enc_max_seq_len=64, dec_num_tokens=VOCAB, dec_depth=2,
                                  dec_heads=4, dec_max_seq_len=64)

    def forward(self, src, tgt, mask):
        return self.model(src, tgt, mask=mask)


def _xencdec_inputs(batch, seq):
    g = _gen(batch, seq)
    kwargs = {"src": torch.randint(0, VOCAB, (batch, seq), generator=g),
              "tgt": torch.randint(0, VOCAB, (batch, seq - 2), generator=g),
              "mask": padding_mask(batch, seq).bool()}
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


def _local_transformer():
    from local_attention import LocalTransformer

    return LocalTransformer(num_tokens=VOCAB, dim=HIDDEN, depth=2, max_seq_len=64,
                            causal=True, local_attn_window_size=4, heads=4,
                            dim_head=16).eval()


def _perceiver():
    from perceiver_pytorch import Perceiver

    return Perceiver(input_channels=3, input_axis=2, num_freq_bands=4, max_freq=8.0, depth=2,
                     num_latents=16, latent_dim=32, cross_heads=1, latent_heads=4,
                     cross_dim_head=16, latent_dim_head=16, num_classes=10).eval()


def _image_last(batch, seq):
    x = torch.randn(batch, 16, 16, 3, generator=_gen(batch, seq))
    return Inputs(kwargs={"data": x}, auto_dims={"data": (0,)})


class _VQ(torch.nn.Module):
    """``VectorQuantize`` in eval mode: quantized features, code indices, commitment loss."""

    def __init__(self):
        super().__init__()
        from vector_quantize_pytorch import VectorQuantize

        self.vq = VectorQuantize(dim=HIDDEN, codebook_size=32, decay=0.8, commitment_weight=1.0)

    def forward(self, x):
        return self.vq(x)


class _FSQ(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from vector_quantize_pytorch import FSQ

        self.fsq = FSQ(levels=[8, 5, 5, 5], dim=HIDDEN)

    def forward(self, x):
        return self.fsq(x)


class _Rotary(torch.nn.Module):
    """Attention with ``rotary-embedding-torch`` applied to queries and keys (its README)."""

    def __init__(self):
        super().__init__()
        from rotary_embedding_torch import RotaryEmbedding

        self.rotary = RotaryEmbedding(dim=8)
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 16).permute(2, 0, 3, 1, 4)
        q = self.rotary.rotate_queries_or_keys(q)
        k = self.rotary.rotate_queries_or_keys(k)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(b, n, HIDDEN)


class _EinopsAttention(torch.nn.Module):
    """The multi-head attention block as lucidrains' vit-pytorch writes it: heads split and
    merged with ``einops.rearrange``, ``einsum`` scores, a key padding mask with ``repeat``."""

    def __init__(self, dim=HIDDEN, heads=4, dim_head=16):
        super().__init__()
        self.heads, self.scale = heads, dim_head ** -0.5
        self.norm = torch.nn.LayerNorm(dim)
        self.to_qkv = torch.nn.Linear(dim, heads * dim_head * 3, bias=False)
        self.to_out = torch.nn.Linear(heads * dim_head, dim)

    def forward(self, x, mask):
        from einops import rearrange, repeat

        qkv = self.to_qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in qkv)
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        mask = repeat(mask, "b j -> b h i j", h=self.heads, i=x.shape[1])
        dots = dots.masked_fill(~mask, -torch.finfo(dots.dtype).max)
        out = torch.einsum("b h i j, b h j d -> b h i d", dots.softmax(dim=-1), v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


class _EinopsViT(torch.nn.Module):
    """A ViT stem as vit-pytorch writes it: ``einops.layers.torch.Rearrange`` patches, a class
    token with ``repeat``, ``Reduce`` mean pooling in the head."""

    def __init__(self, patch=8, dim=HIDDEN):
        super().__init__()
        from einops.layers.torch import Rearrange, Reduce

        self.to_patch = torch.nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
            torch.nn.LayerNorm(patch * patch * 3), torch.nn.Linear(patch * patch * 3, dim))
        self.cls = torch.nn.Parameter(torch.randn(1, 1, dim))
        self.pos = torch.nn.Parameter(torch.randn(1, (IMAGE // patch) ** 2 + 1, dim))
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True)
            for _ in range(2))
        self.head = torch.nn.Sequential(Reduce("b n d -> b d", "mean"), torch.nn.Linear(dim, 10))

    def forward(self, pixel_values):
        from einops import repeat

        x = self.to_patch(pixel_values)
        x = torch.cat([repeat(self.cls, "1 1 d -> b 1 d", b=x.shape[0]), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(x)


EINOPS = [
    Case("x_transformers_decoder", G, _x_decoder, inputs=_tokens),
    Case("x_transformers_encoder", G, _x_encoder, inputs=with_(_tokens, mask=True)),
    Case("x_transformers_continuous", G, _x_continuous, inputs=with_(_features, mask=True)),
    Case("x_transformers_encdec", G, _XEncDec, inputs=_xencdec_inputs),
    Case("local_attention", G, _local_transformer, inputs=_tokens),
    Case("perceiver", G, _perceiver, inputs=_image_last),
    Case("vector_quantize", G, _VQ, inputs=_features),
    Case("fsq", G, _FSQ, inputs=_features),
    Case("rotary_embedding", G, _Rotary, inputs=_features),
    Case("einops_attention", G, _EinopsAttention, inputs=with_(_features, mask=True)),
    Case("einops_vit", G, _EinopsViT, inputs=pixels),
]


# --- normalizing flows and an ODE solver ----------------------------------------------------

class _FlowLogProb(torch.nn.Module):
    """``flow(context).log_prob(x)``, zuko's documented use of a conditional flow."""

    def __init__(self, kind: str):
        super().__init__()
        import zuko

        self.flow = getattr(zuko.flows, kind)(features=4, context=3, transforms=2,
                                              hidden_features=(32, 32))

    def forward(self, x, context):
        return self.flow(context).log_prob(x)


class _FlowSample(torch.nn.Module):
    """``flow(context).sample()`` through ``rsample`` of a fixed base noise: the inverse pass
    (zuko's ``transform.inv``), which is what sampling runs."""

    def __init__(self):
        super().__init__()
        import zuko

        self.flow = zuko.flows.NSF(features=4, context=3, transforms=2, hidden_features=(32, 32))

    def forward(self, z, context):
        return self.flow(context).transform.inv(z)


def _flow_inputs(batch, seq, *, key="x"):
    g = _gen(batch, seq)
    kwargs = {key: torch.randn(4 * batch, 4, generator=g),
              "context": torch.randn(4 * batch, 3, generator=g)}
    return Inputs(kwargs=kwargs, auto_dims={k: (0,) for k in kwargs})


class _ODE(torch.nn.Module):
    """``torchdiffeq.odeint`` of a small neural vector field over ``t`` (its README)."""

    def __init__(self, method: str):
        super().__init__()
        self.method = method
        self.field = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(),
                                         torch.nn.Linear(32, 4))

    def forward(self, y0, t):
        from torchdiffeq import odeint

        options = {"step_size": 0.1} if self.method == "rk4" else None
        return odeint(lambda _t, y: self.field(y), y0, t, method=self.method,
                      options=options, rtol=1e-3, atol=1e-4)


def _ode_inputs(batch, seq):
    y0 = torch.randn(batch, 4, generator=_gen(batch, seq))
    return Inputs(kwargs={"y0": y0, "t": torch.linspace(0.0, 1.0, 5)},
                  auto_dims={"y0": (0,)})


FLOWS = [
    Case("zuko_maf", G, lambda: _FlowLogProb("MAF"), inputs=_flow_inputs),
    Case("zuko_nsf", G, lambda: _FlowLogProb("NSF"), inputs=_flow_inputs),
    Case("zuko_nsf_inverse", G, _FlowSample, inputs=with_(_flow_inputs, key="z")),
    Case("odeint_rk4", G, lambda: _ODE("rk4"), inputs=_ode_inputs),
    Case("odeint_dopri5", G, lambda: _ODE("dopri5"), inputs=_ode_inputs),
]


# --- torch.nn blocks with masks -------------------------------------------------------------

class _NNTransformer(torch.nn.Module):
    """``nn.Transformer`` with a causal target mask and source/target padding masks."""

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Transformer(d_model=HIDDEN, nhead=4, num_encoder_layers=2,
                                          num_decoder_layers=2, dim_feedforward=128,
                                          dropout=0.0, batch_first=True)

    def forward(self, src, tgt, src_key_padding_mask):
        tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.model(src, tgt, tgt_mask=tgt_mask, tgt_is_causal=True,
                          src_key_padding_mask=src_key_padding_mask,
                          memory_key_padding_mask=src_key_padding_mask)


def _src_tgt(batch, seq):
    g = _gen(batch, seq)
    kwargs = {"src": torch.randn(batch, seq, HIDDEN, generator=g),
              "tgt": torch.randn(batch, seq - 2, HIDDEN, generator=g),
              "src_key_padding_mask": padding_mask(batch, seq) == 0}
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


class _NNEncoder(torch.nn.Module):
    """``nn.TransformerEncoder`` in eval mode with a padding mask (the nested-tensor path)."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(HIDDEN, 4, 128, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)

    def forward(self, x, mask):
        return self.encoder(x, src_key_padding_mask=~mask)


class _NNMha(torch.nn.Module):
    """``nn.MultiheadAttention`` with a float attention mask and a key padding mask,
    returning the averaged weights too."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(HIDDEN, 4, batch_first=True)

    def forward(self, x, mask):
        n = x.shape[1]
        attn_mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.mha(x, x, x, attn_mask=attn_mask, key_padding_mask=~mask)


class _NNMhaFast(torch.nn.Module):
    """``nn.MultiheadAttention`` self-attention without weights and a boolean key padding mask
    (the fused fast path in eval mode)."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(HIDDEN, 4, batch_first=True)

    def forward(self, x, mask):
        return self.mha(x, x, x, key_padding_mask=~mask, need_weights=False)[0]


class _NNDecoderLayer(torch.nn.Module):
    """``nn.TransformerDecoderLayer`` (norm first) with a causal mask and a memory mask."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerDecoderLayer(HIDDEN, 4, 128, dropout=0.0,
                                                      batch_first=True, norm_first=True)

    def forward(self, src, tgt, src_key_padding_mask):
        return self.layer(tgt, src, tgt_is_causal=True,
                          tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
                              tgt.shape[1]),
                          memory_key_padding_mask=src_key_padding_mask)


class _PackedGRU(torch.nn.Module):
    """A bidirectional GRU over ``pack_padded_sequence`` of the lengths of a padding mask."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(HIDDEN, 32, batch_first=True, bidirectional=True)

    def forward(self, x, mask):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, mask.sum(1), batch_first=True,
                                                         enforce_sorted=False)
        out, h = self.gru(packed)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                        total_length=x.shape[1])
        return out, h


NN = [
    Case("nn_transformer_masks", G, lambda: _NNTransformer().eval(), inputs=_src_tgt),
    Case("nn_encoder_padding", G, lambda: _NNEncoder().eval(),
         inputs=with_(_features, mask=True)),
    Case("nn_mha_masks", G, lambda: _NNMha().eval(), inputs=with_(_features, mask=True)),
    Case("nn_mha_fast_path", G, lambda: _NNMhaFast().eval(),
         inputs=with_(_features, mask=True)),
    Case("nn_decoder_layer", G, lambda: _NNDecoderLayer().eval(), inputs=_src_tgt),
    Case("nn_packed_gru", G, lambda: _PackedGRU().eval(), inputs=with_(_features, mask=True)),
]

OUTSIDE2 = TRANSFORMERS + STATIC_CACHE + DIFFUSERS + EINOPS + FLOWS + NN
