# Hugging Face models at 40 tokens, for zest-import: attention as
# zest.attention, never a 40 x 40 score tensor per head.
import torch
import transformers

transformers.logging.set_verbosity_error()

VOCAB, SEQ, BATCH = 64, 40, 2


def _loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


def gpt2():
    """GPT2LMHeadModel: no mask, SDPA's is_causal."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=SEQ,
        n_embd=32,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="sdpa",
        loss_type="ForCausalLM",
    )
    return GPT2LMHeadModel(config), _loss, (torch.randint(1, VOCAB, (BATCH, SEQ)),)


def llama(autocast=False):
    """LlamaForCausalLM with grouped-query attention (4 heads, 2 key/value
    heads) and a padding mask (token 0), a boolean mask per batch row."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
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

    def loss_fn(model, ids):
        mask = torch.cat([torch.ones_like(ids[:, :1]), (ids[:, 1:] != 0).long()], dim=1)
        labels = ids.masked_fill(ids == 0, -100)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return model(input_ids=ids, attention_mask=mask, labels=labels).loss

    ids = torch.randint(1, VOCAB, (BATCH, SEQ))
    ids[1, 30:] = 0  # padding at the end of the second sequence
    return LlamaForCausalLM(config), loss_fn, (ids,)


def llama_autocast():
    """llama() computing in bfloat16 under torch.autocast, its 40 tokens in
    one block of the default 256: PyTorch's math path cannot be traced
    under autocast, so even one block is imported by blocks."""
    return llama(autocast=True)
