"""Hugging Face causal LMs at their published sizes, random weights, dropout
off, for bench/vs-pytorch/hf.sh: zest-import factories (FILE.py:FACTORY)
that the eager and FSDP2 side (hf_torch.py) load too, so both run the same
model, loss and micro-batch.

  gpt2      GPT2LMHeadModel, 124M: 12 layers, D=768, 12 heads, vocab 50257,
            the head tied to the token embedding
  gpt2_bf16 gpt2 computing in bfloat16 from float32 parameters (autocast),
            for zestc --param-dtype=bf16
  llama160m LlamaForCausalLM, the "160M" config of issue 25 (125M
            parameters): 12 layers, D=768, GQA 12/4 heads,
            SwiGLU 2048, vocab 32000
  llama160m_bf16  llama160m computing in bfloat16 from float32 parameters
            (autocast), for zestc --param-dtype=bf16
  pythia160m GPTNeoXForCausalLM, Pythia-160M's config: 12 layers, D=768,
            12 heads, parallel residual, rotary on a quarter of each head,
            vocab 50304
  pythia160m_bf16, llama1b_bf16  the same computing in bfloat16 from
            float32 parameters (autocast)

  mixtral350m MixtralForCausalLM, 364M parameters (issue 44's benchmark):
            8 layers, D=768, GQA 12/4 heads, 8 experts of SwiGLU 2048,
            top-2, vocab 32000, the experts in transformers' default
            implementation (bench/vs-pytorch/moe.sh runs it at 256 tokens)
  mixtral8x7b, qwen3_30b_a3b  Mixtral 8x7B's shape (46.7B parameters, 8
            experts, top-2) and Qwen3-30B-A3B's (30.5B, 128 experts,
            top-8), computing in bfloat16, on the meta device: for
            zest-import --shapes-only and zestc --plan-only
            (bench/plan/run.sh build mixtral8x7b 4096 8)

and, for the toolchain's scale (import and compile by hand, docs/Performance.md):

  llama1b   LlamaForCausalLM, 1.2B: 16 layers, D=2048, GQA 32/8 heads,
            SwiGLU 8192, vocab 128256 (Llama 3.2 1B's shape, untied head)
  llama8b   LlamaForCausalLM, 8.0B: 32 layers, D=4096, GQA 32/8 heads,
            SwiGLU 14336, vocab 128256 (Llama 3 8B's shape), for
            zest-import --shapes-only and zestc --plan-only

Each micro-batch is BATCH x SEQ tokens (ZEST_BENCH_BATCH, ZEST_BENCH_SEQ;
default 1 x 128); the loss is the model's own causal-LM loss on the tokens.
"""
import os

import torch
import transformers

transformers.logging.set_verbosity_error()

BATCH = int(os.environ.get("ZEST_BENCH_BATCH", "1"))
SEQ = int(os.environ.get("ZEST_BENCH_SEQ", "128"))


def _factory(model, autocast=False):
    """With `autocast`, the step computes in bfloat16 from float32
    parameters (torch.autocast, what FSDP's MixedPrecision(param_dtype=
    bfloat16) computes; zestc --param-dtype=bf16 gathers them so)."""
    vocab = model.config.vocab_size

    def loss_fn(model, ids):
        if not autocast:
            return model(input_ids=ids, labels=ids).loss
        with torch.autocast(ids.device.type, dtype=torch.bfloat16):
            return model(input_ids=ids, labels=ids).loss

    return model, loss_fn, (torch.randint(0, vocab, (BATCH, SEQ)),)


def gpt2():
    return _factory(_gpt2_model())


def gpt2_bf16():
    """gpt2 computing in bfloat16 from float32 parameters (autocast; for
    zestc --param-dtype=bf16)."""
    return _factory(_gpt2_model(), autocast=True)


def _gpt2_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        # Positions for SEQ tokens past GPT-2's 1024 (bench/attention).
        n_positions=max(1024, SEQ),
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return GPT2LMHeadModel(config)


def _llama(autocast=False, **sizes):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        max_position_embeddings=max(2048, SEQ),
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
        **sizes,
    )
    return _factory(LlamaForCausalLM(config), autocast)


LLAMA160M = dict(
    vocab_size=32000,
    hidden_size=768,
    intermediate_size=2048,
    num_hidden_layers=12,
    num_attention_heads=12,
    num_key_value_heads=4,
)


def llama160m():
    return _llama(**LLAMA160M)


def llama160m_bf16():
    """llama160m computing in bfloat16 from float32 parameters (autocast;
    zestc --param-dtype=bf16 --reduce-dtype=bf16 gathers and reduces so)."""
    return _llama(autocast=True, **LLAMA160M)


def pythia160m():
    return _pythia160m()


def pythia160m_bf16():
    """pythia160m computing in bfloat16 from float32 parameters (autocast;
    for zestc --param-dtype=bf16)."""
    return _pythia160m(autocast=True)


def _pythia160m(autocast=False):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=50304,
        hidden_size=768,
        intermediate_size=3072,
        num_hidden_layers=12,
        num_attention_heads=12,
        rotary_pct=0.25,
        max_position_embeddings=2048,
        use_parallel_residual=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return _factory(GPTNeoXForCausalLM(config), autocast)


def llama8b():
    """Llama 3 8B's shape (8.0B parameters), computing in bfloat16 as
    torchtitan trains it: import with --shapes-only, then zestc --plan-only
    (bench/plan/run.sh); rotary base 500000 as Llama 3."""
    return _llama(
        autocast=True,
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        rope_theta=500000.0,
    )


def llama8b_meta():
    """llama8b built as torchtitan and FSDP2's docs build large models,
    under torch.device("meta"): no storage for any weight (zest-import
    --shapes-only takes its parameters as fake tensors)."""
    with torch.device("meta"):
        return llama8b()


def llama70b():
    """Llama 3 70B's shape (70.6B parameters), computing in bfloat16, built
    on the meta device: for zest-import --shapes-only and zestc --plan-only
    (bench/plan/run.sh build llama70b 4096 64)."""
    with torch.device("meta"):
        return _llama(
            autocast=True,
            vocab_size=128256,
            hidden_size=8192,
            intermediate_size=28672,
            num_hidden_layers=80,
            num_attention_heads=64,
            num_key_value_heads=8,
            rope_theta=500000.0,
        )


LLAMA1B = dict(
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
)


def llama1b():
    return _llama(**LLAMA1B)


def llama1b_bf16():
    """llama1b computing in bfloat16 from float32 parameters (autocast)."""
    return _llama(autocast=True, **LLAMA1B)


def mixtral350m():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=8,
        num_attention_heads=12,
        num_key_value_heads=4,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=max(2048, SEQ),
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return _factory(MixtralForCausalLM(config))


def _autocast_meta(model_class, config):
    with torch.device("meta"):
        return _factory(model_class(config), autocast=True)


def mixtral8x7b():
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=8,
        num_experts_per_tok=2,
        rope_theta=1e6,
        max_position_embeddings=max(32768, SEQ),
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return _autocast_meta(MixtralForCausalLM, config)


def qwen3_30b_a3b():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        rope_theta=1e6,
        max_position_embeddings=max(40960, SEQ),
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return _autocast_meta(Qwen3MoeForCausalLM, config)
