"""Realistic small architectures, written the way people write them (configs, helper functions,
module containers), to find where export fails on real code.

Same :class:`ZooEntry` protocol as ``tests/models/zoo.py``: seeded, CPU-small, eval mode unless
the entry says otherwise (``train=True``). ``random=True`` marks models whose output is random
(dropout in train mode): only shapes are compared.

| name                 | covers                                                                  |
|----------------------|-------------------------------------------------------------------------|
| resnet_basic_block   | conv/bn/relu, 1x1 downsample branch, residual add                       |
| tiny_resnet          | stem, nn.Sequential of blocks built by a _make_layer helper, avg pool   |
| mobilenet_v2_block   | inverted residual: expand 1x1, depthwise 3x3, ReLU6, use_res_connect    |
| gpt2_block           | @dataclass config, tril mask buffer, masked_fill(mask == 0), split,     |
|                      | GELU tanh, weight tying of embedding and lm head                        |
| bert_embeddings      | word + position + token_type, arange(device=), expand_as, LN, Dropout   |
| vit_patch_embed      | conv patchify, flatten(2).transpose(1, 2), cls token expand + cat       |
| tiny_unet            | down/up path, max pool, interpolate(scale 2) + ConvTranspose2d, cat skip |
| gru_encoder          | nn.GRU, h[-1] head                                                      |
| rotary_attention     | RoPE with sin/cos, stack((-x2, x1), -1).flatten(-2), einsum            |
| rmsnorm_swiglu       | hand-written RMSNorm (rsqrt), SwiGLU MLP (silu(w1 x) * w3 x)            |
| moe_topk             | router, topk, softmax over top-k, dense masked combination of experts   |
| mha_padding_mask     | nn.MultiheadAttention with key_padding_mask, need_weights=False         |
| decoder_layer        | nn.TransformerDecoderLayer (batch_first, eval) with a causal tgt mask   |
| embedding_bag        | nn.Embedding + nn.EmbeddingBag(mode="mean") with offsets                |
| misc_routing         | F.pad, chunk + tuple unpack, permute(*dims), size()[-1], Identity,      |
|                      | ModuleDict routing by a string attribute                                |
| weight_norm          | torch.nn.utils.parametrizations.weight_norm on Linear and Conv1d        |
| dropout_train        | Dropout in TRAIN mode (random: shapes only)                             |
| batchnorm_train      | BatchNorm2d in TRAIN mode (running stats must update like eager)        |
| conv1d_tcn           | causal dilated Conv1d with left F.pad, residual, GroupNorm              |
| se_block             | squeeze-and-excitation: adaptive_avg_pool2d, sigmoid gate, view(b,c,1,1) |
| lstm_bidir_stack     | 2-layer bidirectional nn.LSTM, concat of final hidden states            |
| moe_accumulate       | soft MoE: out = torch.zeros_like(x); out += w_i * expert_i(x)           |
| standardize_no_grad  | helper method decorated with @torch.no_grad()                           |
| kv_cache_attention   | LLaMA-style KV cache: self.cache_k[:bsz, :seqlen] = xk                  |
| super_resolution     | PixelShuffle, Upsample(bilinear), F.normalize, nn.Unflatten             |
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

SEED = 0


@dataclass(frozen=True)
class ZooEntry:
    """One realistic model (see ``tests/models/zoo.py`` for the protocol).

    train:  build in train mode instead of eval mode.
    random: the output is random (dropout in train mode): compare shapes only.
    fast_path: eager in eval mode under no_grad takes the fused attention fast path; exported
            with grad on, the program records the differentiable path and refuses a no_grad
            call (``tests.exactness.FAST_PATH``).
    """

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], tuple]
    slow: bool = False
    train: bool = False
    random: bool = False
    fast_path: bool = False

    def make(self) -> tuple[nn.Module, tuple]:
        torch.manual_seed(SEED)
        model = self.build()
        model.train(self.train)
        return model, self.inputs(torch.Generator().manual_seed(SEED))

    def fresh_args(self, seed: int) -> tuple:
        return self.inputs(torch.Generator().manual_seed(SEED + 1000 + seed))


def _randn(*shape: int) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randn(*shape, generator=g),)


def _randomize_bn(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)


# -- ResNet ------------------------------------------------------------------------------------

def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNetBlockModel(nn.Module):
    def __init__(self):
        super().__init__()
        down = nn.Sequential(conv1x1(8, 16, 2), nn.BatchNorm2d(16))
        self.block = BasicBlock(8, 16, stride=2, downsample=down)
        _randomize_bn(self)

    def forward(self, x):
        return self.block(x)


class TinyResNet(nn.Module):
    def __init__(self, layers=(1, 1), num_classes: int = 10):
        super().__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, 8, layers[0])
        self.layer2 = self._make_layer(BasicBlock, 16, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16 * BasicBlock.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        _randomize_bn(self)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x

    def forward(self, x):
        return self._forward_impl(x)


# -- MobileNetV2 -------------------------------------------------------------------------------

class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups,
                      bias=False),
            nn.BatchNorm2d(out_planes),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        self.stride = stride
        assert stride in [1, 2]
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ])
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        else:
            return self.conv(x)


class MobileNetV2Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            InvertedResidual(8, 8, 1, 6),    # residual
            InvertedResidual(8, 16, 2, 6),   # no residual
            InvertedResidual(16, 16, 1, 1),  # expand_ratio 1
        )
        _randomize_bn(self)

    def forward(self, x):
        x = self.features(x)
        return nn.functional.adaptive_avg_pool2d(x, 1).reshape(x.shape[0], -1)


# -- GPT-2 -------------------------------------------------------------------------------------

@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True


class NewGELU(nn.Module):
    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class GPTMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = GPTMLP(config)
        self.new_gelu = NewGELU()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig | None = None):
        super().__init__()
        config = config or GPTConfig()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([GPTBlock(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        # NewGELU is exercised on a slice so the hand-written tanh GELU is in the graph too
        return logits + 0.01 * self.transformer.h[0].new_gelu(logits)


def _gpt_tokens(g):
    return (torch.randint(0, 64, (2, 12), generator=g),)


# -- BERT embeddings ---------------------------------------------------------------------------

@dataclass
class BertConfig:
    vocab_size: int = 100
    hidden_size: int = 32
    max_position_embeddings: int = 32
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1
    pad_token_id: int = 0


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        config = config or BertConfig()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        if position_ids is None:
            position_ids = torch.arange(seq_length, dtype=torch.long, device=input_ids.device)
            position_ids = position_ids.unsqueeze(0).expand_as(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_shape, dtype=torch.long, device=input_ids.device)
        inputs_embeds = self.word_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings + position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


def _bert_inputs(g):
    ids = torch.randint(0, 100, (2, 10), generator=g)
    types = torch.randint(0, 2, (2, 10), generator=g)
    return ids, types


# -- ViT patch embedding -----------------------------------------------------------------------

class PatchEmbed(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, embed_dim=32):
        super().__init__()
        self.img_size = (img_size, img_size)
        self.patch_size = (patch_size, patch_size)
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        B, C, H, W = x.shape
        assert H == self.img_size[0] and W == self.img_size[1], "input size mismatch"
        x = self.proj(x).flatten(2).transpose(1, 2)  # B, N, D
        return x


class ViTStem(nn.Module):
    def __init__(self, embed_dim=32, num_classes=5):
        super().__init__()
        self.patch_embed = PatchEmbed(embed_dim=embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(p=0.1)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        B = x.shape[0]
        x = self.patch_embed(x)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x = x + self.pos_embed
        x = self.pos_drop(x)
        x = self.norm(x)
        return self.head(x[:, 0])


# -- UNet --------------------------------------------------------------------------------------

class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.up = None
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="nearest")
        else:
            x1 = self.up(x1)
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class TinyUNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=2):
        super().__init__()
        self.inc = DoubleConv(n_channels, 8)
        self.down1 = Down(8, 16)
        self.down2 = Down(16, 32)
        self.up1 = Up(32 + 16, 16, bilinear=True)
        self.up2 = Up(16, 8, bilinear=False)
        self.outc = nn.Conv2d(8, n_classes, kernel_size=1)
        _randomize_bn(self)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


# -- GRU ---------------------------------------------------------------------------------------

class GRUEncoder(nn.Module):
    def __init__(self, vocab=50, emb=16, hidden=24, num_layers=2, num_classes=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, num_layers=num_layers, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, tokens):
        embedded = self.embedding(tokens)
        output, h = self.gru(embedded)
        return self.fc(h[-1])


def _gru_tokens(g):
    return (torch.randint(0, 50, (3, 7), generator=g),)


# -- Rotary embeddings -------------------------------------------------------------------------

def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(x, sincos):
    sin, cos = map(lambda t: t[None, :, None, :].repeat_interleave(2, 3), sincos)
    return (x * cos) + (rotate_every_two(x) * sin)


def fixed_pos_embedding(dim, seq_len, device):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim))
    positions = torch.arange(seq_len, device=device).float()
    sinusoid_inp = torch.einsum("i , j -> i j", positions, inv_freq)
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


class RotaryAttention(nn.Module):
    def __init__(self, dim=32, n_heads=4):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        sincos = fixed_pos_embedding(self.head_dim, seqlen, x.device)
        xq = apply_rotary_pos_emb(xq, sincos)
        xk = apply_rotary_pos_emb(xk, sincos)
        scores = torch.einsum("bqhd,bkhd->bhqk", xq, xk) / math.sqrt(self.head_dim)
        probs = scores.float().softmax(dim=-1).type_as(xq)
        out = torch.einsum("bhqk,bkhd->bqhd", probs, xv).reshape(bsz, seqlen, -1)
        return self.wo(out)


# -- RMSNorm + SwiGLU --------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, multiple_of: int = 16):
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaMLPBlock(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, 4 * dim)
        with torch.no_grad():
            self.ffn_norm.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        return x + self.feed_forward(self.ffn_norm(x))


# -- Mixture of experts ------------------------------------------------------------------------

class MoE(nn.Module):
    def __init__(self, dim=16, num_experts=4, top_k=2, hidden=32):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([
            nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
            for _ in range(num_experts)
        ])

    def forward(self, x):
        orig_shape = x.shape
        x = x.view(-1, x.shape[-1])
        logits = self.gate(x)
        topk_logits, topk_idx = torch.topk(logits, self.top_k, dim=-1)
        topk_weights = F.softmax(topk_logits, dim=-1, dtype=torch.float).to(x.dtype)
        # dense combination: every expert runs on every token, weighted by a mask
        dense_weights = torch.zeros_like(logits).scatter(1, topk_idx, topk_weights)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            out = out + dense_weights[:, i:i + 1] * expert(x)
        return out.view(*orig_shape)


# -- nn.MultiheadAttention with key_padding_mask ----------------------------------------------

class MHAPadding(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x, lengths):
        T = x.size(1)
        key_padding_mask = torch.arange(T, device=x.device)[None, :] >= lengths[:, None]
        attn_out, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        return self.norm(x + attn_out)


def _mha_inputs(g):
    x = torch.randn(2, 6, 32, generator=g)
    lengths = torch.randint(2, 7, (2,), generator=g)
    return x, lengths


# -- nn.TransformerDecoderLayer ----------------------------------------------------------------

class DecoderLayerModel(nn.Module):
    def __init__(self, d_model=32, nhead=4):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.1,
                                                batch_first=True)

    def forward(self, tgt, memory):
        T = tgt.size(1)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(T, device=tgt.device)
        return self.layer(tgt, memory, tgt_mask=tgt_mask, tgt_is_causal=True)


def _decoder_inputs(g):
    return torch.randn(2, 5, 32, generator=g), torch.randn(2, 7, 32, generator=g)


# -- Embedding + EmbeddingBag ------------------------------------------------------------------

class EmbeddingBagModel(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.dense_emb = nn.Embedding(vocab, dim)
        self.bag = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.out = nn.Linear(2 * dim, 4)

    def forward(self, ids, flat_ids, offsets):
        a = self.dense_emb(ids).mean(dim=1)
        b = self.bag(flat_ids, offsets)
        return self.out(torch.cat([a, b], dim=-1))


def _bag_inputs(g):
    ids = torch.randint(0, 50, (3, 4), generator=g)
    flat = torch.randint(0, 50, (9,), generator=g)
    offsets = torch.tensor([0, 2, 5])
    return ids, flat, offsets


# -- misc routing ------------------------------------------------------------------------------

class MiscRouting(nn.Module):
    def __init__(self, dim=16, route="mlp"):
        super().__init__()
        self.route = route
        self.dims = (0, 2, 1)
        self.blocks = nn.ModuleDict({
            "mlp": nn.Sequential(nn.Linear(dim, dim), nn.Tanh()),
            "identity": nn.Identity(),
        })
        self.skip = nn.Identity()
        self.conv = nn.Conv1d(dim, dim, kernel_size=3)

    def forward(self, x):
        a, b = torch.chunk(x, 2, dim=-1)
        x = torch.cat((b, a), dim=-1)
        x = self.blocks[self.route](x)
        x = x.permute(*self.dims)  # B, C, T
        x = F.pad(x, (2, 0), mode="constant", value=0.0)
        x = self.conv(x)
        x = x.permute(*self.dims)
        scale = x.size()[-1] ** -0.5
        return self.skip(x) * scale


# -- weight_norm -------------------------------------------------------------------------------

class WeightNormModel(nn.Module):
    def __init__(self):
        super().__init__()
        wn = torch.nn.utils.parametrizations.weight_norm
        self.conv = wn(nn.Conv1d(4, 8, kernel_size=3, padding=1))
        self.fc = wn(nn.Linear(8, 3), name="weight", dim=0)

    def forward(self, x):
        x = F.leaky_relu(self.conv(x), 0.2)
        return self.fc(x.mean(-1))


# -- train-mode models -------------------------------------------------------------------------

class DropoutTrain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class BatchNormTrain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8, momentum=0.1)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


# -- TCN / SE / bi-LSTM ------------------------------------------------------------------------

class CausalConv1d(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, dilation=1):
        super().__init__()
        self.left_pad = (kernel_size - 1) * dilation
        self.conv = nn.Conv1d(in_ch, out_ch, kernel_size, dilation=dilation)

    def forward(self, x):
        return self.conv(F.pad(x, (self.left_pad, 0)))


class TCN(nn.Module):
    def __init__(self, ch=8, levels=3):
        super().__init__()
        self.layers = nn.ModuleList(
            [CausalConv1d(ch, ch, kernel_size=3, dilation=2 ** i) for i in range(levels)])
        self.norm = nn.GroupNorm(2, ch)

    def forward(self, x):
        for layer in self.layers:
            x = x + F.gelu(layer(x))
        return self.norm(x)


class SEBlock(nn.Module):
    def __init__(self, channels=16, reduction=4):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Sequential(
            nn.Linear(channels, channels // reduction, bias=False),
            nn.ReLU(inplace=True),
            nn.Linear(channels // reduction, channels, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        x = self.conv(x)
        b, c, _, _ = x.size()
        y = F.adaptive_avg_pool2d(x, 1).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y.expand_as(x)


class BiLSTMStack(nn.Module):
    def __init__(self, d_in=8, hidden=12):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, 2)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)
        h = torch.cat((h_n[-2], h_n[-1]), dim=1)
        return self.head(h)


# -- patterns found failing (kept as realistic models) ----------------------------------------

class MoEAccumulate(nn.Module):
    """Soft MoE that accumulates expert outputs into a zeros_like buffer with ``+=``."""

    def __init__(self, dim=16, num_experts=4):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(num_experts)])

    def forward(self, x):
        weights = self.gate(x).softmax(dim=-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            out += weights[..., i:i + 1] * expert(x)
        return out


class StandardizeNoGrad(nn.Module):
    """A helper decorated with ``@torch.no_grad()`` (statistics used as constants)."""

    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    @torch.no_grad()
    def _scale(self, x):
        return x.std(dim=-1, keepdim=True) + 1e-5

    def forward(self, x):
        return self.fc(x) / self._scale(x)


class KVCacheAttention(nn.Module):
    """LLaMA-style KV cache: the new keys/values are written into a slice of a buffer."""

    def __init__(self, dim=16, max_batch=2, max_seq=8):
        super().__init__()
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.register_buffer("cache_k", torch.zeros(max_batch, max_seq, dim), persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch, max_seq, dim), persistent=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        self.cache_k[:bsz, :seqlen] = self.wk(x)
        self.cache_v[:bsz, :seqlen] = self.wv(x)
        keys = self.cache_k[:bsz, :seqlen]
        values = self.cache_v[:bsz, :seqlen]
        att = (x @ keys.transpose(1, 2)).softmax(-1)
        return att @ values


class SuperResolutionHead(nn.Module):
    """ESPCN-style head: PixelShuffle, bilinear Upsample, F.normalize, Unflatten."""

    def __init__(self, channels=16, upscale=2):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.shuffle = nn.PixelShuffle(upscale)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.unflatten = nn.Unflatten(1, (channels // upscale ** 2, -1))

    def forward(self, x):
        y = self.up(self.shuffle(torch.tanh(self.conv(x))))
        return self.unflatten(F.normalize(y.flatten(1), dim=-1))


REALISTIC: dict[str, ZooEntry] = {e.name: e for e in [
    ZooEntry("resnet_basic_block", ResNetBlockModel, _randn(2, 8, 8, 8)),
    ZooEntry("tiny_resnet", TinyResNet, _randn(2, 3, 32, 32)),
    ZooEntry("mobilenet_v2_block", MobileNetV2Blocks, _randn(2, 8, 8, 8)),
    ZooEntry("gpt2_block", GPT, _gpt_tokens),
    ZooEntry("bert_embeddings", BertEmbeddings, _bert_inputs),
    ZooEntry("vit_patch_embed", ViTStem, _randn(2, 3, 16, 16)),
    ZooEntry("tiny_unet", TinyUNet, _randn(1, 3, 16, 16)),
    ZooEntry("gru_encoder", GRUEncoder, _gru_tokens),
    ZooEntry("rotary_attention", RotaryAttention, _randn(2, 6, 32)),
    ZooEntry("rmsnorm_swiglu", LlamaMLPBlock, _randn(2, 5, 32)),
    ZooEntry("moe_topk", MoE, _randn(2, 5, 16)),
    ZooEntry("mha_padding_mask", MHAPadding, _mha_inputs, fast_path=True),
    ZooEntry("decoder_layer", DecoderLayerModel, _decoder_inputs),
    ZooEntry("embedding_bag", EmbeddingBagModel, _bag_inputs),
    ZooEntry("misc_routing", MiscRouting, _randn(2, 6, 16)),
    ZooEntry("weight_norm", WeightNormModel, _randn(2, 4, 10)),
    ZooEntry("dropout_train", DropoutTrain, _randn(4, 16), train=True, random=True),
    ZooEntry("batchnorm_train", BatchNormTrain, _randn(4, 3, 8, 8), train=True),
    ZooEntry("conv1d_tcn", TCN, _randn(2, 8, 20)),
    ZooEntry("se_block", SEBlock, _randn(2, 3, 8, 8)),
    ZooEntry("lstm_bidir_stack", BiLSTMStack, _randn(2, 5, 8)),
    ZooEntry("moe_accumulate", MoEAccumulate, _randn(2, 5, 16)),
    ZooEntry("standardize_no_grad", StandardizeNoGrad, _randn(2, 8)),
    ZooEntry("kv_cache_attention", KVCacheAttention, _randn(2, 5, 16)),
    ZooEntry("super_resolution", SuperResolutionHead, _randn(2, 16, 4, 4)),
]}
