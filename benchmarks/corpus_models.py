"""The Hugging Face ``transformers`` cases of the corpus: tiny random configs built in code.

Sizes: hidden 64 (vision/audio stems smaller where the architecture needs it), 2 layers, batch 2,
seq 12, attention mask padded on the second row. Decoders run with ``use_cache=False`` except
the case that measures the KV cache as an output (``llama_kv_cache``).
"""
from __future__ import annotations

from corpus_cases import (
    HIDDEN,
    VOCAB,
    Case,
    Inputs,
    audio,
    bert_like,
    hf,
    llama_like,
    pixels,
    seq2seq,
    text,
    with_,
)

_TT = with_(text, token_types=True)
_NO_MASK = with_(text, mask=False)

_GPT = dict(vocab_size=VOCAB, use_cache=False)
_ENC_DEC = dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                decoder_ffn_dim=128, max_position_embeddings=64, use_cache=False,
                pad_token_id=1, decoder_start_token_id=2)
_T5 = dict(vocab_size=VOCAB, d_model=HIDDEN, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
           use_cache=False, decoder_start_token_id=0)
_VIT = dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, image_size=32, patch_size=8)
_W2V = dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, conv_dim=(32, 32, 32), conv_stride=(5, 4, 4),
            conv_kernel=(10, 4, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)

COMMON = [
    # text encoders
    hf("bert", "common", "BertModel", "BertConfig", _TT, **bert_like()),
    hf("distilbert", "common", "DistilBertModel", "DistilBertConfig", text, n_layers=2,
       dim=HIDDEN, n_heads=4, hidden_dim=128, vocab_size=VOCAB, max_position_embeddings=64),
    hf("roberta", "common", "RobertaModel", "RobertaConfig", text, **bert_like()),
    hf("xlm_roberta", "common", "XLMRobertaModel", "XLMRobertaConfig", text, **bert_like()),
    hf("albert", "common", "AlbertModel", "AlbertConfig", _TT, embedding_size=32,
       **bert_like()),
    hf("electra", "common", "ElectraModel", "ElectraConfig", _TT, embedding_size=32,
       **bert_like()),
    hf("deberta", "common", "DebertaModel", "DebertaConfig", text, **bert_like()),
    hf("deberta_v2", "common", "DebertaV2Model", "DebertaV2Config", text, **bert_like()),
    hf("mpnet", "common", "MPNetModel", "MPNetConfig", text, **bert_like()),
    hf("convbert", "common", "ConvBertModel", "ConvBertConfig", text, embedding_size=HIDDEN,
       **bert_like()),
    hf("funnel", "common", "FunnelModel", "FunnelConfig", text, vocab_size=VOCAB,
       block_sizes=[1, 1], d_model=HIDDEN, n_head=4, d_head=16, d_inner=128),
    hf("ernie", "common", "ErnieModel", "ErnieConfig", _TT, **bert_like()),
    hf("mobilebert", "common", "MobileBertModel", "MobileBertConfig", text,
       embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32, num_feedforward_networks=2,
       **bert_like()),
    hf("roformer", "common", "RoFormerModel", "RoFormerConfig", text, **bert_like()),
    hf("modernbert", "common", "ModernBertModel", "ModernBertConfig", text, pad_token_id=0,
       bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
       **bert_like(global_attn_every_n_layers=2, local_attention=8)),
    hf("esm", "common", "EsmModel", "EsmConfig", text, pad_token_id=1, **bert_like()),
    # decoders
    hf("gpt2", "common", "GPT2LMHeadModel", "GPT2Config", text, n_layer=2, n_head=4,
       n_embd=HIDDEN, n_positions=64, **_GPT),
    hf("gpt_neo", "common", "GPTNeoForCausalLM", "GPTNeoConfig", text, num_layers=2,
       num_heads=4, hidden_size=HIDDEN, attention_types=[[["global", "local"], 1]],
       max_position_embeddings=64, window_size=8, **_GPT),
    hf("gpt_neox", "common", "GPTNeoXForCausalLM", "GPTNeoXConfig", text, **llama_like()),
    hf("gptj", "common", "GPTJForCausalLM", "GPTJConfig", text, n_layer=2, n_head=4,
       n_embd=HIDDEN, n_positions=64, rotary_dim=8, **_GPT),
    hf("opt", "common", "OPTForCausalLM", "OPTConfig", text, hidden_size=HIDDEN,
       num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=HIDDEN,
       max_position_embeddings=64, **_GPT),
    hf("bloom", "common", "BloomForCausalLM", "BloomConfig", text, hidden_size=HIDDEN,
       n_layer=2, n_head=4, **_GPT),
    hf("falcon", "common", "FalconForCausalLM", "FalconConfig", text, hidden_size=HIDDEN,
       num_hidden_layers=2, num_attention_heads=4, **_GPT),
    hf("llama", "common", "LlamaForCausalLM", "LlamaConfig", text, **llama_like()),
    hf("mistral", "common", "MistralForCausalLM", "MistralConfig", text, **llama_like()),
    hf("qwen2", "common", "Qwen2ForCausalLM", "Qwen2Config", text, **llama_like()),
    hf("qwen3", "common", "Qwen3ForCausalLM", "Qwen3Config", text, head_dim=16,
       **llama_like()),
    hf("phi", "common", "PhiForCausalLM", "PhiConfig", text, **llama_like()),
    hf("phi3", "common", "Phi3ForCausalLM", "Phi3Config", text, pad_token_id=0,
       **llama_like()),
    hf("gemma", "common", "GemmaForCausalLM", "GemmaConfig", text, head_dim=16,
       **llama_like()),
    hf("gemma2", "common", "Gemma2ForCausalLM", "Gemma2Config", text, head_dim=16,
       sliding_window=8, **llama_like()),
    hf("codegen", "common", "CodeGenForCausalLM", "CodeGenConfig", text, n_layer=2, n_head=4,
       n_embd=HIDDEN, n_positions=64, rotary_dim=8, **_GPT),
    hf("stablelm", "common", "StableLmForCausalLM", "StableLmConfig", text, **llama_like()),
    hf("olmo", "common", "OlmoForCausalLM", "OlmoConfig", text, **llama_like()),
    hf("starcoder2", "common", "Starcoder2ForCausalLM", "Starcoder2Config", text,
       **llama_like()),
    hf("biogpt", "common", "BioGptForCausalLM", "BioGptConfig", text, **bert_like(),
       use_cache=False),
    hf("xglm", "common", "XGLMForCausalLM", "XGLMConfig", text, d_model=HIDDEN, num_layers=2,
       attention_heads=4, ffn_dim=128, max_position_embeddings=64, **_GPT),
    hf("gpt_bigcode", "common", "GPTBigCodeForCausalLM", "GPTBigCodeConfig", text, n_layer=2,
       n_head=4, n_embd=HIDDEN, n_positions=64, **_GPT),
    # encoder-decoders
    hf("t5", "common", "T5Model", "T5Config", seq2seq, **_T5),
    hf("t5_encoder", "common", "T5EncoderModel", "T5Config", text, **_T5),
    hf("bart", "common", "BartModel", "BartConfig", seq2seq, **_ENC_DEC),
    hf("marian", "common", "MarianMTModel", "MarianConfig", seq2seq, **_ENC_DEC),
    hf("mbart", "common", "MBartModel", "MBartConfig", seq2seq, **_ENC_DEC),
    hf("pegasus", "common", "PegasusModel", "PegasusConfig", seq2seq, **_ENC_DEC),
    hf("blenderbot_small", "common", "BlenderbotSmallModel", "BlenderbotSmallConfig", seq2seq,
       **_ENC_DEC),
    # vision
    hf("vit", "common", "ViTModel", "ViTConfig", pixels, **_VIT),
    hf("deit", "common", "DeiTModel", "DeiTConfig", pixels, **_VIT),
    hf("beit", "common", "BeitModel", "BeitConfig", pixels, vocab_size=VOCAB, **_VIT),
    hf("dinov2", "common", "Dinov2Model", "Dinov2Config", pixels, **_VIT),
    hf("swin", "common", "SwinModel", "SwinConfig", pixels, image_size=32, patch_size=2,
       embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    hf("convnext", "common", "ConvNextModel", "ConvNextConfig", pixels,
       hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
    hf("resnet", "common", "ResNetModel", "ResNetConfig", pixels, embedding_size=16,
       hidden_sizes=[16, 32], depths=[1, 1]),
    hf("regnet", "common", "RegNetModel", "RegNetConfig", pixels, embedding_size=16,
       hidden_sizes=[16, 32], depths=[1, 1], groups_width=8),
    hf("mobilevit", "common", "MobileViTModel", "MobileViTConfig", pixels, image_size=32,
       patch_size=2, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32]),
    hf("segformer", "common", "SegformerModel", "SegformerConfig", pixels, num_encoder_blocks=2,
       depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
       patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]),
    hf("clip_vision", "common", "CLIPVisionModel", "CLIPVisionConfig", pixels, **_VIT),
    # audio
    hf("wav2vec2", "common", "Wav2Vec2Model", "Wav2Vec2Config", audio, **_W2V),
    hf("wavlm", "common", "WavLMModel", "WavLMConfig", audio, **_W2V),
    hf("hubert", "common", "HubertModel", "HubertConfig", audio, **_W2V),
    hf("data2vec_audio", "common", "Data2VecAudioModel", "Data2VecAudioConfig", audio,
       **{**_W2V, "num_conv_pos_embeddings": 5}),
]


def whisper(batch: int, seq: int) -> Inputs:
    """Log-mel features (8 bins, 32 frames: ``2 * max_source_positions``) and decoder ids."""
    import torch
    from corpus_cases import _gen

    g = _gen(batch, seq)
    kwargs = {"input_features": torch.randn(batch, 8, 32, generator=g),
              "decoder_input_ids": torch.randint(3, VOCAB, (batch, seq - 2), generator=g)}
    return Inputs(kwargs=kwargs, auto_dims={"input_features": (0,),
                                            "decoder_input_ids": (0, 1)})


def llava(batch: int, seq: int) -> Inputs:
    """A prompt of ``seq`` text tokens after 16 image tokens (one 32x32 image of 8x8 patches),
    and the image: batch and text length dynamic, the image only in batch."""
    import torch
    from corpus_cases import _gen, padding_mask

    g = _gen(batch, seq)
    ids = torch.randint(3, VOCAB - 1, (batch, 16 + seq), generator=g)
    ids[:, 1:17] = VOCAB - 1
    kwargs = {"input_ids": ids, "attention_mask": padding_mask(batch, 16 + seq),
              "pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}
    return Inputs(kwargs=kwargs, auto_dims={"input_ids": (0, 1), "attention_mask": (0, 1),
                                            "pixel_values": (0,)})


def _llava_config():
    import transformers as T

    vision = T.CLIPVisionConfig(**_VIT)
    lm = T.LlamaConfig(**llama_like())
    return dict(vision_config=vision, text_config=lm, image_token_index=VOCAB - 1,
                vision_feature_layer=-1, projector_hidden_act="gelu")


def _clip_config():
    import transformers as T

    return dict(text_config=T.CLIPTextConfig(**bert_like()).to_dict(),
                vision_config=T.CLIPVisionConfig(**_VIT).to_dict(), projection_dim=32)


def _detr_config():
    import transformers as T

    backbone = T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 64],
                              depths=[1, 1, 1, 1], out_features=["stage4"])
    return dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone,
                d_model=HIDDEN, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                num_queries=8)


def _lazy_config(make_config, class_name, config_name):
    """A builder whose config needs other config objects (made inside the worker)."""
    def make():
        import transformers

        cfg = getattr(transformers, config_name)(**make_config())
        return getattr(transformers, class_name)(cfg).eval()
    return make


_MOE = dict(num_local_experts=4, num_experts_per_tok=2)
_MAMBA = dict(hidden_size=HIDDEN, num_hidden_layers=2, vocab_size=VOCAB, state_size=8,
              use_cache=False)

HARDER = [
    hf("llama_kv_cache", "harder", "LlamaForCausalLM", "LlamaConfig", text,
       **{**llama_like(), "use_cache": True}),
    Case("llava", "harder", _lazy_config(_llava_config, "LlavaForConditionalGeneration",
                                         "LlavaConfig"), inputs=llava),
    hf("switch_transformers", "harder", "SwitchTransformersModel", "SwitchTransformersConfig",
       seq2seq, vocab_size=VOCAB, d_model=HIDDEN, d_kv=16, d_ff=128, num_layers=2,
       num_decoder_layers=2, num_heads=4, num_experts=4, expert_capacity=8,
       encoder_sparse_step=1, decoder_sparse_step=1, use_cache=False, decoder_start_token_id=0),
    hf("longformer", "harder", "LongformerModel", "LongformerConfig", text, attention_window=4,
       pad_token_id=1, **bert_like()),
    hf("big_bird", "harder", "BigBirdModel", "BigBirdConfig", text, attention_type="block_sparse",
       block_size=1, num_random_blocks=1, **bert_like()),
    hf("mamba", "harder", "MambaModel", "MambaConfig", _NO_MASK, **_MAMBA),
    hf("falcon_mamba", "harder", "FalconMambaModel", "FalconMambaConfig", _NO_MASK, **_MAMBA),
    hf("mamba2", "harder", "Mamba2Model", "Mamba2Config", _NO_MASK, hidden_size=HIDDEN,
       num_hidden_layers=2, vocab_size=VOCAB, state_size=8, num_heads=8, head_dim=16,
       n_groups=1, chunk_size=4, use_cache=False),
    hf("mixtral", "harder", "MixtralForCausalLM", "MixtralConfig", text, **_MOE,
       **llama_like()),
    hf("qwen2_moe", "harder", "Qwen2MoeForCausalLM", "Qwen2MoeConfig", text, num_experts=4,
       num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
       **llama_like()),
    Case("detr", "harder", _lazy_config(_detr_config, "DetrModel", "DetrConfig"),
         inputs=with_(pixels, size=64)),
    hf("xlnet", "harder", "XLNetModel", "XLNetConfig", text, d_model=HIDDEN, n_layer=2, n_head=4,
       d_inner=128, vocab_size=VOCAB, use_mems_eval=False),
    hf("rwkv", "harder", "RwkvModel", "RwkvConfig", _NO_MASK, hidden_size=HIDDEN,
       num_hidden_layers=2, attention_hidden_size=HIDDEN, intermediate_size=128,
       vocab_size=VOCAB, context_length=64, use_cache=False),
    Case("clip", "harder", _lazy_config(_clip_config, "CLIPModel", "CLIPConfig"),
         inputs=lambda b, s: Inputs(
             kwargs={**text(b, s).kwargs, **pixels(b, s).kwargs},
             auto_dims={**text(b, s).auto_dims, **pixels(b, s).auto_dims})),
    hf("whisper", "harder", "WhisperModel", "WhisperConfig", whisper, vocab_size=VOCAB,
       num_mel_bins=8, d_model=HIDDEN, encoder_layers=2, decoder_layers=2,
       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
       decoder_ffn_dim=128, max_source_positions=16, max_target_positions=64, use_cache=False,
       decoder_start_token_id=1, pad_token_id=0),
    hf("led", "harder", "LEDModel", "LEDConfig", seq2seq, attention_window=4,
       max_encoder_position_embeddings=64, max_decoder_position_embeddings=64,
       **{k: v for k, v in _ENC_DEC.items() if k != "max_position_embeddings"}),
]
