# Hugging Face transformers causal LMs as a user has them: built from a tiny
# config with random weights, the loss from the model's own `labels` path.
import torch
import transformers

transformers.logging.set_verbosity_error()

VOCAB, SEQ, BATCH = 64, 8, 2


def _tokens():
    return torch.randint(1, VOCAB, (BATCH, SEQ))


def llama():
    """LlamaForCausalLM with a padding mask: token 0 is padding, masked out
    of attention and of the loss. The masking utilities branch on the mask's
    values, which make_fx cannot trace; zest-import exports the loss first."""
    return _llama()


def llama_autocast_wide_heads():
    """llama under torch.autocast(bfloat16) with 2 query heads of 16 features
    sharing one key/value head: the GPU's 16-bit attention kernels (flash,
    WMMA) with grouped-query heads."""
    model, loss_fn, batch = _llama(num_attention_heads=2, num_key_value_heads=1)
    return model, _autocast(loss_fn), batch


def _llama(**overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    settings.update(overrides)
    model = LlamaForCausalLM(LlamaConfig(**settings))

    def loss_fn(model, ids):
        # The first token always attends, so no row of attention is empty.
        mask = torch.cat([torch.ones_like(ids[:, :1]), (ids[:, 1:] != 0).long()], dim=1)
        labels = ids.masked_fill(ids == 0, -100)
        return model(input_ids=ids, attention_mask=mask, labels=labels).loss

    return model, loss_fn, (_tokens(),)


def _autocast(loss_fn):
    """`loss_fn` under torch.autocast(bfloat16)."""

    def autocast_loss(model, ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return loss_fn(model, ids)

    return autocast_loss


def pythia(autocast=False):
    """GPTNeoXForCausalLM (Pythia's family): rotary embeddings on a quarter of
    each head, attention and MLP in parallel from one residual, an untied
    head; 2 heads of 16 features."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        rotary_pct=0.25,
        max_position_embeddings=SEQ,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    model = GPTNeoXForCausalLM(config)

    def loss_fn(model, ids):
        return model(input_ids=ids, labels=ids).loss

    return model, _autocast(loss_fn) if autocast else loss_fn, (_tokens(),)


def pythia_autocast():
    """pythia under torch.autocast(bfloat16)."""
    return pythia(autocast=True)


def llama_bytes():
    """A Llama over bytes (256 ids, 32 tokens a sample): trained on real
    English text, its bytes as the token stream."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(config)

    def loss_fn(model, ids, targets):
        logits = model(input_ids=ids).logits
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )

    ids = torch.randint(0, 256, (4, 33))
    return model, loss_fn, (ids[:, :-1], ids[:, 1:])


# GPT-2's dropout (0.1 by default), off.
NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def _gpt2(tokens, **overrides):
    """GPT2LMHeadModel from the tiny config with `overrides`, the loss from
    its `labels`, and the batch `tokens()` draws after the weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    settings = dict(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=SEQ,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    settings.update(overrides)
    model = GPT2LMHeadModel(GPT2Config(**settings))

    def loss_fn(model, ids):
        return model(input_ids=ids, labels=ids).loss

    return model, loss_fn, (tokens(),)


def gpt2():
    """GPT2LMHeadModel: learned positions, LayerNorm, tanh-GELU, the head tied
    to the token embedding."""
    return _gpt2(_tokens, **NO_DROPOUT)


def gpt2_eager():
    """gpt2 configured with transformers' eager attention (its own matmul,
    softmax and matmul) instead of SDPA."""
    return _gpt2(_tokens, **NO_DROPOUT, attn_implementation="eager")


def gpt2_autocast():
    """gpt2 computing under torch.autocast(bfloat16) from float32 parameters:
    bf16 constants in the graph, bf16 logits the loss widens."""
    model, loss_fn, batch = gpt2()
    return model, _autocast(loss_fn), batch


def gpt2_autocast_wide_heads():
    """gpt2_autocast with 2 heads of 16 features: head dimensions the GPU's
    16-bit attention kernels (flash, WMMA) take."""
    model, loss_fn, batch = _gpt2(_tokens, **NO_DROPOUT, n_head=2)
    return model, _autocast(loss_fn), batch


def gpt2_dropout():
    """GPT2LMHeadModel with its default dropout (0.1 on embeddings, residuals
    and attention weights, the last inside scaled_dot_product_attention)."""
    return _gpt2(_tokens)


def gpt2_long():
    """A narrow GPT2LMHeadModel over a long sequence (512 tokens, no
    dropout): activations dominate its memory, as at published sizes."""
    return _gpt2(
        lambda: torch.randint(1, VOCAB, (1, 512)),
        n_layer=3,
        n_head=2,
        n_positions=512,
        **NO_DROPOUT,
    )


def llama_meta():
    """llama built under torch.device("meta"), as torchtitan and FSDP2's docs
    build large models: its parameters (and rotary table) have no values."""
    with torch.device("meta"):
        return llama()
