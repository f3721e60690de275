# Mixture-of-experts causal LMs from transformers as a user has them: tiny
# configs (4 experts, top-2), random weights, the loss from the model's own
# `labels` path, the experts in transformers' default implementation.
import torch
import transformers

transformers.logging.set_verbosity_error()

VOCAB, SEQ, BATCH = 64, 8, 2
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=SEQ,
    attn_implementation="sdpa",
)


def _causal_lm(model):
    def loss_fn(model, ids):
        return model(input_ids=ids, labels=ids).loss

    torch.manual_seed(1)
    return model, loss_fn, (torch.randint(0, VOCAB, (BATCH, SEQ)),)


def mixtral(**overrides):
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        **COMMON, num_local_experts=4, num_experts_per_tok=2, **overrides
    )
    return _causal_lm(MixtralForCausalLM(config))


def qwen2_moe(**overrides):
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen2MoeConfig(
        **COMMON,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        shared_expert_intermediate_size=40,
        **overrides,
    )
    return _causal_lm(Qwen2MoeForCausalLM(config))


def qwen3_moe(**overrides):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        **COMMON,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        **overrides,
    )
    return _causal_lm(Qwen3MoeForCausalLM(config))


def olmoe(**overrides):
    from transformers import OlmoeConfig, OlmoeForCausalLM

    torch.manual_seed(0)
    config = OlmoeConfig(**COMMON, num_experts=4, num_experts_per_tok=2, **overrides)
    return _causal_lm(OlmoeForCausalLM(config))


def mixtral_aux():
    """Mixtral with its router's load-balancing loss added to the loss
    (output_router_logits)."""
    return mixtral(output_router_logits=True, router_aux_loss_coef=0.1)


def mixtral_eager_experts():
    """Mixtral configured with transformers' eager experts (a loop over the
    experts a batch hits, shapes that depend on the routing)."""
    model, loss_fn, batch = mixtral()
    model.set_experts_implementation("eager")
    return model, loss_fn, batch


def qwen3_batched_experts():
    """Qwen3-MoE with transformers' batched_mm experts (each row gathers
    its expert's weights)."""
    model, loss_fn, batch = qwen3_moe()
    model.set_experts_implementation("batched_mm")
    return model, loss_fn, batch


class _OwnGroupedProduct(torch.nn.Module):
    """A model's own grouped product (torch.nn.functional.grouped_mm):
    rows 0-3 times expert 0, none for expert 1, rows 4-9 expert 2."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 8, 8) * 0.3)
        self.register_buffer("ends", torch.tensor([4, 4, 10], dtype=torch.int32))

    def forward(self, x):
        return torch.nn.functional.grouped_mm(x, self.weight, offs=self.ends)


def own_grouped_mm():
    torch.manual_seed(0)
    model = _OwnGroupedProduct()
    loss_fn = lambda m, x, y: ((m(x) - y) ** 2).mean()
    return model, loss_fn, (torch.randn(10, 8), torch.randn(10, 8))


def deepseek_v3():
    """DeepSeek-V3's routing (sigmoid scores with a correction bias, the
    top groups of experts first, a shared expert) and its multi-head latent
    attention, whose in-place rotary update of a view becomes an
    as_strided_scatter."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(0)
    config = DeepseekV3Config(
        **{**COMMON, "intermediate_size": 48},
        moe_intermediate_size=24,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        n_shared_experts=1,
        first_k_dense_replace=0,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=4,
        qk_nope_head_dim=4,
        v_head_dim=8,
        head_dim=4,
    )
    return _causal_lm(DeepseekV3ForCausalLM(config))


def gpt_oss():
    """GPT-OSS: experts with biases stored [experts, in, out], a clamped
    gate, attention sinks (transformers' eager attention) and a sliding
    window on every other layer."""
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    config = GptOssConfig(
        **{**COMMON, "attn_implementation": "eager"},
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=8,
        sliding_window=4,
        layer_types=["full_attention", "sliding_attention"],
    )
    return _causal_lm(GptOssForCausalLM(config))


def mixtral_autocast():
    """mixtral computing under torch.autocast(bfloat16) from float32
    parameters (the experts' products stay float32, as transformers casts
    their input to the weights' type)."""
    model, loss_fn, batch = mixtral()

    def autocast_loss(model, ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return loss_fn(model, ids)

    return model, autocast_loss, batch
